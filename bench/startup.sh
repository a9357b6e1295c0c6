#!/bin/sh
# Start-up, Larder against nginx proxy_cache (not a test): milliseconds from
# exec to the first answer, once for a new URL (a miss fetched from the
# origin) and once for a key stored before the start (a hit), with ENTRIES
# responses in Larder's disk tier.
#
#   bench/startup.sh [entries] [runs]
#
# Larder's entries are copies of one real cache file under new keys
# (bench/startup.py clone), so 100,000 take seconds, not a fill through the
# proxy. nginx's start-up does not read its cache directory before serving
# (its cache loader starts a minute later and a lookup opens the file by
# its key's hash), so nginx holds only the stored key. Each start is polled
# with a raw socket every millisecond (spawning curl to poll costs more
# than the start being measured); starts alternate between the two; medians.
# The origin is an nginx serving files (a new connection per start).
ENTRIES=${1:-100000}
RUNS=${2:-7}
WORKERS=${WORKERS:-2}
ORIGIN=none
. "$(dirname "$0")/common.sh"

mkdir -p "$WORK/www"
head -c 512 /dev/urandom > "$WORK/www/obj"
start_static_origin "location /s/ { add_header Cache-Control \"max-age=3600\"; try_files /obj =404; }"
STARTUP="python3 bench/startup.py"

# Larder: one real entry stored through it, then cloned.
start_larder --memory-limit 64MiB --cache-dir "$WORK/larder-cache" --admin-listen none --log-level error
curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/s/known-key-00000"
kill "$LARDER_PID"; wait "$LARDER_PID" 2> /dev/null || true
seed=$(find "$WORK/larder-cache" -name '*.lrd' | head -1)
[ -n "$seed" ] || { echo "Larder stored nothing" >&2; exit 1; }
$STARTUP clone "$seed" "$WORK/larder-cache" "$ENTRIES"
entries=$(find "$WORK/larder-cache" -name '*.lrd' | wc -l)

start_caching_nginx
curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/s/known-key-00000"
kill "$(cat "$WORK/nginx.pid")"
i=0; while [ -s "$WORK/nginx.pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
# From here on nginx runs in the foreground, as the child the poller starts and stops.
echo "daemon off;" >> "$WORK/nginx.conf"

L_PORT=$(free_port)
larder() {
    $STARTUP first "$L_PORT" "$1" -- "$LARDER" serve --listen "127.0.0.1:$L_PORT" --upstream "http://127.0.0.1:$ORIGIN_PORT" \
        --workers "$WORKERS" --memory-limit 64MiB --cache-dir "$WORK/larder-cache" --admin-listen none --log-level error
}
nginx() { $STARTUP first "$NGINX_PORT" "$1" -- "$NGINX" -c "$WORK/nginx.conf" -p "$WORK"; }
: > "$WORK/times"
r=0
while [ $r -lt "$RUNS" ]; do
    echo "larder miss $(larder "/s/new-$r-$$")" >> "$WORK/times"
    echo "nginx miss $(nginx "/s/new-$r-$$")" >> "$WORK/times"
    echo "larder hit $(larder /s/known-key-00000)" >> "$WORK/times"
    echo "nginx hit $(nginx /s/known-key-00000)" >> "$WORK/times"
    r=$((r + 1))
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "machine: $(nproc) cores, $(uname -r); $WORKERS workers each; $RUNS starts each (medians); $(date -u +%Y-%m-%dT%H:%MZ)"
printf "%-18s %10s %14s %14s  %s\n" "start-up" "entries" "to a miss, ms" "to a hit, ms" "verdicts"
for proxy in larder nginx; do
    miss=$(awk -v p=$proxy '$1 == p && $2 == "miss" {print $3}' "$WORK/times" | median)
    hit=$(awk -v p=$proxy '$1 == p && $2 == "hit" {print $3}' "$WORK/times" | median)
    verdicts=$(awk -v p=$proxy '$1 == p {v = $4; gsub(/;ttl=[-0-9]+/, "", v); print v}' "$WORK/times" | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep = ", "}')
    count=$entries; [ $proxy = nginx ] && count=1
    printf "%-18s %10s %14s %14s  %s\n" "$proxy" "$count" "$miss" "$hit" "$verdicts"
done
