#!/bin/sh
# What one `larder log --follow` reader costs hot 1 KiB hits: requests/s
# with and without it attached, interleaved (the machine is shared and
# noisy: compare within a run). The follower writes to /dev/null.
#
#   bench/follow-cost.sh [rounds] [seconds]      (WORKERS=n, default 1)
#
# Not a test: nothing here asserts a figure.
ROUNDS=${1:-3}
SECONDS_TO_RUN=${2:-5}
WORKERS=${WORKERS:-1}
. "$(dirname "$0")/common.sh"
ADMIN_PORT=$(free_port)
mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/1k"
start_static_origin "location ~ ^/1k/ { add_header Cache-Control \"max-age=3600\"; try_files /1k =404; }"
start_larder --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level error
PIDS="$PIDS $LARDER_PID"
curl -fsS -o /dev/null "http://127.0.0.1:$LARDER_PORT/1k/hot"  # stored: every later request is a hit
round=0
while [ $round -lt "$ROUNDS" ]; do
    round=$((round + 1))
    for mode in alone followed; do
        if [ $mode = followed ]; then
            "$LARDER" log --follow --admin "http://127.0.0.1:$ADMIN_PORT" > "$WORK/follow.out" &
            FOLLOWER=$!
            i=0; while [ ! -s "$WORK/follow.out" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done  # it follows
        fi
        rate=$(wrk -t1 -c16 -d"${SECONDS_TO_RUN}s" "http://127.0.0.1:$LARDER_PORT/1k/hot" | awk '/Requests\/sec/ {print $2}')
        if [ $mode = followed ]; then
            kill "$FOLLOWER"
            wait "$FOLLOWER" 2> /dev/null || true
        fi
        echo "$mode $rate"
    done
done | tee "$WORK/rates.txt"
awk '{ sum[$1] += $2; n[$1]++ } END { a = sum["alone"] / n["alone"]; f = sum["followed"] / n["followed"];
     printf "mean: alone %.0f, followed %.0f requests/s: %.3f\n", a, f, f / a }' "$WORK/rates.txt"
