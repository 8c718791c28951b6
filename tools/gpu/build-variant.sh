#!/usr/bin/env bash
# Builds one program of a configured CMake (Ninja) build again with extra compile definitions, into
# a folder of its own, without touching the build's own objects: variants of a library change
# (an experiment behind a compile definition) can then be carried to a GPU machine and measured in
# one visit.
# Usage: tools/gpu/build-variant.sh BUILD_DIR TARGET OUT_DIR "-DNAME=VALUE ..."
# Example: tools/gpu/build-variant.sh build parallel_do_bench variants/mine "-DMY_SWITCH=1"
# Environment: SKIP_NINJA=1 skips bringing the build up to date first (see below).
set -euo pipefail
build="$(cd "$1" && pwd)"; target="$2"; out="$3"; definitions="$4"
mkdir -p "$out"; out="$(cd "$out" && pwd)"
cd "$build"
# Its libraries, and the command lines below, up to date (SKIP_NINJA=1: they are, and the target
# itself need not be rebuilt first, e.g. when only a header an experiment switches on has changed).
[ "${SKIP_NINJA:-0}" = 1 ] || ninja "bin/$target" >/dev/null
compile="$(ninja -t commands "bin/$target" | grep -- ' -c ' | grep -F -- "CMakeFiles/$target.dir/" | tail -1)"  # its own source, not a library's
link="$(ninja -t commands "bin/$target" | tail -1)"
[ -n "$compile" ] || { echo "build-variant: no compile command for $target in $build" >&2; exit 2; }
object="$(sed -E 's/.* -o ([^ ]+)$/\1/' <<<"$compile")"
compile="$(sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -o [^ ]+\$# -o $out/$target.o#" <<<"${compile/ -c / $definitions -c }")"
link="$(sed -E "s# -o bin/$target # -o $out/$target #" <<<"${link/$object/$out/$target.o}")"
eval "$compile"
eval "$link"
rm -f "$out/$target.o"
echo "$out/$target ($definitions)"
