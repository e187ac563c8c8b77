-- New payments: POST /v1/payment_intents with confirm=true, each request with its own
-- order id and Idempotency-Key, the request `fauxpay load --template stripe` sends.
--
--   wrk -t1 -c64 -d5s -s bench/wrk/new.lua http://127.0.0.1:12111
--
-- BENCH_RUN (env) prefixes the order ids; BENCH_REQUESTS (env, optional) stops each
-- thread after that many requests. The last line is a machine-readable summary.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")
local limit = tonumber(os.getenv("BENCH_REQUESTS") or "0") or 0

function request()
  local req, sent = common.new_payment()
  if limit > 0 and sent > limit then
    wrk.thread:stop()
  end
  return req
end
