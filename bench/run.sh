#!/bin/sh
# Cache-hit throughput: Larder vs nginx proxy_cache, same machine, same run,
# same origin, same number of workers. Installs wrk and nginx when missing.
#
#   bench/run.sh [duration_seconds] [connections]
#
# Prints requests/s and p99 latency for 1 KiB and 256 KiB hits through each,
# and the ratio Larder/nginx. Not a test: nothing here asserts a timing.
set -eu
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNECTIONS=${2:-64}
WORKERS=${WORKERS:-2}
THREADS=${THREADS:-2}

need=""
command -v wrk >/dev/null 2>&1 || need="$need wrk"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx-light"
if [ -n "$need" ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $need >&2
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
.ci/install-deps
swift build -c release --product larder >&2
LARDER=.build/release/larder

WORK=$(mktemp -d /tmp/larder-bench.XXXXXX)
PIDS=""
cleanup() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; done
    [ -f "$WORK/nginx.pid" ] && kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Origin: the test suite's python server (responses carry max-age=60).
python3 Tests/EndToEndTests/origin.py 0 > "$WORK/origin.out" 2>&1 &
PIDS="$PIDS $!"
i=0; while ! grep -q PORT "$WORK/origin.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
ORIGIN_PORT=$(awk '/PORT/ {print $2}' "$WORK/origin.out")

# Larder.
"$LARDER" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ORIGIN_PORT" --workers "$WORKERS" \
    --memory-limit 256MiB --log-level warning 2> "$WORK/larder.err" &
PIDS="$PIDS $!"
i=0; while ! grep -q "listening on" "$WORK/larder.err" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
LARDER_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/larder.err")

# nginx with proxy_cache, tuned as a fair user would: no access log,
# keep-alive to clients and upstream, same worker count.
NGINX_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/cache" "$WORK/tmp"
# nginx workers run as an unprivileged user when started as root.
chmod 755 "$WORK"
chmod 777 "$WORK/cache" "$WORK/tmp"
cat > "$WORK/nginx.conf" <<CONF
worker_processes $WORKERS;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err warn;
events { worker_connections 4096; }
http {
    access_log off;
    proxy_temp_path $WORK/tmp;
    client_body_temp_path $WORK/tmp;
    fastcgi_temp_path $WORK/tmp;
    uwsgi_temp_path $WORK/tmp;
    scgi_temp_path $WORK/tmp;
    proxy_cache_path $WORK/cache keys_zone=bench:10m max_size=1g;
    keepalive_requests 1000000;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 16; }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            add_header Cache-Status \$upstream_cache_status;
        }
    }
}
CONF
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" 2>> "$WORK/nginx.err"
i=0; while [ ! -s "$WORK/nginx.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done

# Returns "requests_per_second p99_ms" for one wrk run.
measure() {
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$1")
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}')
    errors=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
    [ -n "$errors" ] && echo "  warning: $1: $errors" >&2
    echo "$rps $p99"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  wrk: $THREADS threads, $CONNECTIONS connections, ${DURATION}s  workers: $WORKERS"
printf "%-8s %-7s %12s %10s\n" size proxy "requests/s" "p99 ms"
for size in 1024 262144; do
    path="/bench-$size?size=$size"
    # Warm both caches (a miss, then verify a hit).
    curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT$path"
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT$path"
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT$path"
    lh=$(curl -s -D - -o /dev/null "http://127.0.0.1:$LARDER_PORT$path" | tr -d '\r' | awk -F': ' 'tolower($1)=="cache-status" {print $2}')
    nh=$(curl -s -D - -o /dev/null "http://127.0.0.1:$NGINX_PORT$path" | tr -d '\r' | awk -F': ' 'tolower($1)=="cache-status" {print $2}')
    echo "  cache check: larder '$lh', nginx '$nh'" >&2
    set -- $(measure "http://127.0.0.1:$LARDER_PORT$path"); l_rps=$1; l_p99=$2
    set -- $(measure "http://127.0.0.1:$NGINX_PORT$path"); n_rps=$1; n_p99=$2
    label=$([ "$size" -eq 1024 ] && echo 1KiB || echo 256KiB)
    printf "%-8s %-7s %12s %10s\n" "$label" larder "$l_rps" "$l_p99"
    printf "%-8s %-7s %12s %10s\n" "$label" nginx "$n_rps" "$n_p99"
    echo "$label larder/nginx: $(awk -v a="$l_rps" -v b="$n_rps" 'BEGIN {printf "%.2f", a/b}')"
done
