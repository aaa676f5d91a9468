#!/usr/bin/env bash
# A disposable PostgreSQL with pgvector for the tests (PostgresStore, PostgresRunStore).
# First choice: the `pgserver` wheel (PostgreSQL 16 + pgvector, no root services, listens only on
# a unix socket in its data directory). Fallback when pgserver cannot start: Debian's PostgreSQL
# on 127.0.0.1 plus the postgresql-<major>-pgvector package if apt has it.
#
#   .ci/pg-server.sh start    start it (fresh data directory), create the vector extension
#   .ci/pg-server.sh url      print the connection URL (for AGENTFOOTPRINT_PG_URL)
#   .ci/pg-server.sh stop     stop the server this script started and delete its data
#   .ci/pg-server.sh status   exit 0 when it answers
#
# Needs: pip install pgserver psycopg  (the dev and postgres extras).
# Settings (env): PYTHON (default .venv/bin/python), PG_SERVER_DIR (state and data, default
# ${TMPDIR:-/tmp}/agentfootprint-pg-server), AGENTFOOTPRINT_PG_PORT (Debian fallback, 5440).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
DIR="${PG_SERVER_DIR:-${TMPDIR:-/tmp}/agentfootprint-pg-server}"
PORT="${AGENTFOOTPRINT_PG_PORT:-5440}"
DATA="$DIR/data"

answers() {
    [ -f "$DIR/url" ] && "$PYTHON" - "$(cat "$DIR/url")" <<'EOF' 2>/dev/null
import sys, psycopg
with psycopg.connect(sys.argv[1], connect_timeout=2) as conn:
    conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
EOF
}

# Disposable test server: durability off (much faster DDL and commits), vector extension on.
SETUP_SQL="ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off;
ALTER SYSTEM SET full_page_writes = off; SELECT pg_reload_conf();
CREATE EXTENSION IF NOT EXISTS vector;"

start_pgserver() {
    "$PYTHON" -W ignore - "$DATA" "$SETUP_SQL" >"$DIR/url" <<'EOF'
import sys
import pgserver
server = pgserver.get_server(sys.argv[1], cleanup_mode=None)  # keeps running after we exit
server.psql(sys.argv[2])
print(server.get_uri())
EOF
    echo pgserver >"$DIR/kind"
}

start_debian() {
    local bindir major
    bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -x "$bindir/initdb" ] || { echo "pg-server: no Debian PostgreSQL either" >&2; return 1; }
    major="$(basename "$(dirname "$bindir")")"
    if [ ! -f "/usr/share/postgresql/$major/extension/vector.control" ]; then
        apt-get install -y -qq "postgresql-$major-pgvector" >/dev/null 2>&1 || {
            echo "pg-server: Debian PostgreSQL $major has no pgvector (apt has no" \
                 "postgresql-$major-pgvector); install pgserver instead: pip install pgserver" >&2
            return 1
        }
    fi
    mkdir -p "$DATA"
    chown postgres: "$DIR" "$DATA"
    runuser -u postgres -- "$bindir/initdb" -D "$DATA" -A trust -U postgres >/dev/null
    runuser -u postgres -- "$bindir/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA" start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$PORT/postgres" >"$DIR/url"
    printf '%s\n' "$SETUP_SQL" | runuser -u postgres -- "$bindir/psql" -q -v ON_ERROR_STOP=1 \
        -h 127.0.0.1 -p "$PORT" -U postgres >/dev/null
    echo "debian $bindir" >"$DIR/kind"
}

start() {
    if answers; then
        echo "pg-server: already running at $(cat "$DIR/url")"
        return 0
    fi
    stop >/dev/null 2>&1 || true
    mkdir -p "$DIR"
    local started=$SECONDS
    if ! start_pgserver 2>"$DIR/start.log"; then
        echo "pg-server: pgserver did not start (end of its output below); trying Debian's" >&2
        tail -n 20 "$DIR/start.log" >&2
        start_debian
    fi
    if ! answers; then
        echo "pg-server: no answer with the vector extension at $(cat "$DIR/url")" >&2
        return 1
    fi
    echo "pg-server: running ($(cut -d' ' -f1 "$DIR/kind"), ready in" \
         "$((SECONDS - started))s) at $(cat "$DIR/url")"
}

stop() {
    if ! [ -f "$DIR/kind" ]; then
        rm -rf "$DIR"
        echo "pg-server: not running"
        return 0
    fi
    local kind bindir
    read -r kind bindir <"$DIR/kind"
    if [ "$kind" = pgserver ] && [ -f "$DATA/PG_VERSION" ]; then
        # Stops the postmaster recorded in the data directory, then deletes the directory.
        "$PYTHON" -W ignore - "$DATA" <<'EOF'
import sys
import pgserver
pgserver.get_server(sys.argv[1], cleanup_mode="delete").cleanup()
EOF
    else
        runuser -u postgres -- "$bindir/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$DIR"
    echo "pg-server: stopped ($kind)"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) cat "$DIR/url" ;;
    status) answers ;;
    *) echo "usage: $0 start|stop|url|status" >&2; exit 2 ;;
esac
