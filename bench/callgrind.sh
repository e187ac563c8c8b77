#!/usr/bin/env bash
# Instructions per request of the provider, counted by valgrind's callgrind: repeatable
# to about 0.7% on a noisy host, where wall-clock A/B runs are not.
#
#   bench/callgrind.sh new                          # ${CARGO_TARGET_DIR:-target}/release/fauxpay
#   bench/callgrind.sh replay path/to/fauxpay
#   BASELINE=/tmp/fauxpay-main bench/callgrind.sh new   # both, and their ratio
#   bench/callgrind.sh webhook                      # new payments, each event delivered
#   bench/callgrind.sh recovery                     # a data dir's payments recovered
#   bench/callgrind.sh ceiling                      # replays, and hello sending their answer
#
# For each binary: starts `fauxpay serve --profile happy` under callgrind on
# 127.0.0.1 (a free port, read from its start-up line), warms it up, zeroes the counters
# (callgrind_control -z), sends exactly BENCH_REQUESTS requests of the row through wrk
# (bench/wrk/exact.lua over new.lua or replay.lua; every one answered), dumps the
# counters (callgrind_control -d), stops the server, and prints one line:
#
#   row=new requests=10000 instructions_per_request=57812 instructions=578120000
#
# instructions_per_request is the dump's total Ir / requests: everything the server's
# threads ran between the zero and the dump, the accepts of wrk's connections included
# (the dump comes before their closes). With BASELINE the line adds
# baseline_instructions_per_request, baseline_instructions and ratio (binary /
# baseline). The row `new` is a confirmed payment intent with its own key and order id
# (what `fauxpay load --template stripe` sends); `replay` is the same request with one
# key, answered from the idempotency store (the first answer and its first replay are
# in the warm-up). `webhook` is the `new` row with `--webhook` to a local 2xx receiver
# (bench's hello, started outside valgrind): the dump waits until every delivery is
# acknowledged (`/__fauxpay/webhooks/drain`), so a payment's three deliveries are in its
# count; the difference from `new` is what delivering costs a payment. `ceiling` is the
# `replay` row, then the same requests answered by bench's hello sending the provider's
# answer (as the bench's ceiling rows do; the answer is the binary's own, captured first):
# its line adds ceiling_instructions_per_request and ratio (provider / ceiling), the
# instructions a replay spends beyond the HTTP stack's.
#
# `recovery` has each binary write BENCH_REQUESTS new payments into a data dir of its own
# (natively, then kill -9: the same requests, in the binary's own log schema, which an
# older binary may refuse), and counts only what `durable::recovery::open` runs when it
# restarts on that log (callgrind --toggle-collect; repeatable to about 0.001%,
# where the wall-clock recovery row moves by a quarter on a shared VM): its
# instructions_per_request are per recovered payment, start-up outside recovery excluded
# (recovery's own fixed work is not: 2,000 payments read ~63k each, 20,000 ~40k; compare
# binaries at one BENCH_REQUESTS, 20,000 or more).
#
# Knobs (environment): BENCH_REQUESTS (10000), BENCH_WARMUP (1000 requests),
# BENCH_CONNECTIONS (64), BENCH_PORT (0: a free port), BENCH_TIMEOUT (900 s per wrk
# run), BENCH_KEEP (a folder to keep the callgrind dumps in, for callgrind_annotate).
set -euo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")/.."

# A path given by the caller, relative to where they ran the script.
from_caller() {
  case $1 in
    /*) echo "$1" ;;
    *) echo "$CALLER_DIR/$1" ;;
  esac
}

usage() {
  echo "usage: [BASELINE=path] bench/callgrind.sh new|replay|webhook|recovery|ceiling [fauxpay binary]" >&2
  exit 2
}
[ $# -ge 1 ] && [ $# -le 2 ] || usage
ROW=$1
case $ROW in
  new | webhook | recovery) SCRIPT=new.lua ;;
  replay | ceiling) SCRIPT=replay.lua ;;
  *) usage ;;
esac
if [ $# = 2 ]; then
  BINARY=$(from_caller "$2")
else
  BINARY=$(from_caller "${CARGO_TARGET_DIR:-$PWD/target}/release/fauxpay")
fi
BASELINE=${BASELINE:+$(from_caller "$BASELINE")}
REQUESTS=${BENCH_REQUESTS:-10000}
WARMUP=${BENCH_WARMUP:-1000}
CONNS=${BENCH_CONNECTIONS:-64}
PORT=${BENCH_PORT:-0}
WRK_TIMEOUT=${BENCH_TIMEOUT:-900}
for b in "$BINARY" ${BASELINE:+"$BASELINE"}; do
  [ -x "$b" ] || { echo "callgrind: $b is not an executable (build it: cargo build --release -p fauxpay)" >&2; exit 2; }
done
[ "$REQUESTS" -gt 0 ] && [ "$WARMUP" -gt 0 ] || { echo "callgrind: BENCH_REQUESTS and BENCH_WARMUP must be positive" >&2; exit 2; }

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v valgrind >/dev/null || missing+=(valgrind)
if [ ${#missing[@]} != 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "callgrind: ${missing[*]} missing: install (Debian/Ubuntu: sudo apt-get install -y ${missing[*]})" >&2
    exit 2
  fi
fi
for tool in callgrind_control timeout awk ss curl; do
  command -v "$tool" >/dev/null || { echo "callgrind: $tool is missing" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/fauxpay-callgrind.XXXXXX")
SERVER_PID=
WRK_PID=
RECEIVER_PID=
cleanup() {
  for p in "$WRK_PID" "$SERVER_PID" "$RECEIVER_PID"; do
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wrk_exact N CONNECTIONS RUN_PREFIX [COMMAND...]: exactly N requests of the row, then
# COMMAND while wrk's connections are still open; fails on any error. exact.lua says on
# a FIFO when the last answer has arrived; SIGINT then makes wrk print its summary
# instead of waiting out -d.
wrk_exact() {
  local out="$WORK/wrk.log" fifo="$WORK/done.fifo" line
  rm -f "$fifo"
  mkfifo "$fifo"
  exec 3<>"$fifo" # read-write: opening it never blocks, and wrk's open finds a reader
  env -u BENCH_REQUESTS BENCH_SCRIPT="$SCRIPT" BENCH_EXACT="$1" BENCH_RUN="$3" BENCH_DONE="$fifo" \
    wrk -t1 -c"$2" -d3600s -s bench/wrk/exact.lua "$URL" >"$out" 2>&1 &
  WRK_PID=$!
  if ! read -r -t "$WRK_TIMEOUT" -u 3 line; then
    exec 3<&-
    echo "callgrind: wrk did not finish $1 requests in $WRK_TIMEOUT s:" >&2
    cat "$out" >&2
    return 1
  fi
  exec 3<&-
  if [ $# -gt 3 ]; then
    "${@:4}"
  fi
  kill -INT "$WRK_PID"
  wait "$WRK_PID" || { echo "callgrind: wrk failed:" >&2; cat "$out" >&2; return 1; }
  WRK_PID=
  line=$(grep '^BENCH ' "$out" || true)
  if [[ $line != *"\"requests\":$1,"* || $line != *'"status_errors":0,'* || $line != *'"socket_errors":0}'* ]]; then
    echo "callgrind: expected $1 answered requests without errors, wrk said:" >&2
    cat "$out" >&2
    return 1
  fi
}

# control pid -z|-d: zero or dump callgrind's counters.
control() {
  timeout 60 callgrind_control "$2" "$1" >"$WORK/control.log" 2>&1 ||
    { echo "callgrind: callgrind_control $2 failed:" >&2; cat "$WORK/control.log" >&2; return 1; }
}

# connections_closed: waits until the server has closed its end of every connection on
# its port (the warm-up's closes handled before the counters are zeroed), at most 60 s.
connections_closed() {
  local port=${URL##*:} n
  for _ in $(seq 600); do
    n=$(ss -Htn state established state close-wait "( sport = :$port )" | wc -l)
    [ "$n" = 0 ] && return 0
    sleep 0.1
  done
  echo "callgrind: the server still holds $n connection(s) after the warm-up" >&2
  return 1
}

# listening LOG PID: the http://127.0.0.1:PORT a process printed to LOG (empty if it died
# or took over 2 minutes).
listening() {
  local url=
  for _ in $(seq 600); do
    # "listening on": valgrind's own first lines repeat the command line (--webhook URL).
    url=$(grep -o 'listening on http://127\.0\.0\.1:[0-9]*' "$1" | head -1 | sed 's/^listening on //' || true)
    [ -n "$url" ] && break
    kill -0 "$2" 2>/dev/null || break
    sleep 0.2
  done
  echo "$url"
}

# The webhook row's receiver: bench's hello-world answers every POST with a 200.
SERVE_ARGS=()
HELLO=$(dirname "$BINARY")/hello
if [ "$ROW" = webhook ] || [ "$ROW" = ceiling ]; then
  [ -x "$HELLO" ] || { echo "callgrind: $HELLO is missing (build it: cargo build --release -p fauxpay-bench --bin hello)" >&2; exit 2; }
fi
if [ "$ROW" = ceiling ] && [ -n "${BASELINE:-}" ]; then
  echo "callgrind: the ceiling row compares the binary with hello; it takes no BASELINE" >&2
  exit 2
fi
if [ "$ROW" = webhook ]; then
  "$HELLO" 127.0.0.1:0 >"$WORK/receiver.log" 2>&1 &
  RECEIVER_PID=$!
  receiver=$(listening "$WORK/receiver.log" "$RECEIVER_PID")
  [ -n "$receiver" ] || { echo "callgrind: the receiver did not start:" >&2; cat "$WORK/receiver.log" >&2; exit 1; }
  SERVE_ARGS=(--webhook "$receiver/webhooks/stripe")
fi

# drained: waits until the server has delivered every event (the webhook row).
drained() {
  local answer
  answer=$(curl -s "$URL/__fauxpay/webhooks/drain?timeout=600s")
  [[ $answer == *'"drained":true'* ]] || { echo "callgrind: deliveries on $URL did not drain: $answer" >&2; return 1; }
}

# dump PID: the counters, after the deliveries when there are any.
dump() {
  [ "$ROW" != webhook ] || drained
  control "$1" -d
}

# measure BINARY LABEL: sets TOTAL (Ir between the zero and the dump).
measure() {
  local bin=$1 tag log pid dump
  tag=$ROW-$2-$$
  log="$WORK/$tag.log"
  local server=("$bin" serve --addr "127.0.0.1:$PORT" --profile happy "${SERVE_ARGS[@]}")
  # The ceiling: hello sending the provider's answer ($WORK/answer.json, capture_answer).
  [ "$2" != ceiling ] || server=("$HELLO" "127.0.0.1:$PORT" "$WORK/answer.json")
  env -u RUST_LOG valgrind --tool=callgrind --callgrind-out-file="$WORK/$tag.out" \
    "${server[@]}" >"$log" 2>&1 &
  SERVER_PID=$!
  pid=$SERVER_PID
  URL=$(listening "$log" "$pid")
  [ -n "$URL" ] || { echo "callgrind: $bin did not start:" >&2; cat "$log" >&2; return 1; }
  local what=$ROW
  [ "$ROW" != ceiling ] || what=$([ "$2" = ceiling ] && echo "the replay row's requests, hello sending the provider's answer" || echo replay)
  echo "callgrind: $bin on $URL: $WARMUP warm-up requests, then $REQUESTS counted ($what, $CONNS connections)" >&2

  if [ "$SCRIPT" = replay.lua ]; then
    wrk_exact 1 1 "warm-$$" # the first answer, alone: concurrent firsts would get 409s
  fi
  wrk_exact "$WARMUP" "$CONNS" "warm-$$"
  [ "$ROW" != webhook ] || drained
  connections_closed
  control "$pid" -z
  # Dumped before wrk closes its connections: their accepts are counted, their closes not.
  wrk_exact "$REQUESTS" "$CONNS" "run-$$" dump "$pid"

  stop "$pid"

  # The dump is <out>.1 (the final dump at exit is <out>, the part after it).
  dump="$WORK/$tag.out.1"
  [ -f "$dump" ] || { echo "callgrind: no dump at $dump:" >&2; ls "$WORK" >&2; return 1; }
  total_of "$dump" "$tag"
}

# stop PID: the server, asked to stop (TERM) and killed after 60 s.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 300); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  SERVER_PID=
}

# total_of FILE TAG: sets TOTAL from a callgrind output file, which BENCH_KEEP keeps.
total_of() {
  TOTAL=$(awk '/^summary:/ {print $2; exit}' "$1")
  [ -n "$TOTAL" ] || { echo "callgrind: no total in $1" >&2; return 1; }
  if [ -n "${BENCH_KEEP:-}" ]; then
    mkdir -p "$BENCH_KEEP"
    cp "$1" "$BENCH_KEEP/callgrind.$2"
    echo "callgrind: kept $BENCH_KEEP/callgrind.$2 (callgrind_annotate it)" >&2
  fi
}

# fill_log BINARY DIR: exactly REQUESTS new payments into DIR, then kill -9.
fill_log() {
  local log="$WORK/fill.log"
  rm -rf "$2"
  "$1" serve --addr "127.0.0.1:$PORT" --profile happy --data-dir "$2" >"$log" 2>&1 &
  SERVER_PID=$!
  URL=$(listening "$log" "$SERVER_PID")
  [ -n "$URL" ] || { echo "callgrind: $1 did not start:" >&2; cat "$log" >&2; return 1; }
  echo "callgrind: $1 on $URL: $REQUESTS new payments into a data dir, then kill -9" >&2
  wrk_exact "$REQUESTS" "$CONNS" "fill-$$"
  kill -KILL "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
}

# measure_recovery BINARY LABEL: sets TOTAL (Ir inside durable::recovery::open, restarting
# on the log BINARY wrote). Pinned to one core, so that recovery replays on one thread:
# --toggle-collect counts the thread that enters `open`, and on two cores a second thread
# would read and decode the records outside it.
measure_recovery() {
  local bin=$1 tag=$ROW-$2-$$ dir="$WORK/data-$2" log pid
  log="$WORK/$tag.log"
  fill_log "$bin" "$dir"
  env -u RUST_LOG taskset -c 0 valgrind --tool=callgrind --toggle-collect='fauxpay_provider::durable::recovery::open' \
    --callgrind-out-file="$WORK/$tag.out" "$bin" serve --addr "127.0.0.1:$PORT" --profile happy \
    --data-dir "$dir" >"$log" 2>&1 &
  SERVER_PID=$!
  pid=$SERVER_PID
  URL=$(listening "$log" "$pid")
  [ -n "$URL" ] || { echo "callgrind: $bin did not recover:" >&2; cat "$log" >&2; return 1; }
  grep -o 'recovered [0-9]* records ([0-9]* writes)' "$log" | sed "s#^#callgrind: $bin #" >&2 || true
  stop "$pid"
  rm -rf "$dir"
  total_of "$WORK/$tag.out" "$tag"
}

if [ "$ROW" = recovery ]; then
  measure() { measure_recovery "$@"; }
fi

per_request() {
  awk "BEGIN {printf \"%.0f\", $1 / $REQUESTS}"
}

# capture_answer: the binary's answer to a create-and-confirm like replay.lua's, in
# $WORK/answer.json (what hello sends as the ceiling): the request bench/run.sh's
# capture_answer sends for its ceiling rows.
capture_answer() {
  local log="$WORK/answer.log"
  "$BINARY" serve --addr "127.0.0.1:$PORT" --profile happy >"$log" 2>&1 &
  SERVER_PID=$!
  URL=$(listening "$log" "$SERVER_PID")
  [ -n "$URL" ] || { echo "callgrind: $BINARY did not start:" >&2; cat "$log" >&2; return 1; }
  curl -fsS -o "$WORK/answer.json" -H "Authorization: Bearer sk_test_bench" -H "Idempotency-Key: bench-answer" \
    -d amount=2000 -d currency=usd -d confirm=true -d payment_method=pm_card_visa -d "metadata[order_id]=bench-answer" \
    "$URL/v1/payment_intents"
  stop "$SERVER_PID"
  [ -s "$WORK/answer.json" ] || { echo "callgrind: no answer from $BINARY to capture" >&2; return 1; }
}

measure "$BINARY" binary
total=$TOTAL
line="row=$ROW requests=$REQUESTS instructions_per_request=$(per_request "$total") instructions=$total"
if [ -n "${BASELINE:-}" ]; then
  measure "$BASELINE" baseline
  base=$TOTAL
  ratio=$(awk "BEGIN {printf \"%.4f\", $total / $base}")
  line="$line baseline_instructions_per_request=$(per_request "$base") baseline_instructions=$base ratio=$ratio"
fi
if [ "$ROW" = ceiling ]; then
  capture_answer
  measure "$HELLO" ceiling
  ratio=$(awk "BEGIN {printf \"%.4f\", $total / $TOTAL}")
  line="$line ceiling_instructions_per_request=$(per_request "$TOTAL") ceiling_instructions=$TOTAL ratio=$ratio"
fi
echo "$line"
