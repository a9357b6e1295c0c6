# Shared by the benchmark scripts (sourced, not run). Installs wrk and nginx
# when missing, builds Larder in release mode, makes a work directory that
# is removed on exit (KEEP_WORK=1 keeps it), and starts the test origin.
set -eu
cd "$(dirname "$0")/.."

need=""
command -v wrk >/dev/null 2>&1 || need="$need wrk"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need="$need nginx-light"
if [ -n "$need" ]; then
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $need >&2
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
.ci/install-deps
swift build -c release --static-swift-stdlib --product larder >&2
# LARDER_BIN: another build of Larder to measure (an older commit's, for an A/B in one session).
LARDER=${LARDER_BIN:-.build/release/larder}

WORK=$(mktemp -d /tmp/larder-bench.XXXXXX)
# nginx workers run as an unprivileged user when started as root.
chmod 755 "$WORK"
mkdir -p "$WORK/tmp"
chmod 777 "$WORK/tmp"
PIDS=""
cleanup() {
    for pid in $PIDS; do kill "$pid" 2>/dev/null || true; done
    for pidfile in "$WORK"/*.pid; do [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true; done
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# The test suite's python origin (responses carry max-age=60), unless the
# script brings its own (ORIGIN=none before sourcing this file).
if [ "${ORIGIN:-python}" = python ]; then
    python3 Tests/EndToEndTests/origin.py 0 > "$WORK/origin.out" 2>&1 &
    PIDS="$PIDS $!"
    i=0; while ! grep -q PORT "$WORK/origin.out" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
    ORIGIN_PORT=$(awk '/PORT/ {print $2}' "$WORK/origin.out")
fi

# Starts Larder in front of the origin with extra flags; sets LARDER_PID
# and LARDER_PORT (read from its "listening on" line). LARDER_LAUNCH
# prefixes the command (taskset ...).
start_larder() {
    ${LARDER_LAUNCH:-} "$LARDER" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ORIGIN_PORT" --workers "${WORKERS:-2}" \
        "$@" 2> "$WORK/larder.err" &
    LARDER_PID=$!
    i=0; while ! grep -qs "listening on" "$WORK/larder.err" && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
    LARDER_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/larder.err")
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# An nginx origin (one worker) serving the files of $WORK/www with the
# given location blocks; sets ORIGIN_PORT. Fast enough not to be the limit
# on misses, unlike the python origin.
start_static_origin() {
    chmod -R a+rX "$WORK/www"
    ORIGIN_PORT=$(free_port)
    NGINX_WORKERS=1 start_nginx_named origin "
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        root $WORK/www;
        $1
    }"
}

# How every nginx location here reaches the origin: HTTP/1.1 keep-alive.
NGINX_PROXY='proxy_pass http://origin; proxy_http_version 1.1; proxy_set_header Connection "";'

# Starts nginx with the given http-block body (temp paths are set here).
start_nginx() { start_nginx_named nginx "$1"; }

# The same for a second instance: start_nginx_named NAME BODY (its files
# are $WORK/NAME.*; NGINX_WORKERS overrides the worker count; LAUNCH is a
# command prefix such as "taskset -c 0").
start_nginx_named() {
    cat > "$WORK/$1.conf" <<CONF
worker_processes ${NGINX_WORKERS:-${WORKERS:-2}};
pid $WORK/$1.pid;
error_log $WORK/$1.err warn;
events { worker_connections 4096; }
http {
    access_log off;
    proxy_temp_path $WORK/tmp; client_body_temp_path $WORK/tmp; fastcgi_temp_path $WORK/tmp;
    uwsgi_temp_path $WORK/tmp; scgi_temp_path $WORK/tmp;
    keepalive_requests 1000000;
    upstream origin { server 127.0.0.1:${ORIGIN_PORT:-1}; keepalive 16; }
$2
}
CONF
    # shellcheck disable=SC2086
    ${LAUNCH:-} "$NGINX" -c "$WORK/$1.conf" -p "$WORK" 2>> "$WORK/$1.err"
    i=0; while [ ! -s "$WORK/$1.pid" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
}

# nginx proxy_cache caching in $WORK/nginx-cache, X-Cache telling a HIT
# from a MISS; sets NGINX_PORT.
start_caching_nginx() {
    NGINX_PORT=$(free_port)
    mkdir -p "$WORK/nginx-cache"
    chmod 777 "$WORK/nginx-cache"
    start_nginx "
    proxy_cache_path $WORK/nginx-cache levels=1:2 keys_zone=bench:64m max_size=4g;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache bench;
            add_header X-Cache \$upstream_cache_status always;
        }
    }"
}

# Prints "requests_per_second p99_ms" for one wrk run: measure URL [lua-script].
measure() {
    if [ $# -gt 1 ]; then script="-s $2"; else script=""; fi
    # shellcheck disable=SC2086
    out=$(wrk -t"${THREADS:-2}" -c"${CONNECTIONS:-64}" -d"${DURATION:-10}s" --latency $script "$1")
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}')
    errors=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
    [ -n "$errors" ] && echo "  warning: $1: $errors" >&2
    echo "$rps $p99"
}

# Writes the wrk script for misses to $1: every request a new URL under
# /1k/ (each run and thread its own prefix).
# wrk scripts over the keys /1k/key-1 .. /1k/key-10000: at random (the
# first argument's file) and in order, round after round (the second's).
write_keys_scripts() {
    cat > "$1" <<'LUA'
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
request = function() return wrk.format(nil, "/1k/key-" .. math.random(1, 10000)) end
LUA
    cat > "$2" <<'LUA'
local n = 0
request = function() n = n % 10000 + 1; return wrk.format(nil, "/1k/key-" .. n) end
LUA
}

write_misses_script() {
    cat > "$1" <<'LUA'
local counter, prefix = 0, nil
setup = function(thread) thread:set("tid", tostring(math.random(1, 1e9))) end
init = function() prefix = "/1k/miss-" .. os.time() .. "-" .. tid .. "-" end
request = function() counter = counter + 1; return wrk.format(nil, prefix .. counter) end
LUA
}
