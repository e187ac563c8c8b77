#!/usr/bin/env bash
# fauxpay's benchmark: measures the provider and the load generator against their
# ceilings, side by side, in one run, and writes bench/results.md.
#
# Every throughput and latency figure is a ratio against a baseline measured in the same
# run (an axum hello-world, a bare goose scenario), alternating A/B (ABBA order), median
# of BENCH_RUNS runs, with the server pinned to one core and the client to another
# (taskset). Everything listens on 127.0.0.1 only, and every step is bounded in time.
# The new and replay rows each add a reported "ceiling" row: hello-world sending the
# provider's own answer and headers and doing nothing else, against plain hello-world:
# how near hello a provider with no work of its own could come on this host.
# The in-process row adds one too: two threads each on a provider of its own, against
# one thread: what the host gives two busy cores with no contention inside fauxpay.
# It also reports the floors under the new and replay rows: the pipeline alone, in
# process on one thread, against the time each row's target leaves beyond its ceiling.
#
#   bench/run.sh                       # all rows, about 12 minutes (BENCH_RUNS=5: 15)
#   BENCH_ROWS="new replay" bench/run.sh
#   BENCH_ROWS=peers bench/run.sh      # WireMock, localstripe, Locust beside fauxpay (bench/peers.sh)
#
# Knobs (environment): BENCH_ROWS (new replay p99 memory webhooks durable dashboard soak hold load flow rate reconcile inproc;
# peers and restart on request), BENCH_RESTART_SECONDS (600: the restart row's soak with --data-dir and
# --retain, after which the provider is killed -9 and restarted), BENCH_SOAK_KEY_TTL (5s) and BENCH_SOAK_RETAIN (10s): the soak row's
# window, which must hold fewer than BENCH_PAYMENTS payments at the provider's full speed,
# BENCH_RUNS (3), BENCH_SECONDS (5, per wrk run), BENCH_CONNECTIONS (64),
# BENCH_PAYMENTS (1000000; also the payments recovered in the durable row), BENCH_HOLD_CONNECTIONS (10000), BENCH_LOAD_SECONDS (8),
# BENCH_LOAD_USERS (32), BENCH_NO_BUILD (skip cargo build), BENCH_BIN (target/release),
# BENCH_OUT (bench/results.md; bench/results-peers.md for BENCH_ROWS=peers; bench/results-partial.md
# for any other BENCH_ROWS, so a subset never replaces the full table).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${BENCH_ROWS:-"new replay p99 memory webhooks durable dashboard soak hold load flow rate reconcile inproc"}
SOAK_KEY_TTL=${BENCH_SOAK_KEY_TTL:-5s}
SOAK_RETAIN=${BENCH_SOAK_RETAIN:-10s}
RESTART_SECS=${BENCH_RESTART_SECONDS:-600}
RUNS=${BENCH_RUNS:-3}
SECS=${BENCH_SECONDS:-5}
CONNS=${BENCH_CONNECTIONS:-64}
PAYMENTS=${BENCH_PAYMENTS:-1000000}
HOLD=${BENCH_HOLD_CONNECTIONS:-10000}
LOAD_SECS=${BENCH_LOAD_SECONDS:-8}
LOAD_USERS=${BENCH_LOAD_USERS:-32}
# The peers alone (BENCH_ROWS=peers) have their own file, and any other subset of the rows
# its own too (bench/results-partial.md), so that neither replaces the full table.
if [ "${BENCH_ROWS:-}" = peers ]; then
  OUT=${BENCH_OUT:-bench/results-peers.md}
elif [ -n "${BENCH_ROWS:-}" ]; then
  OUT=${BENCH_OUT:-bench/results-partial.md}
else
  OUT=${BENCH_OUT:-bench/results.md}
fi
RATE_CONNS=100

if [ "$(nproc)" -ge 2 ]; then
  SERVER_CPU=0
  CLIENT_CPU=1
else
  SERVER_CPU=0
  CLIENT_CPU=0
  echo "bench: one core only: server and client share it, ratios will be pessimistic" >&2
fi
BIN=${BENCH_BIN:-target/release}

# ---------------------------------------------------------------- preparation
if [ -z "${BENCH_NO_BUILD:-}" ]; then
  cargo build --release -p fauxpay -p fauxpay-bench
fi
if ! command -v wrk >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
  else
    echo "bench: wrk is missing: install it (Debian/Ubuntu: sudo apt-get install -y wrk)" >&2
    exit 2
  fi
fi
for tool in taskset curl timeout getconf; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing" >&2; exit 2; }
done
# 10,000 held connections need as many descriptors in the server and in the client.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((HOLD + 1000)) ]; then
  echo "bench: ulimit -n is $(ulimit -n); the hold row needs $((HOLD + 1000)) (raise the hard limit)" >&2
fi
CLK_TCK=$(getconf CLK_TCK)

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fauxpay-bench.XXXXXX")
PIDS=()
cleanup() {
  # Servers started inside $(...) record their pids in a file (a subshell cannot add to PIDS).
  [ -f "$WORK/peer-pids" ] && mapfile -t -O "${#PIDS[@]}" PIDS <"$WORK/peer-pids"
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- helpers
# What a browser on the dashboard's overview does (live.js): ask /__fauxpay/ui/live every
# 2 s and reload the page when it changed (it always does under load).
dashboard_poller() {
  while :; do
    curl -s -o /dev/null "$1/__fauxpay/ui/live"
    curl -s -o /dev/null "$1/__fauxpay/"
    sleep 2
  done
}

# start_server KIND (provider, hello, or a provider variant below): sets SERVER_PID and
# SERVER_URL.
start_server() {
  local kind=$1 log="$WORK/server-$1.log"
  # provider-durable without $DATA_DIR: a fresh data dir, removed by stop_server.
  SERVER_SCRATCH=
  if [ "$kind" = provider-durable ] && [ -z "${DATA_DIR:-}" ]; then
    SERVER_SCRATCH=$(mktemp -d "$WORK/data.XXXXXX")
  fi
  POLLER_PID=
  case $kind in
    # provider-dashboard: with a dashboard open on it (dashboard_poller, on the client core).
    provider | provider-dashboard) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy >"$log" 2>&1 & ;;
    # The provider delivering every event to $WEBHOOK_URL (a hello-world receiver: 2xx).
    provider-webhook) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy --webhook "$WEBHOOK_URL" >"$log" 2>&1 & ;;
    # The provider keeping its state in a data dir (--fsync ${FSYNC:-batch}).
    provider-durable) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy --data-dir "${DATA_DIR:-$SERVER_SCRATCH}" --fsync "${FSYNC:-batch}" >"$log" 2>&1 & ;;
    # A soak with a data dir: what leaves memory (--retain) is still in the log.
    provider-durable-soak) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy --key-ttl "$SOAK_KEY_TTL" --retain "$SOAK_RETAIN" --data-dir "$DATA_DIR" >"$log" 2>&1 & ;;
    # A soak: keys and objects leave memory (--key-ttl $SOAK_KEY_TTL --retain $SOAK_RETAIN).
    provider-soak) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy --key-ttl "$SOAK_KEY_TTL" --retain "$SOAK_RETAIN" >"$log" 2>&1 & ;;
    # Room for the held connections and the probes that count them.
    provider-hold) taskset -c "$SERVER_CPU" "$BIN/fauxpay" serve --addr 127.0.0.1:0 --profile happy --max-connections $((HOLD + 100)) >"$log" 2>&1 & ;;
    hello) taskset -c "$SERVER_CPU" "$BIN/hello" 127.0.0.1:0 >"$log" 2>&1 & ;;
    # hello answering the provider's own answer ($WORK/answer.json, capture_answer) with
    # its headers, and doing nothing else: the provider's ceiling on this host.
    hello-answer) taskset -c "$SERVER_CPU" "$BIN/hello" 127.0.0.1:0 "$WORK/answer.json" >"$log" 2>&1 & ;;
    # hello answering every step of the flow row's templates.
    hello-flow) taskset -c "$SERVER_CPU" "$BIN/hello" 127.0.0.1:0 bench/templates/answer.json >"$log" 2>&1 & ;;
  esac
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  echo "$SERVER_PID" >>"$WORK/peer-pids"
  SERVER_URL=
  # Recovery from a data dir comes before listening: allow it a minute.
  local tries=200
  case $kind in provider-durable*) tries=1200 ;; esac
  for _ in $(seq "$tries"); do
    SERVER_URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)
    [ -n "$SERVER_URL" ] && break
    sleep 0.05
  done
  if [ -n "$SERVER_URL" ]; then
    if [ "$kind" = provider-dashboard ]; then
      taskset -c "$CLIENT_CPU" bash -c "$(declare -f dashboard_poller); dashboard_poller $SERVER_URL" >/dev/null 2>&1 &
      POLLER_PID=$!
      echo "$POLLER_PID" >>"$WORK/peer-pids"
    fi
    return 0
  fi
  echo "bench: $kind did not start:" >&2
  cat "$log" >&2
  exit 1
}

stop_server() {
  if [ -n "${POLLER_PID:-}" ]; then
    kill "$POLLER_PID" 2>/dev/null || true
    wait "$POLLER_PID" 2>/dev/null || true
  fi
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  if [ -n "${SERVER_SCRATCH:-}" ]; then rm -rf "$SERVER_SCRATCH"; fi
}

# A field of a flat JSON object: json '{"a":1}' a → 1
json() {
  grep -o "\"$2\":[-0-9.eE+]*" <<<"$1" | head -1 | cut -d: -f2
}

median() {
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

calc() {
  awk "BEGIN {print $1}"
}

rss_kb() {
  awk '/^VmRSS:/ {print $2}' "/proc/$1/status"
}

# user_sys_ticks PID: the process's user and kernel CPU so far, in clock ticks.
user_sys_ticks() {
  sed 's/.*) //' "/proc/$1/stat" | awk '{print $12, $13}'
}

# cpu_ticks PID: the process's CPU so far (user + kernel), in clock ticks.
cpu_ticks() {
  user_sys_ticks "$1" | awk '{print $1 + $2}'
}
TICK_US=$(calc "1000000 / $CLK_TCK")

# note_cpu KIND SCRIPT BEFORE AFTER REQUESTS [DURATION_US]: appends to $WORK/cpu.log the
# server's CPU per request (user and kernel µs) over one run, from two user_sys_ticks
# readings; with DURATION_US, also how busy its core was (CPU ÷ wall) to $WORK/busy.log.
note_cpu() {
  local u0 s0 u1 s1
  read -r u0 s0 <<<"$3"
  read -r u1 s1 <<<"$4"
  if [ -n "$5" ] && [ "$5" != 0 ]; then
    echo "$1 $2 $(calc "($u1 - $u0) * $TICK_US / $5") $(calc "($s1 - $s0) * $TICK_US / $5")" >>"$WORK/cpu.log"
  fi
  if [ -n "${6:-}" ] && [ "$6" != 0 ]; then
    echo "$1 $2 $(calc "($u1 + $s1 - $u0 - $s0) * $TICK_US / $6")" >>"$WORK/busy.log"
  fi
}

# cpu_per_request KIND SCRIPT: "U+K=T µs" of the medians noted for KIND on SCRIPT (user,
# kernel, their sum), and clears them (a later row measures afresh).
cpu_per_request() {
  local u k
  if ! awk -v k="$1" -v s="$2" '$1 == k && $2 == s {found = 1} END {exit !found}' "$WORK/cpu.log" 2>/dev/null; then
    echo "n/a"
    return
  fi
  u=$(median $(awk -v k="$1" -v s="$2" '$1 == k && $2 == s {print $3}' "$WORK/cpu.log"))
  k=$(median $(awk -v k="$1" -v s="$2" '$1 == k && $2 == s {print $4}' "$WORK/cpu.log"))
  awk -v k="$1" -v s="$2" '!($1 == k && $2 == s)' "$WORK/cpu.log" >"$WORK/cpu.keep" && mv "$WORK/cpu.keep" "$WORK/cpu.log"
  echo "$(fmt "$u" 1)+$(fmt "$k" 1)=$(fmt "$(calc "$u + $k")" 1) µs"
}

# wrk_once SCRIPT URL CONNECTIONS: one pinned wrk run; prints its summary JSON.
wrk_once() {
  local out
  out=$(timeout $((SECS + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$3" -d"${SECS}s" -s "bench/wrk/$1" "$2")
  local line
  line=$(grep '^BENCH ' <<<"$out" | sed 's/^BENCH //')
  # WRK_WARMUP=1: a warm-up run, not measured; its errors are not the figures'.
  if [ -z "${WRK_WARMUP:-}" ] && { [ "$(json "$line" status_errors)" != 0 ] || [ "$(json "$line" socket_errors)" != 0 ]; }; then
    echo "bench: wrk $1 against $2 saw errors: $line" | tee -a "$WORK/errors" >&2
  fi
  echo "$line"
}

# measure KIND SCRIPT CONNECTIONS FIELD: fresh server, one wrk run, the field's value.
measure() {
  start_server "$1"
  local line before
  before=$(user_sys_ticks "$SERVER_PID")
  line=$(wrk_once "$2" "$SERVER_URL" "$3")
  note_cpu "$1" "$2" "$before" "$(user_sys_ticks "$SERVER_PID")" "$(json "$line" requests)"
  stop_server
  json "$line" "$4"
}

# abba A B NAME_A NAME_B: BENCH_RUNS pairs of two measurements in ABBA order. A and B
# are commands (split into words, the run's number appended) printing one figure each.
# Sets A_VALUES, B_VALUES and RATIOS (A / B of each pair).
abba() {
  A_VALUES=()
  B_VALUES=()
  RATIOS=()
  local i a b
  for i in $(seq "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      a=$($1 "$i")
      b=$($2 "$i")
    else
      b=$($2 "$i")
      a=$($1 "$i")
    fi
    A_VALUES+=("$a")
    B_VALUES+=("$b")
    RATIOS+=("$(calc "$a / $b")")
    echo "  run $i: $3 $a, $4 $b" >&2
  done
}

# ab SCRIPT CONNECTIONS FIELD: provider/hello pairs of one wrk script (see abba).
ab() {
  abba "measure provider $1 $2 $3" "measure hello $1 $2 $3" provider hello
}

# charges: the running server's charges so far.
charges() {
  local n
  n=$(curl -s "$SERVER_URL/metrics" | awk '/^fauxpay_charges_total / {print $2}')
  echo "${n:-0}"
}

# fill_payments N MAX_SECS LOG [EACH]: wrk new.lua against the running server until it
# has made N charges, wrk ends, or MAX_SECS pass; calls the function EACH (if given)
# after every one-second poll; sets CHARGES.
fill_payments() {
  local started wrk_pid
  started=$(date +%s)
  BENCH_REQUESTS=$1 timeout $(($2 + 60)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$(($2 + 60))s" \
    -s bench/wrk/new.lua "$SERVER_URL" >"$WORK/$3" 2>&1 &
  wrk_pid=$!
  PIDS+=("$wrk_pid")
  CHARGES=0
  while kill -0 "$wrk_pid" 2>/dev/null && [ "$CHARGES" -lt "$1" ] && [ $(($(date +%s) - started)) -lt "$2" ]; do
    sleep 1
    CHARGES=$(charges)
    if [ -n "${4:-}" ]; then "$4"; fi
  done
  kill "$wrk_pid" 2>/dev/null || true
  wait "$wrk_pid" 2>/dev/null || true
  CHARGES=$(charges)
}

TABLE=()
RAW=()
FAILED=0
# row WHAT MEASURED BASELINE RATIO TARGET PASS(0|1)
row() {
  local verdict=PASS
  if [ "$6" != 1 ]; then
    verdict=FAIL
    FAILED=$((FAILED + 1))
  fi
  if [ ${#TABLE[@]} = 0 ]; then
    printf '%-58s %-22s %-22s %-8s %-16s %s\n' what measured baseline ratio target result
  fi
  TABLE+=("| $1 | $2 | $3 | $4 | $5 | $verdict |")
  printf '%-58s %-22s %-22s %-8s %-16s %s\n' "$1" "$2" "$3" "$4" "$5" "$verdict"
}
ge() { awk "BEGIN {exit !($1 >= $2)}" && echo 1 || echo 0; }
le() { awk "BEGIN {exit !($1 <= $2)}" && echo 1 || echo 0; }
fmt() { awk "BEGIN {printf \"%.${2:-0}f\", $1}"; }

has_row() {
  [[ " $ROWS " == *" $1 "* ]]
}

# capture_answer: the provider's answer to the benchmark's new-payment request, in
# $WORK/answer.json (what hello-answer sends).
capture_answer() {
  start_server provider
  curl -s -o "$WORK/answer.json" -H "Authorization: Bearer sk_test_bench" -H "Idempotency-Key: bench-answer" \
    -d amount=2000 -d currency=usd -d confirm=true -d payment_method=pm_card_visa -d "metadata[order_id]=bench-answer" \
    "$SERVER_URL/v1/payment_intents"
  stop_server
}

# ceiling SCRIPT WHAT: a reported row, hello answering the provider's answer against plain
# hello, on SCRIPT's requests: how near hello-world a provider doing no work of its own
# would come on this host (the HTTP stack and the larger answer), beside the row's target.
ceiling() {
  [ -s "$WORK/answer.json" ] || capture_answer
  local bytes
  bytes=$(wc -c <"$WORK/answer.json" | tr -d ' ')
  echo "== ceiling: hello answering the provider's answer ($bytes bytes, its headers) vs hello-world ($1)" >&2
  abba "measure hello-answer $1 $CONNS rps" "measure hello $1 $CONNS rps" "hello with the answer req/s" "hello req/s"
  CEILING_CPU=$(cpu_per_request hello-answer "$1")
  local plain_cpu
  plain_cpu=$(cpu_per_request hello "$1")
  r=$(median "${RATIOS[@]}")
  row "ceiling of the $2 row: hello-world sending the provider's $bytes-byte answer and headers, no work" "$(fmt "$(median "${A_VALUES[@]}")") req/s" "$(fmt "$(median "${B_VALUES[@]}")") req/s" "$(fmt "$r" 2)" "reported" 1
  RAW+=("ceiling ($2): hello with the provider's answer req/s ${A_VALUES[*]}; hello req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}; server CPU a request (user+kernel, medians): hello with the answer $CEILING_CPU, hello $plain_cpu")
}

# ---------------------------------------------------------------- rows
PEAK=
# The ceiling rows' req/s, for the in-process floors (set by the new and replay rows).
NEW_CEILING=
REPLAY_CEILING=
if has_row new || has_row p99; then
  echo "== provider: new payment intents vs hello-world (wrk new.lua, $CONNS connections, ${SECS}s x $RUNS pairs)" >&2
  ab new.lua "$CONNS" rps
  NEW_CPU="server CPU a request (user+kernel, medians): provider $(cpu_per_request provider new.lua), hello $(cpu_per_request hello new.lua)"
  PEAK=$(median "${A_VALUES[@]}")
  r=$(median "${RATIOS[@]}")
  # Against hello-world: reported (users compare with it); the target is against the
  # ceiling row, which moves with the host as the provider does (issue 27).
  if has_row new; then
    row "provider: new payment intent, confirm, key, ledger (happy)" "$(fmt "$PEAK") req/s" "$(fmt "$(median "${B_VALUES[@]}")") req/s" "$(fmt "$r" 2)" "reported" 1
  fi
  RAW+=("new: provider req/s ${A_VALUES[*]}; hello req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}; $NEW_CPU")
  if has_row new; then
    ceiling new.lua "new payment"
    c=$(median "${A_VALUES[@]}")
    NEW_CEILING=$c
    row "provider: new payment intent ÷ its ceiling row" "$(fmt "$PEAK") req/s" "$(fmt "$c") req/s" "$(fmt "$(calc "$PEAK / $c")" 2)" "≥ 0.60" "$(ge "$(calc "$PEAK / $c")" 0.60)"
  fi
fi

if has_row replay; then
  echo "== provider: idempotent replay vs hello-world (wrk replay.lua)" >&2
  ab replay.lua "$CONNS" rps
  REPLAY_CPU="server CPU a request (user+kernel, medians): provider $(cpu_per_request provider replay.lua), hello $(cpu_per_request hello replay.lua)"
  r=$(median "${RATIOS[@]}")
  REPLAY=$(median "${A_VALUES[@]}")
  row "provider: idempotent replay" "$(fmt "$REPLAY") req/s" "$(fmt "$(median "${B_VALUES[@]}")") req/s" "$(fmt "$r" 2)" "reported" 1
  RAW+=("replay: provider req/s ${A_VALUES[*]}; hello req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}; $REPLAY_CPU")
  ceiling replay.lua replay
  c=$(median "${A_VALUES[@]}")
  REPLAY_CEILING=$c
  row "provider: idempotent replay ÷ its ceiling row" "$(fmt "$REPLAY") req/s" "$(fmt "$c") req/s" "$(fmt "$(calc "$REPLAY / $c")" 2)" "≥ 0.90" "$(ge "$(calc "$REPLAY / $c")" 0.90)"
fi

if has_row p99; then
  # paced_run KIND RATE SEED FIELD: a fresh server, one paced run; FIELD of its summary
  # (p99_us: from each request's intended start; rps: what it achieved).
  paced_run() {
    start_server "$1"
    local out line before after
    before=$(user_sys_ticks "$SERVER_PID")
    out=$(timeout $((SECS * 4 + 60)) taskset -c "$CLIENT_CPU" "$BIN/paced" "$SERVER_URL" --rate "$2" \
      --connections "$RATE_CONNS" --seconds "$SECS" --seed "$3" --run "paced-$RANDOM-$3")
    after=$(user_sys_ticks "$SERVER_PID")
    stop_server
    line=$(grep '^BENCH ' <<<"$out" | sed 's/^BENCH //')
    # The server's CPU a request at this rate, and how busy its core was (CPU ÷ wall).
    note_cpu "$1" "paced-$4" "$before" "$after" "$(json "$line" requests)" "$(json "$line" duration_us)"
    if [ "$(json "$line" status_errors)" != 0 ] || [ "$(json "$line" socket_errors)" != 0 ]; then
      echo "bench: paced against $1 saw errors: $line" | tee -a "$WORK/errors" >&2
    fi
    json "$line" "$4"
  }
  # The peak is the paced client's own: asked twice wrk's rate it queues what the
  # provider cannot take and reports what it achieved. (wrk's 64 saturating connections
  # reach a higher rate than Poisson arrivals on RATE_CONNS connections, whose requests
  # batch less; half of wrk's peak was nearly all of the paced client's.)
  PEAKS=()
  for i in $(seq "$((RUNS < 3 ? RUNS : 3))"); do
    PEAKS+=("$(paced_run provider "$(fmt "$(calc "$PEAK * 2")")" "$i" rps)")
  done
  PACED_PEAK=$(median "${PEAKS[@]}")
  RATE=$(fmt "$(calc "$PACED_PEAK / 2")")
  echo "== p99 at 50% of the provider's peak with the paced client ($(fmt "$PACED_PEAK") req/s): $RATE req/s (bench paced: Poisson arrivals to the microsecond, $RATE_CONNS connections)" >&2
  # paced_once KIND SEED: the p99 at RATE.
  paced_once() {
    paced_run "$1" "$RATE" "$2" p99_us
  }
  abba "paced_once provider" "paced_once hello" "provider (µs)" "hello (µs)"
  busy() { fmt "$(calc "100 * $(median $(awk -v k="$1" '$1 == k && $2 == "paced-p99_us" {print $3}' "$WORK/busy.log"))")"; }
  P99_CPU="server CPU a request (user+kernel, medians): provider $(cpu_per_request provider paced-p99_us), hello $(cpu_per_request hello paced-p99_us); its core busy: provider $(busy provider)%, hello $(busy hello)%"
  r=$(median "${RATIOS[@]}")
  row "provider: p99 at 50% of its peak rate ($RATE of $(fmt "$PACED_PEAK") req/s, finely paced)" "$(fmt "$(calc "$(median "${A_VALUES[@]}") / 1000")" 2) ms" "$(fmt "$(calc "$(median "${B_VALUES[@]}") / 1000")" 2) ms" "$(fmt "$r" 2)" "≤ 2.00" "$(le "$r" 2)"
  RAW+=("p99 at $RATE req/s (paced; its peak against the provider, asked $(fmt "$(calc "$PEAK * 2")") req/s: ${PEAKS[*]} req/s; same seed for both in a pair): provider µs ${A_VALUES[*]}; hello µs ${B_VALUES[*]}; ratios ${RATIOS[*]}; $P99_CPU")
fi

if has_row memory; then
  echo "== provider memory: RSS growth over $PAYMENTS payments (wrk new.lua)" >&2
  start_server provider
  sleep 0.5
  rss0=$(rss_kb "$SERVER_PID")
  started=$(date +%s)
  fill_payments "$PAYMENTS" 420 memory-wrk.log
  sleep 1
  charges=$(charges)
  rss1=$(rss_kb "$SERVER_PID")
  stop_server
  per=$(calc "($rss1 - $rss0) * 1024 / $charges")
  row "provider memory: RSS growth per stored payment, its 3 events included ($charges payments)" "$(fmt "$per") B" "—" "—" "≤ 800 B" "$(le "$per" 800)"
  RAW+=("memory: RSS ${rss0} kB idle → ${rss1} kB after $charges payments in $(($(date +%s) - started)) s")
fi

if has_row webhooks; then
  echo "== provider: new payment intents with one webhook endpoint (a local 2xx receiver) vs none" >&2
  log="$WORK/receiver.log"
  taskset -c "$CLIENT_CPU" "$BIN/hello" 127.0.0.1:0 >"$log" 2>&1 &
  RECEIVER_PID=$!
  PIDS+=("$RECEIVER_PID")
  WEBHOOK_URL=
  for _ in $(seq 200); do
    WEBHOOK_URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$log" | head -1 || true)
    [ -n "$WEBHOOK_URL" ] && break
    sleep 0.05
  done
  WEBHOOK_URL="$WEBHOOK_URL/webhooks/stripe"
  W_VALUES=()
  N_VALUES=()
  W_RATIOS=()
  D_RATES=()
  E_VALUES=()
  E_RATIOS=()
  LAGS=()
  for i in $(seq "$RUNS"); do
    for kind in $([ $((i % 2)) = 1 ] && echo "provider-webhook provider" || echo "provider provider-webhook"); do
      start_server "$kind"
      started=$(date +%s.%N)
      line=$(wrk_once new.lua "$SERVER_URL" "$CONNS")
      if [ "$kind" = provider-webhook ]; then
        w=$(json "$line" rps)
        sent=$(date +%s.%N)
        # Deliveries run at a low CPU priority: what the run left queued goes out now.
        drained=$(curl -s "$SERVER_URL/__fauxpay/webhooks/drain?timeout=120s")
        now=$(date +%s.%N)
        elapsed=$(calc "$now - $started")
        LAGS+=("$(calc "$now - $sent")")
        D_RATES+=("$(calc "$(json "$drained" delivered) / $elapsed")")
        e=$(calc "$(json "$line" requests) / $elapsed")
      else
        n=$(json "$line" rps)
      fi
      stop_server
    done
    W_VALUES+=("$w")
    N_VALUES+=("$n")
    W_RATIOS+=("$(calc "$w / $n")")
    E_VALUES+=("$e")
    E_RATIOS+=("$(calc "$e / $n")")
    echo "  run $i: with a webhook $w req/s (every delivery acknowledged ${LAGS[-1]} s after the run), without $n req/s" >&2
  done
  r=$(median "${W_RATIOS[@]}")
  row "provider: new payment intent, one webhook endpoint delivering" "$(fmt "$(median "${W_VALUES[@]}")") req/s" "$(fmt "$(median "${N_VALUES[@]}")") req/s" "$(fmt "$r" 2)" "≥ 0.80" "$(ge "$r" 0.80)"
  # The same runs counted until the last delivery: what the CPU does per payment with
  # its three deliveries (they wait while the API saturates the core, then drain).
  r=$(median "${E_RATIOS[@]}")
  row "provider: payments with all 3 deliveries acknowledged, per s (run + drain, $(fmt "$(median "${LAGS[@]}")" 1) s)" "$(fmt "$(median "${E_VALUES[@]}")")/s" "$(fmt "$(median "${N_VALUES[@]}")") req/s" "$(fmt "$r" 2)" "reported" 1
  d=$(median "${D_RATES[@]}")
  row "provider: webhook deliveries to a local 2xx receiver (3 per payment)" "$(fmt "$d")/s" "—" "—" "≥ 10,000/s" "$(ge "$d" 10000)"
  RAW+=("webhooks: with req/s ${W_VALUES[*]}; without req/s ${N_VALUES[*]}; ratios ${W_RATIOS[*]}; drained s after the run ${LAGS[*]}; payments/s until the last delivery ${E_VALUES[*]} (ratios ${E_RATIOS[*]}); deliveries/s (wrk run + drain) ${D_RATES[*]}")
  # Delivery latency at 1,000 events/s: 333 payments/s (3 events each) from the paced
  # client, then the delivery log's send → 2xx times (the queue wait before sending is
  # not in them; at this rate the queue is empty).
  start_server provider-webhook
  timeout $((SECS + 60)) taskset -c "$CLIENT_CPU" "$BIN/paced" "$SERVER_URL" --rate 333 --connections 16 \
    --seconds "$SECS" --seed 7 --run "hook-latency-$RANDOM" >"$WORK/hook-latency.log" 2>&1 || true
  curl -s "$SERVER_URL/__fauxpay/webhooks/drain?timeout=60s" >/dev/null
  lat=$(curl -s "$SERVER_URL/__fauxpay/webhooks?limit=16384" | python3 -c '
import json, sys
d = sorted(r["latency_ms"] for r in json.load(sys.stdin)["data"] if r.get("latency_ms") is not None)
print("%.2f %.2f %d" % (d[len(d) // 2], d[min(len(d) - 1, int(len(d) * 0.99))], len(d)) if d else "0 0 0")')
  stop_server
  read -r lat_p50 lat_p99 lat_n <<<"$lat"
  row "provider: webhook delivery latency at 1,000 events/s (send → 2xx, p99)" "$lat_p99 ms" "p50 $lat_p50 ms" "—" "reported" "$([ "$lat_n" -gt 0 ] && echo 1 || echo 0)"
  RAW+=("webhook latency at 1,000 events/s: $lat_n deliveries, p50 $lat_p50 ms, p99 $lat_p99 ms")
  kill "$RECEIVER_PID" 2>/dev/null || true
fi

if has_row durable; then
  echo "== provider: new payment intents with --data-dir (fsync batch, then always) vs in memory" >&2
  for FSYNC in batch always; do
    abba "measure provider-durable new.lua $CONNS rps" "measure provider new.lua $CONNS rps" \
      "--data-dir (fsync $FSYNC) req/s" "in memory req/s"
    r=$(median "${RATIOS[@]}")
    row "provider: new payment intent with --data-dir, --fsync $FSYNC" "$(fmt "$(median "${A_VALUES[@]}")") req/s" "$(fmt "$(median "${B_VALUES[@]}")") req/s (memory)" "$(fmt "$r" 2)" "≥ 0.50" "$(ge "$r" 0.50)"
    RAW+=("durable ($FSYNC): data-dir req/s ${A_VALUES[*]}; memory req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}")
  done
  FSYNC=batch

  echo "== provider: recovery of $PAYMENTS payments from --data-dir" >&2
  DATA_DIR="$WORK/data-recovery"
  start_server provider-durable
  fill_payments "$PAYMENTS" 600 durable-wrk.log
  charges=$CHARGES
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  size=$(du -sm "$DATA_DIR" | cut -f1)
  # The same log recovered RUNS times (killed -9 again after each), the median reported:
  # one restart on this shared VM moved by a quarter between runs of the same binary.
  # A restart has the machine to itself (no client runs), so it gets every core, as a
  # user's restart does: recovery replays on two threads where it has two cores. The
  # same restarts pinned to one core (one thread) are reported beside it.
  TOOK=()
  TOOK_ONE=()
  server_cpu=$SERVER_CPU
  for i in $(seq "$RUNS"); do
    for cpus in "$server_cpu,$CLIENT_CPU" "$server_cpu"; do
      SERVER_CPU=$cpus
      t0=$(date +%s.%N)
      start_server provider-durable
      if [ "$cpus" = "$server_cpu" ]; then
        TOOK_ONE+=("$(calc "$(date +%s.%N) - $t0")")
      else
        TOOK+=("$(calc "$(date +%s.%N) - $t0")")
      fi
      recovered=$(grep -o 'recovered [0-9]* records ([0-9]* writes)' "$WORK/server-provider-durable.log" || echo "no recovery line")
      found=$(curl -s "$SERVER_URL/metrics" | awk '/^fauxpay_charges_total / {print $2}')
      kill -KILL "$SERVER_PID" 2>/dev/null || true
      wait "$SERVER_PID" 2>/dev/null || true
    done
    echo "  run $i: restart until listening on cores $server_cpu,$CLIENT_CPU $(fmt "${TOOK[-1]}" 2) s, on core $server_cpu alone $(fmt "${TOOK_ONE[-1]}" 2) s" >&2
  done
  SERVER_CPU=$server_cpu
  took=$(median "${TOOK[@]}")
  took_one=$(median "${TOOK_ONE[@]}")
  rm -rf "$DATA_DIR"
  row "provider: recovery after kill -9 of $charges payments ($size MB of log, median of $RUNS restarts, every core)" "$(fmt "$took" 1) s" "$(fmt "$took_one" 1) s on one core" "—" "≤ 4 s" "$(le "$took" 4)"
  RAW+=("recovery: $charges payments written, kill -9, restart until listening on cores $server_cpu,$CLIENT_CPU: ${TOOK[*]} s; on core $server_cpu alone: ${TOOK_ONE[*]} s; $recovered; log $size MB; ledger after: ${found:-?} charges counted by /metrics")
fi

if has_row dashboard; then
  echo "== provider: new payment intents with a dashboard open (overview, live every 2 s) vs none" >&2
  abba "measure provider-dashboard new.lua $CONNS rps" "measure provider new.lua $CONNS rps" \
    "dashboard open req/s" "closed req/s"
  r=$(median "${RATIOS[@]}")
  row "provider: new payment intent with a dashboard open" "$(fmt "$(median "${A_VALUES[@]}")") req/s" "$(fmt "$(median "${B_VALUES[@]}")") req/s (closed)" "$(fmt "$r" 2)" "≥ 0.90" "$(ge "$r" 0.90)"
  RAW+=("dashboard: open req/s ${A_VALUES[*]}; closed req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}")
fi

if has_row soak; then
  SOAK_PAYMENTS=$((PAYMENTS * 5))
  echo "== provider: RSS over $SOAK_PAYMENTS payments with --key-ttl $SOAK_KEY_TTL --retain $SOAK_RETAIN (wrk new.lua, full speed)" >&2
  start_server provider-soak
  started=$(date +%s)
  rss_first=
  # The first sample, once the run has passed BENCH_PAYMENTS.
  soak_sample() {
    if [ -z "$rss_first" ] && [ "$CHARGES" -ge "$PAYMENTS" ]; then
      rss_first=$(rss_kb "$SERVER_PID")
      first_at=$CHARGES
    fi
  }
  fill_payments "$SOAK_PAYMENTS" 1500 soak-wrk.log soak_sample
  charges=$CHARGES
  rss_last=$(rss_kb "$SERVER_PID")
  summary=$(curl -s "$SERVER_URL/__fauxpay/summary" | tr -d ' \n')
  stop_server
  if [ -n "$rss_first" ]; then
    r=$(calc "$rss_last / $rss_first")
    row "provider: RSS after $charges vs $first_at payments, --retain $SOAK_RETAIN" "$(fmt "$(calc "$rss_last / 1024")") MB" "$(fmt "$(calc "$rss_first / 1024")") MB" "$(fmt "$r" 2)" "≤ 1.20" "$(le "$r" 1.2)"
    RAW+=("soak: RSS ${rss_first} kB at $first_at payments, ${rss_last} kB at $charges payments in $(($(date +%s) - started)) s (--key-ttl $SOAK_KEY_TTL --retain $SOAK_RETAIN); summary charges $(json "$summary" charges)")
  else
    row "provider: RSS with --retain $SOAK_RETAIN" "not reached ($charges payments)" "—" "—" "≤ 1.20" 0
  fi
fi

if has_row restart; then
  echo "== provider: restart after a ${RESTART_SECS}s soak with --data-dir and --retain $SOAK_RETAIN (kill -9)" >&2
  DATA_DIR="$WORK/data-restart"
  mkdir -p "$DATA_DIR"
  start_server provider-durable-soak
  fill_payments 1000000000 "$RESTART_SECS" restart-wrk.log
  charges=$CHARGES
  rss_running=$(rss_kb "$SERVER_PID")
  # How often the log was compacted during the soak (and how big it is now).
  compactions=$(curl -s "$SERVER_URL/__fauxpay/health" | jq -r '.data_log.compactions // "?"')
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  size=$(du -sm "$DATA_DIR" | cut -f1)
  t0=$(date +%s.%N)
  start_server provider-durable-soak
  took=$(calc "$(date +%s.%N) - $t0")
  # The restarted process's peak resident memory so far: its recovery's.
  peak=$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVER_PID/status")
  stop_server
  rm -rf "$DATA_DIR"
  r=$(calc "$peak / $rss_running")
  row "provider: restart after a ${RESTART_SECS}s --retain soak ($charges payments, $size MB of log)" "$(fmt "$took" 1) s, peak $(fmt "$(calc "$peak / 1024")") MB" "$(fmt "$(calc "$rss_running / 1024")") MB running" "$(fmt "$r" 2)" "≤ 1.50, ≤ 5 s" "$( [ "$(le "$r" 1.5)" = 1 ] && [ "$(le "$took" 5)" = 1 ] && echo 1 || echo 0)"
  RAW+=("restart: $charges payments in ${RESTART_SECS}s (--retain $SOAK_RETAIN, --key-ttl $SOAK_KEY_TTL), $compactions compactions, log $size MB at the kill, running RSS $rss_running kB; kill -9, restart until listening $took s, peak RSS $peak kB")
fi

if has_row hold; then
  echo "== provider: $HOLD connections held by hang" >&2
  start_server provider-hold
  sleep 1
  rss_idle=$(rss_kb "$SERVER_PID")
  t0=$(cpu_ticks "$SERVER_PID")
  sleep 3
  t1=$(cpu_ticks "$SERVER_PID")
  cpu_idle=$(calc "($t1 - $t0) / $CLK_TCK / 3")
  timeout 120 taskset -c "$CLIENT_CPU" "$BIN/hold" --addr "${SERVER_URL#http://}" --connections "$HOLD" --hold-secs 5 >"$WORK/hold.log" 2>&1 &
  HOLD_PID=$!
  PIDS+=("$HOLD_PID")
  for _ in $(seq 900); do
    grep -q '^held' "$WORK/hold.log" && break
    kill -0 "$HOLD_PID" 2>/dev/null || break
    sleep 0.1
  done
  if grep -q '^held' "$WORK/hold.log"; then
    sleep 0.5
    t0=$(cpu_ticks "$SERVER_PID")
    sleep 3
    t1=$(cpu_ticks "$SERVER_PID")
    rss_held=$(rss_kb "$SERVER_PID")
    cpu_held=$(calc "($t1 - $t0) / $CLK_TCK / 3")
    wait "$HOLD_PID" 2>/dev/null || true
    extra=$(calc "($rss_held - $rss_idle) / 1024")
    ok=$(( $(le "$extra" 100) && $(le "$cpu_held" 0.02) ))
    row "provider: $HOLD connections held by hang" "+$(fmt "$extra" 1) MB, $(fmt "$(calc "$cpu_held * 100")" 1)% CPU" "idle: $(fmt "$(calc "$rss_idle / 1024")" 1) MB, $(fmt "$(calc "$cpu_idle * 100")" 1)% CPU" "—" "≤ 100 MB, ~0 CPU" "$ok"
    RAW+=("hold: RSS ${rss_idle} kB idle → ${rss_held} kB held; CPU $cpu_idle cores idle, $cpu_held cores held (3 s windows)")
  else
    cat "$WORK/hold.log" >&2
    row "provider: $HOLD connections held by hang" "not reached" "—" "—" "≤ 100 MB, ~0 CPU" 0
  fi
  stop_server
fi

# load_once: a fresh provider, one closed-model `fauxpay load` run; its attempts/s.
goose_opts=(--users "$LOAD_USERS" --increase-rate $((LOAD_USERS * 4)) --run-time "${LOAD_SECS}s" --quiet)
load_once() {
  start_server provider
  timeout $((LOAD_SECS + 120)) taskset -c "$CLIENT_CPU" "$BIN/fauxpay" load --target "$SERVER_URL" --provider "$SERVER_URL" \
    --template stripe --api-key sk_test_bench --out "$WORK/load-report" "${goose_opts[@]}" >"$WORK/load.log" 2>&1 ||
    { echo "bench: fauxpay load failed:" | tee -a "$WORK/errors" >&2; tail -20 "$WORK/load.log" >&2; }
  stop_server
  json "$(tr -d ' \n' <"$WORK/load-report/report.json")" attempts_per_sec
}

if has_row load; then
  echo "== fauxpay load vs bare goose, same request ($LOAD_USERS users, ${LOAD_SECS}s)" >&2
  bare_once() {
    start_server provider
    local line
    line=$(timeout $((LOAD_SECS + 120)) taskset -c "$CLIENT_CPU" "$BIN/bare-goose" --host "$SERVER_URL" "${goose_opts[@]}" 2>"$WORK/bare.log" | tail -1)
    stop_server
    calc "$(json "$line" requests) / $(json "$line" duration_secs)"
  }
  abba load_once bare_once "fauxpay load" "bare goose"
  LOAD_PEAK=$(median "${A_VALUES[@]}")
  r=$(median "${RATIOS[@]}")
  row "\`fauxpay load\` attempts/s against the provider" "$(fmt "$(median "${A_VALUES[@]}")")/s" "$(fmt "$(median "${B_VALUES[@]}")")/s" "$(fmt "$r" 2)" "≥ 0.90" "$(ge "$r" 0.90)"
  RAW+=("load: fauxpay load attempts/s ${A_VALUES[*]}; bare goose req/s ${B_VALUES[*]}; ratios ${RATIOS[*]}")
fi

if has_row flow; then
  echo "== fauxpay load: a three-step flow vs one request, against hello ($LOAD_USERS users, ${LOAD_SECS}s)" >&2
  # Requests per second of one template against hello answering bench/templates/answer.json
  # (hello is no provider: the ledger read at the end fails, and the report is still
  # written). $1: the template, $2: its requests per payment.
  flow_once() {
    start_server hello-flow
    timeout $((LOAD_SECS + 120)) taskset -c "$CLIENT_CPU" "$BIN/fauxpay" load --target "$SERVER_URL" --provider "$SERVER_URL" \
      --template "$1" --out "$WORK/flow-report" "${goose_opts[@]}" >"$WORK/flow.log" 2>&1 || true
    stop_server
    local report
    report=$(tr -d ' \n' <"$WORK/flow-report/report.json")
    calc "$(json "$report" payments) * $2 / $(json "$report" duration_secs)"
  }
  three_once() { flow_once bench/templates/three-step.toml 3; }
  one_once() { flow_once bench/templates/one-step.toml 1; }
  abba three_once one_once "three-step requests/s" "one-step requests/s"
  r=$(median "${RATIOS[@]}")
  row "\`fauxpay load\` requests/s of a three-step flow (cart, keyed payment, order read; captures and an outcome rule) against hello" "$(fmt "$(median "${A_VALUES[@]}")")/s" "$(fmt "$(median "${B_VALUES[@]}")")/s one-step" "$(fmt "$r" 2)" "≥ 0.80" "$(ge "$r" 0.80)"
  RAW+=("flow: three-step requests/s ${A_VALUES[*]}; one-step requests/s ${B_VALUES[*]}; ratios ${RATIOS[*]}")
fi

if has_row rate; then
  # Each run asks 0.7 of a closed-model peak measured just before it (issue 27's target;
  # 0.9 left the client itself no headroom: the open model costs ~30% more client CPU per
  # checkout, bench/notes.md). Paired in time, as the ABBA rows are: one peak for all the
  # runs made the row this VM's noise (the peak moved from 23.6k to 36.5k/s between
  # invocations a minute apart, bench/notes.md).
  echo "== fauxpay load --rate at 0.7 of its closed-model peak, each run paired with a closed run, ${LOAD_SECS}s" >&2
  R_VALUES=()
  R_DROPPED=()
  R_ASKED=()
  for i in $(seq "$RUNS"); do
    peak=$(load_once)
    asked=$(awk "BEGIN {printf \"%d\", $peak * 0.7}")
    R_ASKED+=("$asked")
    start_server provider
    timeout $((LOAD_SECS + 120)) taskset -c "$CLIENT_CPU" "$BIN/fauxpay" load --target "$SERVER_URL" --provider "$SERVER_URL" \
      --template stripe --api-key sk_test_bench --out "$WORK/rate-report" --rate "${asked}/s" \
      --users $((LOAD_USERS * 2)) --run-time "${LOAD_SECS}s" --seed "$i" >"$WORK/rate.log" 2>&1 ||
      { echo "bench: fauxpay load --rate failed:" | tee -a "$WORK/errors" >&2; tail -20 "$WORK/rate.log" >&2; }
    stop_server
    report=$(tr -d ' \n' <"$WORK/rate-report/report.json")
    achieved=$(json "$report" achieved_per_sec)
    R_VALUES+=("$(calc "$achieved / $asked")")
    R_DROPPED+=("$(json "$report" dropped)")
    echo "  run $i: closed peak $(fmt "$peak")/s; achieved $achieved/s of $asked/s, dropped $(json "$report" dropped)" >&2
  done
  r=$(median "${R_VALUES[@]}")
  asked=$(median "${R_ASKED[@]}")
  row "\`fauxpay load --rate\` at 0.7 of its closed peak (median $asked/s asked)" "$(fmt "$(calc "$r * $asked")")/s, $(median "${R_DROPPED[@]}") dropped" "$asked/s asked" "$(fmt "$r" 3)" "≥ 0.99" "$(ge "$r" 0.99)"
  RAW+=("rate: asked ${R_ASKED[*]} /s (0.7 of a closed run just before each); achieved ratios ${R_VALUES[*]}; dropped ${R_DROPPED[*]}")
fi

if has_row reconcile; then
  echo "== reconcile 1,000,000 logical payments (journal + streamed ledger)" >&2
  VALUES=()
  READS=()
  for i in $(seq "$RUNS"); do
    line=$(timeout 300 taskset -c "$CLIENT_CPU" "$BIN/reconcile-bench" 1000000)
    VALUES+=("$(json "$line" seconds)")
    READS+=("$(json "$line" journal_read_secs)")
    echo "  run $i: $line" >&2
  done
  s=$(median "${VALUES[@]}")
  row "reconcile 1,000,000 logical payments (journal + streamed ledger)" "$(fmt "$s" 2) s" "—" "—" "≤ 3 s" "$(le "$s" 3)"
  row "\`fauxpay report reconcile\`: journal.jsonl of 1,000,000 payments read back" "$(fmt "$(median "${READS[@]}")" 2) s" "—" "—" "reported" 1
  RAW+=("reconcile: seconds ${VALUES[*]}; journal read back, seconds ${READS[*]}")
fi

if has_row inproc; then
  echo "== provider in process: new payments from 1 thread, then 2 on one provider, then 2 on a provider each, then replays from 1 thread (the pipeline, no sockets)" >&2
  ONE=()
  TWO=()
  APART=()
  REPLAYS=()
  for i in $(seq "$RUNS"); do
    out=$(timeout 300 "$BIN/inproc" 200000)
    ONE+=("$(json "$(echo "$out" | sed -n 1p)" per_second)")
    TWO+=("$(json "$(echo "$out" | sed -n 2p)" per_second)")
    APART+=("$(json "$(echo "$out" | sed -n 3p)" per_second)")
    replays=$(timeout 300 "$BIN/inproc" 200000 1 replay)
    REPLAYS+=("$(json "$replays" per_second)")
    echo "  run $i: $(echo "$out" | tr '\n' ' ')$replays" >&2
  done
  one=$(median "${ONE[@]}")
  two=$(median "${TWO[@]}")
  apart=$(median "${APART[@]}")
  r=$(calc "$two / $one")
  row "provider in process: new payments, 2 threads ÷ 1 thread (no sockets)" "$(fmt "$two") /s" "$(fmt "$one") /s" "$(fmt "$r" 2)" "≥ 1.85" "$(ge "$r" 1.85)"
  # Its ceiling: two threads that share no provider (each drives its own, as full as the
  # one-thread run's), so what the host gives two busy cores, with no contention inside
  # fauxpay. Reported: the row above is below it by what the shared provider costs.
  row "ceiling of the in-process row: 2 threads on a provider each ÷ 1 thread" "$(fmt "$apart") /s" "$(fmt "$one") /s" "$(fmt "$(calc "$apart / $one")" 2)" "reported" 1
  RAW+=("inproc: payments/s from 1 thread ${ONE[*]}; from 2 threads on one provider ${TWO[*]}; from 2 threads on a provider each ${APART[*]}; replays/s from 1 thread ${REPLAYS[*]}")
  # The floors under the new-payment and replay rows: what the pipeline alone (the form
  # parsed, faults, idempotency, the operation, the request log, the answer's JSON; no
  # socket, HTTP parser or router) costs a request on one thread, against the time the
  # row's target leaves the provider beyond its ceiling row in this run: at a target T of
  # the ceiling's rate C, a request may take 1/(T·C) of the server's core, the ceiling
  # 1/C, so (1/T - 1)/C is left for the provider's own work. A floor above it (a ratio
  # over 1) is a target no change at the HTTP edge can reach. Reported (issue 27).
  floor_row() { # WHAT PER_SECOND CEILING TARGET
    local us budget
    us=$(calc "1000000 / $2")
    if [ -n "$3" ]; then
      budget=$(calc "(1 / $4 - 1) * 1000000 / $3")
      row "floor of the $1 row: the pipeline alone, in process, 1 thread, against what ≥ $4 of its ceiling row leaves beyond it" "$(fmt "$us" 1) µs" "$(fmt "$budget" 1) µs" "$(fmt "$(calc "$us / $budget")" 2)" "reported" 1
    else
      row "floor of the $1 row: the pipeline alone, in process, 1 thread (run its row for the time its target leaves)" "$(fmt "$us" 1) µs" "—" "—" "reported" 1
    fi
  }
  floor_row "new payment" "$one" "$NEW_CEILING" 0.60
  floor_row "replay" "$(median "${REPLAYS[@]}")" "$REPLAY_CEILING" 0.90
fi

if has_row peers; then
  # shellcheck source=bench/peers.sh
  source bench/peers.sh
fi

# ---------------------------------------------------------------- results.md
ERRORS=0
if [ -f "$WORK/errors" ]; then
  ERRORS=$(wc -l <"$WORK/errors")
fi
{
  echo "# fauxpay benchmark results"
  echo
  echo "Written by \`bench/run.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC')."
  echo
  echo "| machine | |"
  echo "|---|---|"
  echo "| cores (\`nproc\`) | $(nproc) |"
  echo "| CPU | $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo) |"
  echo "| kernel | $(uname -sr) |"
  echo "| memory | $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) |"
  echo "| server / client cores | taskset -c $SERVER_CPU / taskset -c $CLIENT_CPU |"
  echo "| runs per figure | $RUNS (median; A/B pairs in ABBA order), ${SECS}s per wrk run, $CONNS connections |"
  echo
  echo "| what | measured | baseline | ratio | target | result |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${TABLE[@]}"
  echo
  echo "Raw figures:"
  echo
  for r in "${RAW[@]}"; do
    echo "- $r"
  done
  if [ "$ERRORS" != 0 ]; then
    echo
    echo "**$ERRORS run(s) saw errors** (non-2xx answers or socket errors): see the script's output."
  fi
  # Why rows miss their target, with the profiles (kept by hand next to this script).
  if [ -f bench/notes.md ]; then
    echo
    cat bench/notes.md
  fi
} >"$OUT"
echo >&2
echo "bench: wrote $OUT ($FAILED row(s) below target, $ERRORS run(s) with errors)" >&2
