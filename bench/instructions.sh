#!/bin/sh
# User-space instructions per request, counted by valgrind's callgrind:
# unlike timings on a shared VM (±20 % between runs) the count moves only
# when the code does, so it shows what a small change bought.
#
#   bench/instructions.sh [misses|hot-1k|disk-hits|json-plain|json-gzip|json-decoded|post-query|query-method] [seconds]
#
# disk-hits: 1,000 keys of 1 KiB, a memory tier of 64 KiB (about 40 of
# them) and a disk tier: nearly every hit is read from its file.
# json-*: hits on one 10 KiB JSON response: stored as it came (json-plain),
# stored with compress = ["application/json"] and asked for by a client
# that takes gzip (json-gzip) or by one that does not (json-decoded: the
# stored gzip is decoded on every hit). CODEC=zstd|br stores the copy in that
# coding (compress_codec; json-gzip's client then asks for it), JSON_BYTES
# sets the body's size (10240 by default; 1048576 for the 1 MiB figure).
# post-query, query-method: hits on one 1,000-byte answer to a GraphQL
# query sent as a POST under a `cache_post` route, or as a QUERY (RFC
# 10008) under the same route: what keying by the body costs each.
#
# Counts everything in the Larder process (Larder, libcurl, libc, the Swift
# runtime), not the kernel, thread by thread: the worker's thread (the
# request path) and the others (the admin thread's work for a follower,
# the disk writer). ROUTE=1 configures one [[route]] that matches nothing;
# EDGE=none, all, keyed or limited one over the hot key (edge controls: none,
# one rule of each kind, key_cookies alone, or a rate limit that refuses all
# but the first request).
# Larder runs one worker under callgrind (about 50x
# slower); wrk offers 8 connections. TOP=n prints each busy thread's n
# costliest functions (self). FOLLOW=1 attaches one `larder log --follow` reader
# (its cost on the hot path). ADMIN_ON=1 keeps the admin listener on (its
# thread's work each second, and the requests sampled for it, count). Needs valgrind. Not a test: nothing here
# asserts a figure.
WORKLOAD=${1:-misses}
SECONDS_TO_RUN=${2:-8}
ORIGIN=none
. "$(dirname "$0")/common.sh"
command -v valgrind >/dev/null 2>&1 || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
# valgrind 3.19 cannot read the DWARF 5 debug info Swift 6 writes: count on
# a copy without it (function names come from the symbol table).
strip -g -o "$WORK/larder" "$LARDER"
LARDER="$WORK/larder"
mkdir -p "$WORK/www"
head -c 1024 /dev/urandom > "$WORK/www/1k"
python3 bench/json-body.py "${JSON_BYTES:-10240}" > "$WORK/www/api.json"
start_static_origin "location ~ ^/1k/ { add_header Cache-Control \"max-age=3600\"; try_files /1k =404; }
        location ~ ^/j/ { types { application/json json; } add_header Cache-Control \"max-age=3600\"; try_files /api.json =404; }
        location ~ ^/q/ { add_header Cache-Control \"max-age=3600\"; return 200 \"$(printf '%01000d' 0 | tr 0 q)\"; }"
if [ "$WORKLOAD" = disk-hits ]; then
    TIERS="--memory-limit 64KiB --cache-dir $WORK/cache"
else
    TIERS="--memory-limit 2GiB"
fi
case $WORKLOAD in
    json-gzip|json-decoded)
        printf 'compress = ["application/json"]\ncompress_codec = "%s"\n' "${CODEC:-gzip}" > "$WORK/compress.toml"
        TIERS="$TIERS --config $WORK/compress.toml" ;;
    post-query|query-method)
        printf '[[route]]\nprefix = "/q/"\ncache_post = true\n' > "$WORK/query.toml"
        TIERS="$TIERS --config $WORK/query.toml" ;;
    *)
        # EDGE=none|all|keyed|limited: one [[route]] over the hot key, without
        # edge rules, with one rule of each kind, with key_cookies (a variant
        # field, as a Vary is), or with a rate limit every request but the
        # first is over (what a flood of 429s costs).
        if [ -n "${EDGE:-}" ]; then
            printf '[[route]]\nprefix = "/1k/"\n' > "$WORK/edge.toml"
            case $EDGE in
                all) cat >> "$WORK/edge.toml" <<'RULES' ;;
request_headers = { set = { "X-Env" = "prod" } }
response_headers = { set = { "Strict-Transport-Security" = "max-age=63072000" }, remove = ["Server"] }
allow = ["127.0.0.0/8"]
deny = ["127.0.0.2/32"]
rate_limit = { requests = 1000000, per = "1s", burst = 1000000 }
strip_cookies = true
RULES
                keyed) printf 'key_cookies = ["lang"]\n' >> "$WORK/edge.toml" ;;
                limited) printf 'rate_limit = { requests = 1, per = "1d" }\n' >> "$WORK/edge.toml" ;;
            esac
            TIERS="$TIERS --config $WORK/edge.toml"
        # ROUTE=1: one [[route]] that matches nothing (what routes cost a hit).
        elif [ -n "${ROUTE:-}" ]; then
            printf '[[route]]\nprefix = "/nothing-here/"\ndefault_ttl = "1m"\nmemory_ttl = "1h"\n' > "$WORK/route.toml"
            TIERS="$TIERS --config $WORK/route.toml"
        fi ;;
esac
ACCEPT=""
[ "$WORKLOAD" = json-gzip ] && ACCEPT="Accept-Encoding: ${CODEC:-gzip}"
ADMIN="--admin-listen none"
if [ -n "${FOLLOW:-}${ADMIN_ON:-}" ]; then ADMIN_PORT=$(free_port); ADMIN="--admin-listen 127.0.0.1:$ADMIN_PORT"; fi
# shellcheck disable=SC2086
LARDER_LAUNCH="valgrind --tool=callgrind --separate-threads=yes --instr-atstart=no --callgrind-out-file=$WORK/callgrind.out" WORKERS=1 \
    start_larder $TIERS $ADMIN --log-level error
PIDS="$PIDS $LARDER_PID"
# Starting under valgrind takes longer than start_larder waits.
i=0; while ! grep -qs "listening on" "$WORK/larder.err" && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
LARDER_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/larder.err")
[ -n "$LARDER_PORT" ] || { echo "Larder did not start under valgrind:" >&2; tail -5 "$WORK/larder.err" >&2; exit 1; }

if [ -n "${FOLLOW:-}" ]; then
    "$WORK/larder" log --follow --admin "http://127.0.0.1:$ADMIN_PORT" > "$WORK/follow.out" 2>&1 &
    PIDS="$PIDS $!"
fi
write_misses_script "$WORK/misses.lua"
case $WORKLOAD in
    misses) target="/"; script="-s $WORK/misses.lua" ;;
    hot-1k) target="/1k/hot"; script=""; curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT$target" ;;
    json-*) target="/j/hot"; script=""; curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT$target" ;;
    post-query|query-method)
        method=POST; [ "$WORKLOAD" = query-method ] && method=QUERY
        target="/q/hot"; script=""
        curl -s -o /dev/null -X "$method" -H "Content-Type: application/json" \
            --data-binary '{"query":"{ user(id: 1) { name } }"}' "http://127.0.0.1:$LARDER_PORT$target" ;;
    disk-hits)
        target="/"; script="-s $WORK/keys.lua"
        # Every key stored first (in order, until all are), then random ones.
        printf 'local i = 0\nrequest = function() i = i %% 1000 + 1; return wrk.format(nil, "/1k/k-" .. i) end\n' > "$WORK/fill.lua"
        printf 'request = function() return wrk.format(nil, "/1k/k-" .. math.random(1, 1000)) end\n' > "$WORK/keys.lua"
        wrk -t1 -c1 -d10s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" > /dev/null ;;
    *) echo "unknown workload $WORKLOAD" >&2; exit 64 ;;
esac
# wrk for all but the bodied queries: its request parser knows no QUERY
# method, so both of those go through one small client of their own.
load() {
    # shellcheck disable=SC2086
    case $WORKLOAD in
        post-query|query-method) python3 bench/query-load.py "$method" "http://127.0.0.1:$LARDER_PORT$target" "${1%s}" ;;
        *) wrk -t1 -c8 -d"$1" $script ${ACCEPT:+-H "$ACCEPT"} "http://127.0.0.1:$LARDER_PORT$target" ;;
    esac
}
# Warm up uncounted (first-time paths, pools, table growth), then count.
load 3s > /dev/null
callgrind_control -i on "$LARDER_PID" > /dev/null
load "${SECONDS_TO_RUN}s" > "$WORK/wrk.txt"
callgrind_control -i off "$LARDER_PID" > /dev/null
callgrind_control -d "$LARDER_PID" > /dev/null
requests=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
# One profile per thread (--separate-threads): the busiest is the worker's.
for profile in "$WORK"/callgrind.out.1-*; do
    echo "$(callgrind_annotate "$profile" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}') $profile"
done | sort -rn > "$WORK/threads.txt"
total=$(awk '{s += $1} END {printf "%.0f", s}' "$WORK/threads.txt")
worker=$(awk 'NR == 1 {print $1}' "$WORK/threads.txt")
echo "$WORKLOAD: $requests requests counted, $((total / requests)) instructions per request" \
    "(the worker's thread $((worker / requests)), other threads $(((total - worker) / requests)))"
if [ -n "${TOP:-}" ]; then
    demangle=$(command -v swift-demangle || echo cat)
    while read -r count profile; do
        case $count in ''|*[!0-9]*) continue ;; esac  # a thread that ran nothing counted
        [ $((count / requests)) -ge 10 ] || continue
        echo "thread $(echo "$profile" | sed 's/.*-0*//'): $((count / requests)) per request"
        callgrind_annotate "$profile" 2> /dev/null | sed -n '/file:function/,$p' | sed -n "3,$((TOP + 2))p" | $demangle --simplified 2> /dev/null \
            | awk -v n="$requests" '{c=$1; gsub(",", "", c); sub(/^ *[0-9,]+ +\( *[0-9.]+%\) +/, ""); printf "%8d  %s\n", c / n, substr($0, 1, 150)}'
    done < "$WORK/threads.txt"
fi
