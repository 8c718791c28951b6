#!/usr/bin/env bash
# DynaSOAr compatibility on a GPU machine (issue 11): the cuda compatibility suite (a DynaSOAr-style
# program through the shim, checked against the native-API program), then the fireworks example
# (examples/dynasoar/compat) at a small and a large iteration count, under compute-sanitizer once.
# Builds nothing: expects build-gpu/bin from `cmake -S . -B build-gpu -DCMAKE_CUDA_ARCHITECTURES=90`.
# Usage (repo root): tools/gpu/dynasoar-compat.sh [BIN_DIR]   Writes "$OUT"/dynasoar-compat.log.
# Exit status: non-zero when any step failed. Runtime: well under a minute on an H100.
set -uo pipefail
bin="${1:-build-gpu/bin}"
out="${OUT:-.}"
log="$out/dynasoar-compat.log"
mkdir -p "$out"
: >"$log"
status=0
step() {  # title, command...
  local title="$1"; shift
  echo "### $title: $*" >>"$log"
  local start end rc
  start=$(date +%s.%N)
  timeout 120 "$@" >>"$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "### $title: exit $rc, $(awk "BEGIN { printf \"%.2f\", $end - $start }") s" >>"$log"
  [ "$rc" -eq 0 ] || status=1
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
step "compat suite" "$bin/compat_dynasoar_cuda_test"
step "fireworks, 30 iterations" "$bin/dynasoar_compat" 30
step "fireworks, 300 iterations" "$bin/dynasoar_compat" 300
SOAHEAP_LOG_LEVEL=warn step "fireworks under compute-sanitizer (memcheck)" \
  compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/dynasoar_compat" 10
SOAHEAP_LOG_LEVEL=warn step "compat program vs native under compute-sanitizer (memcheck)" \
  compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/compat_dynasoar_cuda_test" \
  --gtest_filter='*ProgramMatchesNativeProgram*:*ParallelDefrag*'
echo "### overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)" >>"$log"
tail -n 40 "$log"
exit $status
