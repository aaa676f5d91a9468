# Sourced by .ci/run: named phases with their seconds, and the run's peak memory.
#
#   phase NAME CMD [ARGS...]     run CMD (a command or a function) in the foreground as phase NAME;
#                                under `set -e` a failure ends the script, and the report marks it
#   phase_bg NAME LOG CMD [...]  start CMD in the background, in its own process group, output to LOG
#   phase_wait NAME              wait for a background phase; on failure print the end of its log
#   phase_kill_background        stop every background phase still running (for the exit trap)
#   phases_report                print the table (once; the exit trap calls it)
#
# Peak memory is the highest `MemTotal - MemAvailable` of /proc/meminfo, sampled every second,
# minus its value when the run started: the whole machine, every process of the run included.

PHASES_DIR="$(mktemp -d)"
PHASES_T0=$SECONDS
PHASES_REPORTED=""

_mem_used_kb() {
    awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {print t - a}' /proc/meminfo
}

_mem_used_kb >"$PHASES_DIR/mem.base"
(
    peak=0
    while :; do
        used="$(_mem_used_kb)"
        if [ "$used" -gt "$peak" ]; then peak=$used; echo "$peak" >"$PHASES_DIR/mem.peak"; fi
        sleep 1
    done
) &
PHASES_SAMPLER=$!

_phase_record() {  # NAME START END STATUS
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$PHASES_DIR/table"
}

PHASE_CURRENT=""
PHASE_START=0

phase() {
    PHASE_CURRENT="$1"; shift
    PHASE_START=$SECONDS
    echo "== $PHASE_CURRENT"
    # Not `"$@" || ...`: that would turn off `set -e` inside a function phase.
    "$@"
    _phase_record "$PHASE_CURRENT" "$((PHASE_START - PHASES_T0))" "$((SECONDS - PHASES_T0))" 0
    PHASE_CURRENT=""
}

phase_bg() {
    local name="$1" log="$2"; shift 2
    echo "== $name (in the background; output in $log)"
    (
        start=$SECONDS
        status=0
        # setsid: its own process group, so the exit trap can stop the compilers under it too
        setsid "$@" >"$log" 2>&1 </dev/null &
        echo "$!" >"$PHASES_DIR/group.$name"
        wait "$!" || status=$?
        echo "$((start - PHASES_T0)) $((SECONDS - PHASES_T0)) $status" >"$PHASES_DIR/bg.$name"
        exit "$status"
    ) &
    echo "$! $log" >"$PHASES_DIR/pid.$name"
}

phase_kill_background() {
    local file group
    for file in "$PHASES_DIR"/group.*; do
        [ -f "$file" ] || continue
        group="$(cat "$file")"
        [ -f "$PHASES_DIR/bg.${file##*/group.}" ] && continue   # already finished
        kill -- "-$group" 2>/dev/null && echo "stopped the background phase ${file##*/group.}"
    done
    return 0
}

phase_wait() {
    local name="$1" pid log status=0 start end
    read -r pid log <"$PHASES_DIR/pid.$name"
    echo "== $name (waiting for the background phase)"
    wait "$pid" || status=$?
    read -r start end _ <"$PHASES_DIR/bg.$name" || { start=0; end=$((SECONDS - PHASES_T0)); }
    _phase_record "$name" "$start" "$end" "$status"
    if [ "$status" -ne 0 ]; then
        echo "$name failed (exit $status); the end of $log:" >&2
        tail -n 60 "$log" >&2
    fi
    return "$status"
}

phases_report() {
    [ -n "$PHASES_REPORTED" ] && return 0
    PHASES_REPORTED=1
    kill "$PHASES_SAMPLER" 2>/dev/null || true
    # every variable local: the caller's trap keeps its exit status in `status`
    local base peak name start end status
    base="$(cat "$PHASES_DIR/mem.base")"
    peak="$(cat "$PHASES_DIR/mem.peak" 2>/dev/null || echo "$base")"
    echo
    echo "== phases (seconds from the start of .ci/run)"
    printf '%-44s %7s %7s %9s  %s\n' phase start end seconds status
    if [ -n "$PHASE_CURRENT" ]; then
        _phase_record "$PHASE_CURRENT" "$((PHASE_START - PHASES_T0))" "$((SECONDS - PHASES_T0))" \
            "${1:-1}"
        PHASE_CURRENT=""
    fi
    if [ -f "$PHASES_DIR/table" ]; then
        while IFS=$'\t' read -r name start end status; do
            [ "$status" = 0 ] && status=ok || status="FAILED ($status)"
            printf '%-44s %7s %7s %9s  %s\n' "$name" "$start" "$end" "$((end - start))" "$status"
        done <"$PHASES_DIR/table"
    fi
    printf '%-44s %7s %7s %9s\n' "whole run" 0 "$((SECONDS - PHASES_T0))" "$((SECONDS - PHASES_T0))"
    echo "peak memory above the start of the run: $(( (peak - base) / 1024 )) MiB" \
         "(MemTotal - MemAvailable, sampled every second)"
    rm -rf "$PHASES_DIR"
}
