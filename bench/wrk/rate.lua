-- New payments at a fixed total rate (for "p99 at 50% of peak"): like new.lua, but each
-- connection waits a random, exponentially distributed delay (wrk's delay()) between
-- requests, so arrivals are Poisson at about BENCH_RATE requests/s over all
-- BENCH_CONNECTIONS connections (both env, required; -c must equal BENCH_CONNECTIONS).
-- wrk's delays are whole milliseconds, so within a millisecond the arrivals come
-- together, at its tick.
--
--   BENCH_RATE=20000 BENCH_CONNECTIONS=100 wrk -t1 -c100 -d5s -s bench/wrk/rate.lua http://127.0.0.1:12111
--
-- The last line is a machine-readable summary.

local common = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "common.lua")
local rate = tonumber(os.getenv("BENCH_RATE") or "1000")
local connections = tonumber(os.getenv("BENCH_CONNECTIONS") or "100")
local mean_ms = connections * 1000.0 / rate

function init(args)
  math.randomseed(os.time() + (tid or 0))
end

function request()
  return (common.new_payment())
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
