-- What the wrk scripts share: the new-payment request `fauxpay load --template stripe`
-- sends (each with its own order id and Idempotency-Key, from the thread id and a
-- per-thread counter), and the machine-readable summary line wrk prints last.
-- Loaded by each script with dofile from the script's own folder.
--
-- BENCH_RUN (env) prefixes the order ids.

local common = {}

local prefix = os.getenv("BENCH_RUN") or tostring(os.time())
local counter = 0
local threads = {}

common.headers = {
  ["Authorization"] = "Bearer sk_test_bench",
  ["Content-Type"] = "application/x-www-form-urlencoded",
}

-- The form body of a confirmed payment intent for `order`.
function common.body(order)
  return "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=" .. order
end

-- The next new payment of this thread, and how many it has sent so far.
function common.new_payment()
  counter = counter + 1
  local order = prefix .. "-" .. tid .. "-" .. counter
  common.headers["Idempotency-Key"] = order .. "-k"
  return wrk.format("POST", "/v1/payment_intents", common.headers, common.body(order)), counter
end

-- wrk's hooks: number the threads (order ids), print the summary.
function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p99_us":%d,"status_errors":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end

return common
