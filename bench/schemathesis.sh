#!/usr/bin/env bash
# A bounded fuzz run of fauxpay with schemathesis (PyPI), from Stripe's OpenAPI spec in
# the project (spec/stripe-openapi/spec3-subset.json), over every /v1 operation fauxpay
# serves. Exits non-zero when fauxpay answers a 5xx or a response its schema refuses.
#
#   bench/schemathesis.sh                 # 25 examples per operation
#   MAX_EXAMPLES=200 SEED=7 bench/schemathesis.sh
#
# schemathesis is installed (once) in a virtualenv under the cargo target directory; the
# provider is the debug build (FAUXPAY_BIN to use another), on a free local port. The
# operations served are found by asking the provider: one that answers "Unrecognized
# request URL" (404) or 405 is not fauxpay's, so the spec is trimmed to the rest.
set -euo pipefail

cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/schemathesis-venv"
SCHEMATHESIS_VERSION="${SCHEMATHESIS_VERSION:-4.32.5}"
MAX_EXAMPLES="${MAX_EXAMPLES:-25}"
SEED="${SEED:-1}"
WORK="$TARGET/schemathesis"
mkdir -p "$WORK"

if [ ! -x "$VENV/bin/schemathesis" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION"
fi

BIN="${FAUXPAY_BIN:-}"
if [ -z "$BIN" ]; then
    cargo build -q --bin fauxpay
    BIN="$TARGET/debug/fauxpay"
fi

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
URL="http://127.0.0.1:$PORT"
"$BIN" serve --addr "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    if python3 -c "import urllib.request; urllib.request.urlopen('$URL/__fauxpay/health', timeout=1)" 2>/dev/null; then
        break
    fi
    sleep 0.1
done

# The spec, trimmed to the operations fauxpay serves.
python3 - "$URL" spec/stripe-openapi/spec3-subset.json "$WORK/served.json" <<'PY'
import json, re, sys, urllib.request, urllib.error
url, src, dst = sys.argv[1:]
spec = json.load(open(src))
served, skipped = {}, []
for path, ops in spec["paths"].items():
    concrete = re.sub(r"\{[^}]+\}", "x_probe", path)
    for method, op in ops.items():
        if method not in ("get", "post", "delete"):
            continue
        req = urllib.request.Request(url + concrete, method=method.upper(), data=b"" if method == "post" else None,
                                     headers={"Authorization": "Bearer sk_test_schemathesis"})
        try:
            urllib.request.urlopen(req, timeout=5)
            status, body = 200, ""
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode("utf-8", "replace")
        if status == 405 or (status == 404 and "Unrecognized request URL" in body):
            skipped.append(f"{method.upper()} {path}")
            continue
        served.setdefault(path, {})[method] = op
        for key in ("parameters", "servers"):
            if key in ops:
                served[path][key] = ops[key]
spec["paths"] = served
spec["servers"] = [{"url": url}]
json.dump(spec, open(dst, "w"))
count = sum(1 for p in served.values() for m in p if m in ("get", "post", "delete"))
print(f"{count} operations served by fauxpay; {len(skipped)} in the spec are not: {', '.join(skipped)}")
PY

status=0
"$VENV/bin/schemathesis" run "$WORK/served.json" \
    --url "$URL" \
    --header "Authorization: Bearer sk_test_schemathesis" \
    --checks not_a_server_error,response_schema_conformance \
    --max-examples "$MAX_EXAMPLES" \
    --seed "$SEED" \
    --phases examples,coverage,fuzzing \
    --request-timeout 10 \
    --generation-database none \
    --no-color \
    --report junit --report-dir "$WORK/report" || status=$?
echo "schemathesis exit status: $status (report: $WORK/report)"
exit "$status"
