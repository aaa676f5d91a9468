#!/usr/bin/env bash
# Arize Phoenix, the OpenTelemetry collector the export tests will send GenAI spans to, in a
# virtualenv of its own (.ci/venvs/phoenix): it pins anthropic<2 while we run anthropic 2.x.
# Listens on 127.0.0.1 only, keeps its data in a temporary folder, sends no telemetry.
# Measured on a 2-core machine: about 60 s to install (851 MB), about 14 s to answer.
#
#   .ci/phoenix-server.sh install   build .ci/venvs/phoenix (nothing when it is up to date)
#   .ci/phoenix-server.sh start     start it, wait until it answers, print its base URL
#   .ci/phoenix-server.sh url       print the base URL of the running server
#   .ci/phoenix-server.sh stop      stop it and delete its data
#   .ci/phoenix-server.sh status    exit 0 when it answers
#
# Its assistant and the server-side bash, web access, GitHub, MCP and sandbox features are
# switched off: it is a collector here, and nothing in it may run code or reach the network.
#
# Settings (env): PHOENIX_PORT and PHOENIX_GRPC_PORT (default: free ports), PHOENIX_STATE_DIR
# (default a fresh temporary folder recorded in .ci/.phoenix-state), PHOENIX_TIMEOUT (seconds,
# 120).
set -euo pipefail
cd "$(dirname "$0")/.."

PHOENIX="arize-phoenix==20.26.1"
PYTHON=.ci/venvs/phoenix/bin/python
TIMEOUT="${PHOENIX_TIMEOUT:-120}"
POINTER=.ci/.phoenix-state

free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

url() {  # the running server's base URL (recorded at start)
    [ -f "$POINTER" ] && cat "$(cat "$POINTER")/url" 2>/dev/null
}

answers() {
    local base="${1:-$(url)}"
    [ -n "$base" ] || return 1
    "$PYTHON" - "$base/healthz" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as reply:
    sys.exit(0 if reply.status == 200 else 1)
PY
}

start() {
    [ -x "$PYTHON" ] || { echo "phoenix: not installed; run .ci/phoenix-server.sh install" >&2; return 1; }
    if answers; then echo "phoenix: already running at $(url)" >&2; return 1; fi
    local port="${PHOENIX_PORT:-$(free_port)}" grpc_port="${PHOENIX_GRPC_PORT:-$(free_port)}"
    local URL="http://127.0.0.1:$port"
    local dir="${PHOENIX_STATE_DIR:-$(mktemp -d)}"
    echo "$dir" >"$POINTER"
    echo "$URL" >"$dir/url"
    PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$port" PHOENIX_GRPC_PORT="$grpc_port" \
        PHOENIX_WORKING_DIR="$dir" PHOENIX_TELEMETRY_ENABLED=false DO_NOT_TRACK=1 \
        PHOENIX_DISABLE_AGENT_ASSISTANT=true PHOENIX_AGENTS_DISABLE_BASH=true \
        PHOENIX_AGENTS_DISABLE_WEB_ACCESS=true PHOENIX_AGENTS_DISABLE_GITHUB=true \
        PHOENIX_ENABLE_MCP_SERVER=false PHOENIX_ALLOWED_SANDBOX_PROVIDERS=NONE \
        nohup .ci/venvs/phoenix/bin/phoenix serve >"$dir/phoenix.log" 2>&1 </dev/null &
    echo $! >"$dir/phoenix.pid"
    local started=$SECONDS
    until answers "$URL"; do
        if ! kill -0 "$(cat "$dir/phoenix.pid")" 2>/dev/null || (( SECONDS - started >= TIMEOUT )); then
            echo "phoenix: no answer at $URL; the end of its log:" >&2
            tail -n 30 "$dir/phoenix.log" >&2
            stop >&2
            return 1
        fi
        sleep 0.5
    done
    echo "phoenix: running (ready in $((SECONDS - started))s) at $URL"
}

stop() {
    [ -f "$POINTER" ] || { echo "phoenix: not running"; return 0; }
    local dir pid
    dir="$(cat "$POINTER")"
    pid="$(cat "$dir/phoenix.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$dir" "$POINTER"
    echo "phoenix: stopped"
}

case "${1:-}" in
    install) PIP_NO_CACHE_DIR=1 .ci/server-venv.sh phoenix -- "$PHOENIX" ;;
    start) start ;;
    url) url ;;
    stop) stop ;;
    status) answers ;;
    *) echo "usage: $0 install|start|url|stop|status" >&2; exit 2 ;;
esac
