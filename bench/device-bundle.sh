#!/bin/sh
# Packs a release build of Larder for a many-core machine lent for scaling
# runs, with the bundling script that machine's tooling provides
# (MAKE_BUNDLE=path/to/make-bundle.sh), plus libcurl: make-bundle.sh packs
# the libraries `ldd` lists, and Larder opens libcurl at run time (dlopen),
# so it and its libraries are added here (scale.py puts the bundle's lib/
# on LD_LIBRARY_PATH, where dlopen looks too).
#
#   bench/device-bundle.sh [out.tar.xz]     (default .devcarry/bundle.tar.xz)
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-.devcarry/bundle.tar.xz}
MAKE_BUNDLE=${MAKE_BUNDLE:?set MAKE_BUNDLE to the make-bundle.sh of the device tooling}
swift build -c release --static-swift-stdlib --product larder >&2
mkdir -p "$(dirname "$OUT")"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$MAKE_BUNDLE" .build/release/larder "$WORK/plain.tar.xz" >&2
tar -xJf "$WORK/plain.tar.xz" -C "$WORK"
CURL=$(ldconfig -p | awk '/libcurl\.so\.4 .*x86-64/ {print $NF; exit}')
[ -n "$CURL" ] || { echo "libcurl.so.4 not found (apt-get install libcurl4)" >&2; exit 1; }
{ echo "$CURL"; ldd "$CURL" | awk '$3 ~ /^\// {print $3}'; } |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so' |
    while read -r lib; do cp -L "$lib" "$WORK/bundle/lib/"; done
tar -C "$WORK" -cf - bundle | xz -T0 -6 > "$OUT"
ls -la "$OUT"
