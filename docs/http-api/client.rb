# A Ruby client of the wurk_django HTTP API: push a job, then read where it is.
require "json"
require "net/http"

class WurkClient
  def initialize(base_url, token)
    @base = base_url.chomp("/")
    @token = token
  end

  def push(klass, *args, **options)
    call(Net::HTTP::Post, "/jobs", { class: klass, args: args, **options })["jid"]
  end

  # A job pushed without "track" is looked for only in the running work and in `queue`.
  def status(jid, queue: nil)
    call(Net::HTTP::Get, "/jobs/#{jid}#{queue && "?queue=#{URI.encode_www_form_component(queue)}"}")
  end

  private

  def call(verb, path, body = nil)
    uri = URI("#{@base}#{path}")
    request = verb.new(uri, "Authorization" => "Bearer #{@token}", "Content-Type" => "application/json")
    request.body = JSON.generate(body) if body
    response = Net::HTTP.start(uri.host, uri.port, use_ssl: uri.scheme == "https") { |http| http.request(request) }
    data = JSON.parse(response.body)
    raise "#{data["type"]}: #{data["detail"]}" unless response.is_a?(Net::HTTPSuccess)
    data
  end
end

client = WurkClient.new(ENV.fetch("WURK_URL"), ENV.fetch("WURK_TOKEN"))
jid = client.push("shop.jobs.SendReceipt", 42, queue: "mail")
puts "#{jid} #{client.status(jid, queue: "mail")["state"]}"
