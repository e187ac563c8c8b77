-- Exactly BENCH_EXACT requests of another script of this folder (BENCH_SCRIPT: new.lua
-- or replay.lua), each answered before the thread stops, for instruction counts per
-- request (bench/callgrind.sh). Run it with one thread:
--
--   BENCH_SCRIPT=new.lua BENCH_EXACT=10000 BENCH_DONE=/tmp/done.fifo \
--     wrk -t1 -c64 -d3600s -s bench/wrk/exact.lua http://127.0.0.1:12111
--
-- Counting sent requests in request() is not exact (the request returned after
-- wrk.thread:stop() is still written, and other connections may have theirs in
-- flight), so a connection takes a ticket in delay(), which wrk calls before each
-- request: with tickets left it sends at once, without them it waits far longer than
-- any run. The thread stops when the last answer has arrived and writes a line to
-- BENCH_DONE (a FIFO, optional); wrk itself still waits out -d unless sent SIGINT,
-- after which it prints its summary. BENCH_REQUESTS must be unset (new.lua would stop
-- the thread itself).

local dir = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(dir .. (os.getenv("BENCH_SCRIPT") or "new.lua"))

local limit = tonumber(os.getenv("BENCH_EXACT") or "0") or 0
local tickets = limit
local answered = 0

function delay()
  if tickets > 0 then
    tickets = tickets - 1
    return 0
  end
  return 24 * 3600 * 1000
end

function response(status, headers, body)
  answered = answered + 1
  if answered == limit then
    wrk.thread:stop()
    local path = os.getenv("BENCH_DONE")
    if path then
      local f = io.open(path, "w")
      if f then
        f:write("done\n")
        f:close()
      end
    end
  end
end
