# The `peers` row group of bench/run.sh (sourced by it, with its helpers: start_server,
# wrk_once, row, median, calc, fmt, ge; `BENCH_ROWS=peers bench/run.sh`).
#
# What a newcomer would pick instead of fauxpay, measured in the same run as fauxpay on
# the same create-and-confirm request (bench/wrk/new.lua), as ratios fauxpay ÷ peer:
#   servers: WireMock (a static stub, request journal off) and localstripe (stateful);
#   clients: Locust's FastHttpUser against fauxpay, beside `fauxpay load`.
# Beside each server a correctness probe: does it honour an idempotency key (same key →
# same payment, another key → another payment) and refuse an unknown parameter (400)?
#
# Installs what it needs under target/bench-peers/ from the package registries:
# localstripe and Locust from PyPI (a venv), WireMock's standalone jar from its npm
# package, Debian's JRE when java is missing. stripe-mock is not measured: it ships as a
# Go binary or a Docker image, neither of which comes from a registry this bench uses.

PEERS_DIR=target/bench-peers
WIREMOCK_VERSION=3.13.2
LOCALSTRIPE_VERSION=1.15.10
LOCUST_VERSION=2.47.0

peers_install() {
  mkdir -p "$PEERS_DIR"
  if [ ! -x "$PEERS_DIR/venv/bin/locust" ] || [ ! -x "$PEERS_DIR/venv/bin/localstripe" ]; then
    echo "  installing localstripe $LOCALSTRIPE_VERSION and Locust $LOCUST_VERSION (PyPI) into $PEERS_DIR/venv" >&2
    python3 -m venv "$PEERS_DIR/venv"
    "$PEERS_DIR/venv/bin/pip" install -q "localstripe==$LOCALSTRIPE_VERSION" "locust==$LOCUST_VERSION" >&2
  fi
  if [ ! -f "$PEERS_DIR/wiremock-standalone-$WIREMOCK_VERSION.jar" ]; then
    echo "  fetching WireMock $WIREMOCK_VERSION's standalone jar (npm package wiremock)" >&2
    (cd "$PEERS_DIR" && npm pack -q "wiremock@$WIREMOCK_VERSION" >/dev/null &&
      tar xzf "wiremock-$WIREMOCK_VERSION.tgz" "package/build/wiremock-standalone-$WIREMOCK_VERSION.jar" &&
      mv "package/build/wiremock-standalone-$WIREMOCK_VERSION.jar" . && rm -rf package "wiremock-$WIREMOCK_VERSION.tgz")
  fi
  if ! command -v java >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq default-jre-headless >/dev/null
    else
      echo "bench: java is missing (WireMock): sudo apt-get install -y default-jre-headless" >&2
      exit 2
    fi
  fi
}

# A free loopback port.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_http URL SECONDS: until anything answers at URL.
wait_http() {
  for _ in $(seq $(($2 * 10))); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "bench: nothing answered at $1 within $2 s" >&2
  return 1
}

# start_peer wiremock|localstripe: sets PEER_PID and PEER_URL.
start_peer() {
  local port log="$WORK/peer-$1.log"
  port=$(free_port)
  case $1 in
    wiremock)
      mkdir -p "$WORK/wiremock/mappings"
      # A static stub: the answer fauxpay gives, captured once, for every create.
      cat >"$WORK/wiremock/mappings/create.json" <<EOF
{"request": {"method": "POST", "url": "/v1/payment_intents"},
 "response": {"status": 200, "headers": {"Content-Type": "application/json"}, "bodyFileName": "intent.json"}}
EOF
      mkdir -p "$WORK/wiremock/__files"
      cp "$WORK/intent.json" "$WORK/wiremock/__files/intent.json"
      taskset -c "$SERVER_CPU" java -jar "$PEERS_DIR/wiremock-standalone-$WIREMOCK_VERSION.jar" \
        --port "$port" --bind-address 127.0.0.1 --no-request-journal --disable-banner \
        --root-dir "$WORK/wiremock" >"$log" 2>&1 &
      ;;
    localstripe)
      # localstripe pickles its whole store to this fixed path after every write and loads
      # it at start: each run starts empty (a run cut off mid-write leaves it truncated,
      # and localstripe then refuses to start).
      rm -f /tmp/localstripe.pickle
      taskset -c "$SERVER_CPU" "$PEERS_DIR/venv/bin/localstripe" --port "$port" >"$log" 2>&1 &
      ;;
  esac
  PEER_PID=$!
  echo "$PEER_PID" >>"$WORK/peer-pids"
  PEER_URL="http://127.0.0.1:$port"
  wait_http "$PEER_URL/" 60 || { cat "$log" >&2; exit 1; }
}

stop_peer() {
  kill -TERM "$PEER_PID" 2>/dev/null || true
  wait "$PEER_PID" 2>/dev/null || true
}

# create URL KEY ORDER [EXTRA]: the id of the payment intent a create-and-confirm answers
# (or "HTTP <status>" when it is refused).
create() {
  local out status
  out=$(curl -s -m 10 -u sk_test_bench: -H "Idempotency-Key: $2" -w '\n%{http_code}' "$1/v1/payment_intents" \
    --data "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=$3${4:-}")
  status=$(tail -1 <<<"$out")
  if [ "$status" != 200 ]; then
    echo "HTTP $status"
    return
  fi
  head -n -1 <<<"$out" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("id"))'
}

# probe URL: "key: yes|no, unknown parameter: yes|no", what the server does with a
# retried key and with a typo.
probe() {
  local a b c typo keyed=no refused=no
  a=$(create "$1" "probe-k1" "probe-o1")
  b=$(create "$1" "probe-k1" "probe-o1")
  c=$(create "$1" "probe-k2" "probe-o2")
  [ "$a" = "$b" ] && [ "$a" != "$c" ] && [[ "$a" == pi_* ]] && keyed=yes
  typo=$(create "$1" "probe-k3" "probe-o3" "&amout=1")
  [[ "$typo" == "HTTP 400" ]] && refused=yes
  echo "key honoured: $keyed, typo refused: $refused"
}

# A wrk run against a peer: its req/s.
peer_rps() {
  start_peer "$1"
  if [ "$1" = wiremock ]; then
    # The JVM's warm-up, not measured (WireMock drops connections while it compiles).
    WRK_WARMUP=1 wrk_once new.lua "$PEER_URL" "$CONNS" >/dev/null
  fi
  local line
  line=$(wrk_once new.lua "$PEER_URL" "$CONNS")
  stop_peer
  json "$line" rps
}

fauxpay_rps() {
  start_server provider
  local line
  line=$(wrk_once new.lua "$SERVER_URL" "$CONNS")
  stop_server
  json "$line" rps
}

# peer_row NAME LABEL TARGET: ABBA pairs fauxpay / peer, a row with the ratio.
peer_row() {
  abba fauxpay_rps "peer_rps $1" fauxpay "$1"
  local r
  r=$(median "${RATIOS[@]}")
  row "peer server: $2; $PROBE" "$(fmt "$(median "${B_VALUES[@]}")") req/s" "fauxpay $(fmt "$(median "${A_VALUES[@]}")") req/s" "$(fmt "$r" 1)" "fauxpay ≥ $3×" "$(ge "$r" "$3")"
  RAW+=("peer $1: fauxpay req/s ${A_VALUES[*]}; $1 req/s ${B_VALUES[*]}; fauxpay ÷ $1 ${RATIOS[*]}")
}

# Locust's FastHttpUser sending the same request to fauxpay, one process on the client core.
locust_rps() {
  start_server provider
  cat >"$WORK/locustfile.py" <<'EOF'
import itertools, os
from locust import FastHttpUser, task

counter = itertools.count()
prefix = os.environ.get("BENCH_RUN", "locust")

class Checkout(FastHttpUser):
    @task
    def pay(self):
        order = f"{prefix}-{next(counter)}"
        self.client.post(
            "/v1/payment_intents",
            data=f"amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]={order}",
            headers={"Authorization": "Bearer sk_test_bench",
                     "Content-Type": "application/x-www-form-urlencoded",
                     "Idempotency-Key": f"{order}-k"})
EOF
  BENCH_RUN="locust-$RANDOM" timeout $((LOAD_SECS + 60)) taskset -c "$CLIENT_CPU" "$PEERS_DIR/venv/bin/locust" \
    -f "$WORK/locustfile.py" --headless --host "$SERVER_URL" --users "$LOAD_USERS" --spawn-rate 1000 \
    --run-time "${LOAD_SECS}s" --only-summary --csv "$WORK/locust" >"$WORK/locust.log" 2>&1 || true
  stop_server
  # The aggregated row of the stats CSV: its "Requests/s" column.
  python3 - "$WORK/locust_stats.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print([r for r in rows if r["Name"] == "Aggregated"][0]["Requests/s"])
EOF
}

load_rps() {
  start_server provider
  timeout $((LOAD_SECS + 120)) taskset -c "$CLIENT_CPU" "$BIN/fauxpay" load --target "$SERVER_URL" --provider "$SERVER_URL" \
    --template stripe --api-key sk_test_bench --out "$WORK/peer-load-report" --users "$LOAD_USERS" \
    --increase-rate $((LOAD_USERS * 4)) --run-time "${LOAD_SECS}s" --quiet >"$WORK/peer-load.log" 2>&1 ||
    { echo "bench: fauxpay load failed:" | tee -a "$WORK/errors" >&2; tail -20 "$WORK/peer-load.log" >&2; }
  stop_server
  json "$(tr -d ' \n' <"$WORK/peer-load-report/report.json")" attempts_per_sec
}

echo "== peers: the same create-and-confirm request to WireMock and localstripe, and from Locust" >&2
peers_install
# WireMock's stub answers with what fauxpay answers.
start_server provider
curl -s -u sk_test_bench: "$SERVER_URL/v1/payment_intents" \
  --data "amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[order_id]=stub" >"$WORK/intent.json"
PROBE=$(probe "$SERVER_URL")
stop_server
RAW+=("probe fauxpay: $PROBE (a retried key answers the same payment, another key another one; a request with amout= is a 400)")
echo "  fauxpay: $PROBE" >&2

for peer in wiremock localstripe; do
  start_peer "$peer"
  PROBE=$(probe "$PEER_URL")
  stop_peer
  echo "  $peer: $PROBE" >&2
  case $peer in
    wiremock) peer_row wiremock "WireMock $WIREMOCK_VERSION (static stub)" 9.3 ;;
    localstripe) peer_row localstripe "localstripe $LOCALSTRIPE_VERSION" 1500 ;;
  esac
done

echo "== peers: fauxpay load vs Locust $LOCUST_VERSION FastHttpUser ($LOAD_USERS users, ${LOAD_SECS}s, one client core)" >&2
abba load_rps locust_rps "fauxpay load /s" "Locust /s"
r=$(median "${RATIOS[@]}")
row "peer client: Locust $LOCUST_VERSION FastHttpUser (one process)" "$(fmt "$(median "${B_VALUES[@]}")")/s" "fauxpay load $(fmt "$(median "${A_VALUES[@]}")")/s" "$(fmt "$r" 1)" "fauxpay load ≥ 6.6×" "$(ge "$r" 6.6)"
RAW+=("peer locust: fauxpay load attempts/s ${A_VALUES[*]}; Locust req/s ${B_VALUES[*]}; fauxpay load ÷ Locust ${RATIOS[*]}")
