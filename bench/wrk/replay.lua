-- Idempotent replays: the same POST /v1/payment_intents with one Idempotency-Key, over
-- and over. The first request charges; every later one is answered from the
-- idempotency store (`Idempotent-Replayed: true`).
--
--   wrk -t1 -c64 -d5s -s bench/wrk/replay.lua http://127.0.0.1:12111
--
-- No request() function: wrk builds the request once. The last line is a
-- machine-readable summary.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")

wrk.method = "POST"
wrk.path = "/v1/payment_intents"
wrk.body = common.body("bench-replay-1")
for name, value in pairs(common.headers) do
  wrk.headers[name] = value
end
wrk.headers["Idempotency-Key"] = "bench-replay-1-k"
