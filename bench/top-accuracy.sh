#!/bin/sh
# `larder top`'s figures against wrk's own count: wrk drives hot hits while
# `larder top` (piped: one line a second) reads the admin API. Prints wrk's
# requests/s, the mean of top's requests/s over the seconds wholly inside
# the run, and the requests top counted over the run against wrk's total.
#
#   bench/top-accuracy.sh [seconds] [connections]     (WORKERS=n, default 2)
#
# Not a test: nothing here asserts a figure.
SECONDS_TO_RUN=${1:-10}
CONNECTIONS=${2:-16}
. "$(dirname "$0")/common.sh"
ADMIN_PORT=$(free_port)
start_larder --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level error
PIDS="$PIDS $LARDER_PID"
curl -fsS -o /dev/null "http://127.0.0.1:$LARDER_PORT/top-accuracy"  # stored: every later request is a hit
: > "$WORK/top.txt"
"$LARDER" top --admin "http://127.0.0.1:$ADMIN_PORT" --interval 1 --urls 0 > "$WORK/top.txt" &
TOP_PID=$!
PIDS="$PIDS $TOP_PID"
# Two readings before the load, so the run starts between two lines.
i=0; while [ "$(wc -l < "$WORK/top.txt")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_TO_RUN}s" "http://127.0.0.1:$LARDER_PORT/top-accuracy" > "$WORK/wrk.txt"
sleep 2.5  # two more readings after the load
kill "$TOP_PID"
WRK_RATE=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
WRK_TOTAL=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
# requests=N is cumulative: its growth over the whole file is what top saw
# of the run (and the one request before it); the rate lines inside the
# run are those after the first busy one and before the last.
awk -v wrk_rate="$WRK_RATE" -v wrk_total="$WRK_TOTAL" '
    { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
    NR == 1 { first = v["requests"] }
    { last = v["requests"]; rate[NR] = v["requests_per_s"] }
    END {
        busy_first = 0; busy_last = 0
        for (n = 1; n <= NR; n++) if (rate[n] > 0) { if (!busy_first) busy_first = n; busy_last = n }
        sum = 0; count = 0
        for (n = busy_first + 1; n < busy_last; n++) { sum += rate[n]; count++ }
        counted = last - first
        printf "wrk: %s requests/s, %d requests\n", wrk_rate, wrk_total
        if (count > 0) printf "larder top: %.0f requests/s (mean of %d whole seconds), %.4f of wrk'\''s\n", sum / count, count, sum / count / wrk_rate
        printf "larder top counted %d requests over the run, %.5f of wrk'\''s\n", counted, counted / wrk_total
    }' "$WORK/top.txt"
