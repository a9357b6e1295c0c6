#!/bin/sh
# What `compress` saves: stores ENTRIES different 10 KiB JSON responses
# (bench/json-body.py, every request a new URL) in Larder's memory tier,
# once as they come and once with compress = ["application/json"], and
# reports per entry the bytes charged against memory_limit and the growth
# of the process's resident memory. CPU per hit with and without it:
# bench/instructions.sh json-plain | json-gzip | json-decoded.
#
#   bench/compress.sh [entries]
#
# Not a test: nothing here asserts a figure.
ENTRIES=${1:-20000}
WORKERS=${WORKERS:-2}
ORIGIN=none
. "$(dirname "$0")/common.sh"

mkdir -p "$WORK/www"
python3 bench/json-body.py 10240 > "$WORK/www/api.json"
start_static_origin "location /j/ { types { application/json json; } add_header Cache-Control \"max-age=86400\"; try_files /api.json =404; }"
echo 'compress = ["application/json"]' > "$WORK/compress.toml"
cat > "$WORK/fill.lua" <<'LUA'
local counter, prefix, threads = 0, nil, 0
setup = function(thread) threads = threads + 1; thread:set("tid", tostring(threads)) end
init = function(args) prefix = "/j/" .. (args[1] or "0") .. "-" .. tid .. "-" end
request = function() counter = counter + 1; return wrk.format(nil, prefix .. counter) end
LUA
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$LARDER_PID/status"; }
stats() { curl -s "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c 'import json,sys; d=json.load(sys.stdin)["memory"]; print(d["objects"], d["bytes"])'; }

echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, workers $WORKERS, body $(wc -c < "$WORK/www/api.json") bytes"
for mode in plain compress; do
    ADMIN_PORT=$(free_port)
    config=""
    [ $mode = compress ] && config="--config $WORK/compress.toml"
    # shellcheck disable=SC2086
    start_larder --memory-limit 8GiB --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level error $config
    wrk -t2 -c16 -d2s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" -- warm > /dev/null
    set -- $(stats); base_objects=$1; base_bytes=$2; base_rss=$(rss)
    round=0
    while [ "$round" -lt 60 ]; do
        set -- $(stats)
        [ "$1" -ge "$((base_objects + ENTRIES))" ] && break
        round=$((round + 1))
        wrk -t2 -c32 -d5s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" -- "$round" > /dev/null
    done
    set -- $(stats); n=$(( $1 - base_objects ))
    curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/j/probe"
    size=$(curl -s -H 'Accept-Encoding: gzip' -o /dev/null -w '%{size_download}' "http://127.0.0.1:$LARDER_PORT/j/probe")
    echo "$mode: $n entries; charged per entry $(( ($2 - base_bytes) / n )) bytes;" \
         "RSS per entry $(( ($(rss) - base_rss) / n )) bytes; a gzip-accepting client receives $size body bytes"
    kill "$LARDER_PID"; wait "$LARDER_PID" 2>/dev/null || true
done
