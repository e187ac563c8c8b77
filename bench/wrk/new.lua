-- New payments: POST /v1/payment_intents with confirm=true, each request with its own
-- order id and Idempotency-Key (a per-thread counter and the thread id), the request
-- `fauxpay load --template stripe` sends.
--
--   wrk -t1 -c64 -d5s -s bench/wrk/new.lua http://127.0.0.1:12111
--
-- BENCH_RUN (env) prefixes the order ids; BENCH_REQUESTS (env, optional) stops each
-- thread after that many requests. The last line is a machine-readable summary.

local threads = {}
local counter = 0
local prefix = os.getenv("BENCH_RUN") or tostring(os.time())
local limit = tonumber(os.getenv("BENCH_REQUESTS") or "0") or 0
local headers = {
  ["Authorization"] = "Bearer sk_test_bench",
  ["Content-Type"] = "application/x-www-form-urlencoded",
}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function request()
  counter = counter + 1
  if limit > 0 and counter > limit then
    wrk.thread:stop()
  end
  local order = prefix .. "-" .. tid .. "-" .. counter
  headers["Idempotency-Key"] = order .. "-k"
  local body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=" .. order
  return wrk.format("POST", "/v1/payment_intents", headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p99_us":%d,"status_errors":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
