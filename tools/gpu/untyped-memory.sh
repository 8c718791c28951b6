#!/usr/bin/env bash
# Untyped memory on a GPU machine (issue 12): the CUDA suite, compute-sanitizer memcheck and
# racecheck over it, then malloc_bench against CUDA device malloc. Builds nothing: expects
# build-gpu/bin/{untyped_cuda_test,malloc_bench} (cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90).
# Usage, from the repository root: tools/gpu/untyped-memory.sh [OUT_DIR]   (default: $OUT)
# Writes OUT_DIR/untyped-tests.log (suite and sanitizers, with a summary at the end) and
# OUT_DIR/malloc_bench.jsonl (one JSON object per line). About 2-3 minutes on an H100.
set -uo pipefail
bin=build-gpu/bin
out="${1:-${OUT:?give OUT_DIR or set OUT}}"
mkdir -p "$out"
log="$out/untyped-tests.log"
: >"$log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
status=0
step() {  # name, timeout, command...
  local name="$1" limit="$2"; shift 2
  echo "=== $name: $*" >>"$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc" >>"$log"
  summary+="$name: exit $rc"$'\n'
  [ $rc -eq 0 ] || status=1
}
summary=""
step suite 120 "$bin/untyped_cuda_test"
# The sanitizers slow kernels down a lot: the storm and big-list tests run in the plain suite above.
step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/untyped_cuda_test" \
  --gtest_filter='-*Storm*'
step racecheck 150 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 \
  "$bin/untyped_cuda_test" --gtest_filter='*DeviceListBlockWide*:*MisuseIsReported*:*OutOfMemory*'
echo "=== malloc_bench" >>"$log"
timeout 240 "$bin/malloc_bench" --backend cuda >"$out/malloc_bench.jsonl" 2>>"$log"
rc=$?
summary+="malloc_bench: exit $rc"$'\n'
[ $rc -eq 0 ] || status=1
printf '=== summary\n%s' "$summary" | tee -a "$log"
exit $status
