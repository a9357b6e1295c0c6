#!/bin/sh
# Scaling: bench/compare.sh with 1, 2, 4 and 8 workers (COUNTS overrides),
# every proxy given the same worker count and the same cores (CPUs
# 0..N-1; wrk on the cores after them). Meant for a many-core machine
# (bench/device-bundle.sh packs a build to carry there); on
# fewer cores than N + 1 nothing is pinned and the figures mean little.
#
#   bench/scaling.sh [seconds_per_run] [connections]
#
# WORKLOADS defaults to the memory and disk hit workloads. Not a test.
set -e
for n in ${COUNTS:-1 2 4 8}; do
    WORKERS=$n WORKLOADS=${WORKLOADS:-hot-1k random-10k disk-10k} "$(dirname "$0")/compare.sh" "${1:-5}" "${2:-64}"
done
