# Ruby Sidekiq jobs for the benchmark: the same three shapes and the same
# recorder as bench/peers/recorder.py (timestamps in-process, a thread writes
# "count first last" to HSET bench:rec <pid> every 50 ms).
require "sidekiq"
require "redis"

module BenchRecorder
  LOCK = Mutex.new
  STATE = [0, 0.0, 0.0]
  CPU_ITERATIONS = Integer(ENV.fetch("BENCH_CPU_ITERATIONS", "20000"))

  def self.start
    return if @started
    @started = true
    url = ENV.fetch("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
    Thread.new do
      r = Redis.new(url: url)
      written = -1
      loop do
        sleep 0.05
        count, first, last = LOCK.synchronize { STATE.dup }
        next if count == written
        r.hset("bench:rec", Process.pid.to_s, "#{count} #{first} #{last}")
        written = count
      end
    end
  end

  def self.done
    LOCK.synchronize do
      now = Time.now.to_f
      STATE[1] = now if STATE[0].zero?
      STATE[0] += 1
      STATE[2] = now
    end
  end

  def self.cpu_work
    x = 0
    i = 0
    while i < CPU_ITERATIONS
      x += i * i % 7
      i += 1
    end
    x
  end
end

Sidekiq.configure_server do |config|
  config.on(:startup) { BenchRecorder.start }
  # BENCH_JOBLOG=0: no per-job "start"/"done" lines (they are logged at INFO).
  Sidekiq.logger.level = Logger::WARN if ENV["BENCH_JOBLOG"] == "0"
end

class NoopJob
  include Sidekiq::Worker
  def perform
    BenchRecorder.done
  end
end

class CpuJob
  include Sidekiq::Worker
  def perform
    BenchRecorder.cpu_work
    BenchRecorder.done
  end
end

class IoJob
  include Sidekiq::Worker
  def perform
    sleep 0.005
    BenchRecorder.done
  end
end

class RedisCallJob
  include Sidekiq::Worker
  def perform
    Sidekiq.redis { |c| c.incr("bench:calls") }
    BenchRecorder.done
  end
end

# The redis-plain shape: a plain redis-rb client shared by the process's threads
# (redis-rb serialises calls on one connection), as the Python jobs' plain redis-py client.
class RedisPlainCallJob
  include Sidekiq::Worker
  PLAIN = Redis.new(url: ENV.fetch("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"))
  def perform
    PLAIN.incr("bench:calls")
    BenchRecorder.done
  end
end

# bench/latency.py: seconds from the push / the due time to the start of perform.
class PickupJob
  include Sidekiq::Worker
  def perform(sent)
    late = Time.now.to_f - sent
    Sidekiq.redis { |c| c.rpush("bench:lat", late.to_s) }
  end
end

class DueJob
  include Sidekiq::Worker
  def perform(due)
    late = Time.now.to_f - due
    Sidekiq.redis { |c| c.rpush("bench:late", late.to_s) }
  end
end

class HoldJob
  include Sidekiq::Worker
  def perform(seconds)
    sleep seconds
  end
end
