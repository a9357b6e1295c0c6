#!/bin/sh
# HTTP/3 to clients: hot 1 KiB hits over HTTP/3 from Larder against Caddy's
# HTTP/3 file server (Debian's caddy, loopback, its internal CA), the same
# client for both, side by side in one run; and Larder's CPU per request
# over HTTP/3 against its own over HTTP/2 (TLS) in the same run.
#
#   bench/h3.sh [requests_per_client]
#
# The client is ngtcp2's gtlsclient (Debian's ngtcp2-client): one QUIC
# connection per client process, its requests as streams (at most 100 at
# once, as both servers allow), CLIENTS processes at once (default: the
# cores left after the server's). It is a test client, not a load tool:
# its own CPU per request is high, so with two cores it is the limit and
# the requests-per-second column compares clients as much as servers. The
# CPU per request of each server (user + system of its processes over the
# run) is the figure that compares them. Each server gets one core
# (taskset -c 0), Larder one worker. Not a test: nothing here asserts a timing.
REQUESTS=${1:-5000}
RUNS=${RUNS:-3}
WORKERS=1
ORIGIN=none
need=""
command -v gtlsclient >/dev/null 2>&1 || need="$need ngtcp2-client"
command -v caddy >/dev/null 2>&1 || need="$need caddy"
command -v h2load >/dev/null 2>&1 || need="$need nghttp2-client"
if [ -n "$need" ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $need >&2
fi
. "$(dirname "$0")/common.sh"
CORES=$(nproc)
SERVER_CPU="taskset -c 0"; CLIENT_CPU="taskset -c 1-$((CORES - 1))"
[ "$CORES" -gt 1 ] || { SERVER_CPU=""; CLIENT_CPU=""; }
CLIENTS=${CLIENTS:-$((CORES > 1 ? CORES - 1 : 1))}

mkdir -p "$WORK/www/1k"
head -c 1024 /dev/urandom > "$WORK/www/1k/x"
start_static_origin "
        location ~ ^/(1k)/ {
            add_header Cache-Control \"max-age=3600\";
            try_files /1k/x =404;
        }"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" \
    -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null

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
http3 = true
certificate = "$WORK/cert.pem"
key = "$WORK/key.pem"
TOML
$SERVER_CPU "$LARDER" serve --config "$WORK/larder.toml" 2> "$WORK/larder.err" &
LARDER_PID=$!
PIDS="$PIDS $LARDER_PID"
i=0; while ! grep -qs "listening on" "$WORK/larder.err" && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
LARDER_TLS=$(sed -n 's/.*, 127.0.0.1:\([0-9]*\) (TLS, HTTP\/3).*/\1/p' "$WORK/larder.err")

# Caddy: the same file over HTTPS with HTTP/3 (its default), its own CA.
CADDY_PORT=$(free_port)
mkdir -p "$WORK/caddy-data" "$WORK/caddy-config"
cat > "$WORK/Caddyfile" <<CADDY
{
    admin off
    auto_https disable_redirects
    skip_install_trust
    log {
        level ERROR
    }
}
# (By name: Caddy's internal CA refuses a handshake whose SNI is an IP address.)
https://localhost:$CADDY_PORT {
    bind 127.0.0.1
    tls internal
    root * $WORK/www
    header Cache-Control "max-age=3600"
    file_server
}
CADDY
XDG_DATA_HOME="$WORK/caddy-data" XDG_CONFIG_HOME="$WORK/caddy-config" HOME="$WORK" \
    $SERVER_CPU caddy run --config "$WORK/Caddyfile" --adapter caddyfile > "$WORK/caddy.log" 2>&1 &
CADDY_PID=$!
PIDS="$PIDS $CADDY_PID"
i=0; while ! curl -sk --resolve "localhost:$CADDY_PORT:127.0.0.1" "https://localhost:$CADDY_PORT/1k/x" -o /dev/null && [ $i -lt 500 ]; do
    sleep 0.02; i=$((i+1))
done
curl -sk "https://127.0.0.1:$LARDER_TLS/1k/x" -o /dev/null  # stored before measuring

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {  # user+system clock ticks of a server's processes
    case $1 in larder) pid=$LARDER_PID ;; caddy) pid=$CADDY_PID ;; esac
    awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0
}

now_ms() { date +%s%3N; }

h3_run() {  # host port: CLIENTS gtlsclients of REQUESTS streams each; prints requests per second
    start=$(now_ms)
    for _ in $(seq 1 "$CLIENTS"); do
        $CLIENT_CPU gtlsclient -q --exit-on-all-streams-close --max-streams-bidi 100 -n "$REQUESTS" \
            "$1" "$2" "https://$1:$2/1k/x" > /dev/null 2>&1 &
    done
    wait
    awk -v n=$((CLIENTS * REQUESTS)) -v ms=$(($(now_ms) - start)) 'BEGIN {printf "%.1f\n", n / (ms / 1000)}'
}

measure() {  # server protocol: prints "per_second cpu_us_per_request"
    before=$(cpu_ticks "$1")
    case $2 in
        h3) if [ "$1" = larder ]; then rate=$(h3_run 127.0.0.1 "$LARDER_TLS"); else rate=$(h3_run localhost "$CADDY_PORT"); fi
            n=$((CLIENTS * REQUESTS)) ;;
        h2) rate=$($CLIENT_CPU h2load -n $((CLIENTS * REQUESTS)) -c "$CLIENTS" -m 100 "https://127.0.0.1:$LARDER_TLS/1k/x" \
                   | awk '/finished in/ {for (i = 1; i <= NF; i++) if ($i == "req/s,") {print $(i-1); exit}}')
            n=$((CLIENTS * REQUESTS)) ;;
    esac
    after=$(cpu_ticks "$1")
    awk -v r="$rate" -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$n" 'BEGIN {printf "%s %.1f\n", r, t / hz * 1e6 / n}'
}

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

: > "$WORK/larder.h3"; : > "$WORK/caddy.h3"; : > "$WORK/larder.h2"
for _ in $(seq 1 "$RUNS"); do
    measure larder h3 >> "$WORK/larder.h3"
    measure caddy h3 >> "$WORK/caddy.h3"
    measure larder h2 >> "$WORK/larder.h2"
done
l=$(awk '{print $1}' "$WORK/larder.h3" | median); c=$(awk '{print $1}' "$WORK/caddy.h3" | median)
lc=$(awk '{print $2}' "$WORK/larder.h3" | median); cc=$(awk '{print $2}' "$WORK/caddy.h3" | median)
l2=$(awk '{print $1}' "$WORK/larder.h2" | median); l2c=$(awk '{print $2}' "$WORK/larder.h2" | median)
printf '%-22s %12s %14s\n' "server, protocol" "requests/s" "CPU us/req"
printf '%-22s %12s %14s\n' "larder, HTTP/3" "$l" "$lc" "caddy, HTTP/3" "$c" "$cc" "larder, HTTP/2 (TLS)" "$l2" "$l2c"
awk -v l="$lc" -v c="$cc" -v h2="$l2c" 'BEGIN {
    if (l > 0) printf "caddy/larder CPU per request over HTTP/3: %.2f\n", c / l
    if (h2 > 0) printf "larder HTTP/3 / HTTP/2 CPU per request: %.2f\n", l / h2 }'
