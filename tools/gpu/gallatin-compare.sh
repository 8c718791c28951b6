#!/usr/bin/env bash
# soaheap::malloc next to Gallatin's global allocator (issue 52's reference), timed the same way:
# malloc_bench's alloc_then_free rows and tools/gpu/gallatin_malloc.cu (the same kernels, launches
# and clock around them, built against a checkout of saltsystemslab/gallatin, which is not part of
# this repository), alternating ROUNDS times in one process tree on one GPU.
#
# Usage (repo root): tools/gpu/gallatin-compare.sh GALLATIN_DIR BIN_DIR
#   GALLATIN_DIR: a checkout of saltsystemslab/gallatin (its include/ is enough)
#   BIN_DIR: a build's bin/ with malloc_bench
# Environment: OUT (default .), ROUNDS (default 2), SIZES, THREADS, HEAP_MIB (default the table of
#   issue 52: 16,64,256,1024,4096,8192 B at 1,024 / 16,384 / 131,072 / 1,048,576 threads, 16 GiB),
#   GALLATIN_BIN (a driver built already; otherwise built into $OUT), NVCC, ARCH (default native).
# Writes "$OUT"/gallatin-vs-soaheap.jsonl: every row of both, with "round". Each row reports
# launch_floor_ms, the best launch of a kernel that only reads its slot (each row times two kernels).
set -euo pipefail
gallatin="${1:?usage: $0 GALLATIN_DIR BIN_DIR}"
bin="${2:?usage: $0 GALLATIN_DIR BIN_DIR}"
out="${OUT:-.}"
mkdir -p "$out"
here="$(cd "$(dirname "$0")" && pwd)"
driver="${GALLATIN_BIN:-$out/gallatin_malloc}"
if [ -z "${GALLATIN_BIN:-}" ]; then
  "${NVCC:-nvcc}" -O3 -std=c++17 -arch="${ARCH:-native}" --expt-relaxed-constexpr -w -I"$gallatin/include" \
    -o "$driver" "$here/gallatin_malloc.cu"
fi
sizes="${SIZES:-16,64,256,1024,4096,8192}"
threads="${THREADS:-1024,16384,131072,1048576}"
heap="${HEAP_MIB:-16384}"
result="$out/gallatin-vs-soaheap.jsonl"
: >"$result"
for round in $(seq 1 "${ROUNDS:-2}"); do
  "$driver" --sizes "$sizes" --threads "$threads" --heap-mib "$heap" --repeats 3 |
    sed "s/^{/{\"round\": $round, /" >>"$result"
  "$bin/malloc_bench" --backend cuda --no-platform --sizes "$sizes" --threads "$threads" --heap-mib "$heap" --repeats 3 |
    grep '^{' | sed "s/^{/{\"round\": $round, /" >>"$result"
done
echo "wrote $result"
