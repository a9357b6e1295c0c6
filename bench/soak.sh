#!/bin/sh
# Soak: bench/soak.py's mixed traffic (hits, misses, purges, slow readers,
# hang-ups) against Larder with a disk tier for a bounded time, sampling
# its resident memory and open file descriptors every 10 s. Both tiers are
# small (32 MiB memory, 64 MiB disk) so they fill within the first minutes;
# after that memory and descriptors should stay flat, and every body must
# be correct.
#
#   bench/soak.sh [seconds] [threads]
SECONDS_TOTAL=${1:-600}
CLIENTS=${2:-16}
. "$(dirname "$0")/common.sh"
ADMIN_PORT=$(free_port)
start_larder --memory-limit 32MiB --cache-dir "$WORK/cache" --disk-limit 64MiB --admin-listen "127.0.0.1:$ADMIN_PORT" \
    --log-level error
PIDS="$PIDS $LARDER_PID"
python3 bench/soak.py "$LARDER_PORT" "$ADMIN_PORT" "$ORIGIN_PORT" "$SECONDS_TOTAL" "$CLIENTS" > "$WORK/soak.out" 2>&1 &
DRIVER=$!
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${SECONDS_TOTAL}s, $CLIENTS clients"
echo "seconds  rss_MiB  fds"
start=$(date +%s)
while kill -0 "$DRIVER" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$LARDER_PID/status")
    fds=$(ls "/proc/$LARDER_PID/fd" | wc -l)
    echo "$(( $(date +%s) - start ))  $rss  $fds"
    sleep 10
done
wait "$DRIVER"; status=$?
cat "$WORK/soak.out"
kill -0 "$LARDER_PID" 2>/dev/null && echo "larder still running" || { echo "larder died"; status=1; }
exit $status
