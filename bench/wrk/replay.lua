-- Idempotent replays: the same POST /v1/payment_intents with one Idempotency-Key, over
-- and over. The first request charges; every later one is answered from the
-- idempotency store (`Idempotent-Replayed: true`).
--
--   wrk -t1 -c64 -d5s -s bench/wrk/replay.lua http://127.0.0.1:12111
--
-- No request() function: wrk builds the request once. The last line is a
-- machine-readable summary.

wrk.method = "POST"
wrk.path = "/v1/payment_intents"
wrk.body = "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=bench-replay-1"
wrk.headers["Authorization"] = "Bearer sk_test_bench"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Idempotency-Key"] = "bench-replay-1-k"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"rps":%.1f,"p50_us":%d,"p99_us":%d,"status_errors":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
