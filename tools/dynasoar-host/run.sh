#!/usr/bin/env bash
# A DynaSOAr example program on soaheap's host backend, for the sanitizers: the program's sources are
# copied, their `name<<<grid, block>>>(args);` launches rewritten to soaheap_host::launch and a PTX
# `asm("trap;")` to __builtin_trap() (the only changes), compiled by g++ against the shim with
# cuda_on_host.h and the stand-in curand_kernel.h, optionally with ThreadSanitizer or
# AddressSanitizer+UBSan, and run.
#
# Usage (repo root): tools/dynasoar-host/run.sh DYNASOAR_DIR MAIN_SOURCE [SANITIZER] [-- FLAGS...]
#   MAIN_SOURCE  relative to DYNASOAR_DIR, e.g. example/barnes-hut-dynamic/dynasoar/barnes_hut.cu
#   SANITIZER    none (default), thread or address
#   FLAGS        extra compiler flags, e.g. -DNDEBUG -DPARAM_SIZE=20000 -DPARAM_NUM_ITER=20
# Environment: SOAHEAP_HOST_THREADS (worker threads of the host backend, default: all cores),
#   BIN_DIR (default build-dynasoar-host), CXX (default g++), PATCH (a patch applied to the copy),
#   EXTRA (more of the program's sources, relative to DYNASOAR_DIR, e.g. game-of-life's
#   example/game-of-life/dataset_loader.cu), ARGS (the program's command line).
# Exit status: the program's.
set -euo pipefail
src="$(cd "${1:?usage: $0 DYNASOAR_DIR MAIN_SOURCE [SANITIZER] [-- FLAGS...]}" && pwd)"
main="${2:?main source missing}"
shift 2
sanitizer=none
if [ $# -gt 0 ] && [ "$1" != "--" ]; then sanitizer="$1"; shift; fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
repo="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${BIN_DIR:-$repo/build-dynasoar-host}"
name="$(basename "$main" .cu)-$sanitizer"
copy="$bin/$name-src"
rm -rf "$copy"
mkdir -p "$copy"
cp -r "$src/example" "$copy/"
[ -d "$src/util" ] && cp -r "$src/util" "$copy/"
if [ -n "${PATCH:-}" ]; then patch -d "$copy" -p1 <"$PATCH"; fi
# name<<<grid, block>>>(args);  ->  soaheap_host::launch(grid, block, [&] { name(args); });
# asm("trap;") (PTX, e.g. linux-scalability's out-of-memory check)  ->  __builtin_trap()
perl -0pi -e 's/(\w+)\s*<<<\s*([^,>]+?)\s*,\s*([^,>]+?)\s*>>>\s*\(([^;]*?)\)\s*;/soaheap_host::launch($2, $3, [&] { $1($4); });/g;
              s/\basm\s*\(\s*"trap;"\s*\)/__builtin_trap()/g' \
  "$copy/$main"

case "$sanitizer" in
  none) sanitize="" ;;
  thread) sanitize="-fsanitize=thread" ;;
  # DynaSOAr programs call cast<T>() on null pointers by design (their idiom, which the shim
  # supports): UBSan's null check is left out.
  address) sanitize="-fsanitize=address,undefined -fno-sanitize=null -fno-sanitize-recover=undefined" ;;
  *) echo "unknown sanitizer '$sanitizer' (none, thread or address)" >&2; exit 2 ;;
esac
includes="-I$repo/tools/dynasoar-host -I$repo/compat/shim"
for module_include in "$repo"/*/include; do includes="$includes -I$module_include"; done
includes="$includes -I$copy/example/configuration/dynasoar -I$copy"
# shellcheck disable=SC2086  # word splitting of the flag lists is intended
"${CXX:-g++}" -std=c++17 -O1 -g -fno-omit-frame-pointer $sanitize -include cuda_on_host.h $includes "$@" \
  -x c++ "$copy/$main" ${EXTRA:+$(printf "$copy/%s " $EXTRA)} "$repo/base/src/log.cpp" -x none -o "$bin/$name" \
  -lspdlog -lfmt -pthread
echo "### built $bin/$name ($sanitizer), running with ${SOAHEAP_HOST_THREADS:-all cores} worker threads" >&2
# shellcheck disable=SC2086  # ARGS is a command line
"$bin/$name" ${ARGS:-}
