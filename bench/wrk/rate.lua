-- New payments at a fixed total rate (for "p99 at 50% of peak"): like new.lua, but each
-- connection waits a random, exponentially distributed delay (wrk's delay()) between
-- requests, so arrivals are Poisson at about BENCH_RATE requests/s over all
-- BENCH_CONNECTIONS connections (both env, required; -c must equal BENCH_CONNECTIONS).
--
--   BENCH_RATE=20000 BENCH_CONNECTIONS=100 wrk -t1 -c100 -d5s -s bench/wrk/rate.lua http://127.0.0.1:12111
--
-- The last line is a machine-readable summary.

local threads = {}
local counter = 0
local prefix = os.getenv("BENCH_RUN") or tostring(os.time())
local rate = tonumber(os.getenv("BENCH_RATE") or "1000")
local connections = tonumber(os.getenv("BENCH_CONNECTIONS") or "100")
local mean_ms = connections * 1000.0 / rate
local headers = {
  ["Authorization"] = "Bearer sk_test_bench",
  ["Content-Type"] = "application/x-www-form-urlencoded",
}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(os.time() + (tid or 0))
end

function request()
  counter = counter + 1
  local order = prefix .. "-" .. tid .. "-" .. counter
  headers["Idempotency-Key"] = order .. "-k"
  local body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=" .. order
  return wrk.format("POST", "/v1/payment_intents", headers, body)
end

-- wrk takes whole milliseconds: dither the fraction so the mean stays exact.
function delay()
  local d = -mean_ms * math.log(1 - math.random())
  local whole = math.floor(d)
  if math.random() < d - whole then
    whole = whole + 1
  end
  return whole
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p99_us":%d,"status_errors":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
