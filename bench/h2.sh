#!/bin/sh
# HTTP/2 and TLS to clients: Larder against nginx (`http2 on`, its ssl_*),
# side by side in one run, one worker each pinned to CPU 0, the client
# (h2load, openssl s_time) on the other cores.
#
#   bench/h2.sh [seconds_per_run]
#
# Workloads (hot 1 KiB hits, stored before measuring):
#   h2c      h2load -c 64 -m 10 over cleartext HTTP/2 (prior knowledge)
#   h2-tls   the same over TLS (ALPN h2; TLS 1.3, P-256 certificate)
#   h1-tls   h2load --h1 -c 64: HTTP/1.1 keep-alive over TLS
#   handshakes  openssl s_time -new: full TLS handshakes (a new session
#               each) per second, one request each
# Each workload runs RUNS times (default 3), the servers interleaved; the
# table shows medians of requests (or handshakes) per second and the ratio
# Larder/nginx, and each server's CPU time per request (user + system of
# its processes over the run): with two cores the client may be the
# limit, and the CPU figure still compares the servers. Not a test: nothing here asserts a timing.
DURATION=${1:-5}
RUNS=${RUNS:-3}
WORKERS=1
ORIGIN=none
command -v h2load >/dev/null 2>&1 || {
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q nghttp2-client >&2
}
. "$(dirname "$0")/common.sh"
CORES=$(nproc)
SERVER_CPU="taskset -c 0"; CLIENT_CPU="taskset -c 1-$((CORES - 1))"
[ "$CORES" -gt 1 ] || { SERVER_CPU=""; CLIENT_CPU=""; }
THREADS=$((CORES > 1 ? CORES - 1 : 1)); [ "$THREADS" -gt 8 ] && THREADS=8

mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/1k"
start_static_origin "
        location ~ ^/(1k)/ {
            add_header Cache-Control \"max-age=3600\";
            try_files /\$1 =404;
        }"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" \
    -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null
chmod 644 "$WORK/key.pem"  # nginx's workers read it as another user

# Larder: a plain listener (h2c) and a TLS one (h2 and http/1.1 by ALPN).
cat > "$WORK/larder.toml" <<TOML
upstream = "http://127.0.0.1:$ORIGIN_PORT"
memory_limit = "256MiB"
workers = 1
admin_listen = "none"
log_level = "error"
[[listen]]
address = "127.0.0.1:0"
[[listen]]
address = "127.0.0.1:0"
tls = true
certificate = "$WORK/cert.pem"
key = "$WORK/key.pem"
TOML
$SERVER_CPU "$LARDER" serve --config "$WORK/larder.toml" 2> "$WORK/larder.err" &
LARDER_PID=$!
PIDS="$PIDS $LARDER_PID"
i=0; while ! grep -qs "listening on" "$WORK/larder.err" && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
LARDER_H2C=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\),.*/\1/p' "$WORK/larder.err")
LARDER_TLS=$(sed -n 's/.*, 127.0.0.1:\([0-9]*\) (TLS).*/\1/p' "$WORK/larder.err")

# nginx proxy_cache with http2 on a plain and a TLS listener, as a fair
# user would set it up (session cache, TLS 1.2 and 1.3).
NGINX_H2C=$(free_port); NGINX_TLS=$(free_port)
mkdir -p "$WORK/cache"; chmod 777 "$WORK/cache"
LAUNCH="$SERVER_CPU" NGINX_WORKERS=1 start_nginx "
    proxy_cache_path $WORK/cache levels=1:2 keys_zone=bench:64m max_size=1g;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    http2_max_concurrent_streams 128;
    server {
        listen 127.0.0.1:$NGINX_H2C http2;
        listen 127.0.0.1:$NGINX_TLS ssl http2;
        location / { $NGINX_PROXY proxy_cache bench; }
    }"
for url in "http://127.0.0.1:$LARDER_H2C/1k/x" "http://127.0.0.1:$NGINX_H2C/1k/x"; do
    h2load -n 10 -c 1 "$url" > /dev/null
done

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {  # user+system clock ticks of a server's processes
    case $1 in
        larder) pids=$LARDER_PID ;;
        nginx) master=$(cat "$WORK/nginx.pid"); pids="$master $(pgrep -P "$master" | tr '\n' ' ')" ;;
    esac
    total=0
    for pid in $pids; do total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0))); done
    echo "$total"
}

measure() {  # server workload: prints "per_second cpu_us_per_request"
    before=$(cpu_ticks "$1")
    rate=$(run "$1" "$2" | tr -d ',')
    after=$(cpu_ticks "$1")
    awk -v r="$rate" -v t=$((after - before)) -v hz="$CLK_TCK" -v d="$DURATION" \
        'BEGIN {n = r * d; printf "%s %.1f\n", r, (n > 0 ? t / hz * 1e6 / n : 0)}'
}

run() {  # server workload: prints requests (or handshakes) per second
    case $1 in larder) h2c=$LARDER_H2C; tls=$LARDER_TLS ;; nginx) h2c=$NGINX_H2C; tls=$NGINX_TLS ;; esac
    case $2 in
        h2c) $CLIENT_CPU h2load -D "$DURATION" -c 64 -m 10 -t "$THREADS" "http://127.0.0.1:$h2c/1k/x" ;;
        h2-tls) $CLIENT_CPU h2load -D "$DURATION" -c 64 -m 10 -t "$THREADS" "https://127.0.0.1:$tls/1k/x" ;;
        h1-tls) $CLIENT_CPU h2load --h1 -D "$DURATION" -c 64 -t "$THREADS" "https://127.0.0.1:$tls/1k/x" ;;
        handshakes)
            # One s_time per client core, each making new sessions for DURATION seconds.
            for n in $(seq 1 "$THREADS"); do
                $CLIENT_CPU openssl s_time -connect "127.0.0.1:$tls" -new -time "$DURATION" -www /1k/x 2>/dev/null \
                    | awk -v d="$DURATION" '/real seconds/ {print $1 / d}' > "$WORK/stime.$n" &
            done
            wait
            cat "$WORK"/stime.* | awk '{s += $1} END {printf "finished in, %.1f req/s\n", s}'
            rm -f "$WORK"/stime.*
            return ;;
    esac | awk '/finished in/ {for (i = 1; i <= NF; i++) if ($i == "req/s," || $i == "req/s") {print $(i-1); exit}}'
}

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

printf '%-11s %12s %12s %7s %14s %14s\n' workload "larder /s" "nginx /s" ratio "larder us/req" "nginx us/req"
for workload in ${WORKLOADS:-h2c h2-tls h1-tls handshakes}; do
    : > "$WORK/larder.runs"; : > "$WORK/nginx.runs"
    for _ in $(seq 1 "$RUNS"); do
        measure larder "$workload" >> "$WORK/larder.runs"
        measure nginx "$workload" >> "$WORK/nginx.runs"
    done
    l=$(awk '{print $1}' "$WORK/larder.runs" | median); n=$(awk '{print $1}' "$WORK/nginx.runs" | median)
    lc=$(awk '{print $2}' "$WORK/larder.runs" | median); nc=$(awk '{print $2}' "$WORK/nginx.runs" | median)
    printf '%-11s %12s %12s %7s %14s %14s\n' "$workload" "$l" "$n" \
        "$(awk -v l="$l" -v n="$n" 'BEGIN {if (n > 0) printf "%.2f", l / n}')" "$lc" "$nc"
done
