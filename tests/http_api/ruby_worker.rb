# A Ruby Sidekiq worker class no Python process defines: tests/http_api/test_served.py
# pushes it over the HTTP API and runs `sidekiq -r` on this file.
require "json"
require "sidekiq"

class RubyWorker
  include Sidekiq::Worker

  def perform(*args)
    Sidekiq.redis { |redis| redis.rpush("test:ruby-ran", JSON.generate(args)) }
  end
end
