#!/usr/bin/env bash
# Defragmentation v2 (issue 10) on a GPU machine: the cuda defragmentation suite (every compaction x
# rewrite strategy), the same suite under compute-sanitizer memcheck, and defrag_bench with the plan
# and passes strategies side by side (n = 1..5 at 60 % deletion, Table 1 size), plus the minimum
# target. Expects binaries in build-gpu/bin (or BIN_DIR), writes under OUT (default $OUT):
#   OUT/defrag-v2-tests.log   gtest output of defrag_cuda_test, then of its memcheck run
#   OUT/defrag-v2-bench.jsonl defrag_bench JSON lines (one per run, one comparison line per n)
# Usage: tools/gpu/defrag-v2.sh [BIN_DIR] [OUT]. Runtime: under 3 minutes (each step has a timeout).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-$root/build-gpu/bin}"
out="${2:-${OUT:?set OUT or pass an output folder}}"
mkdir -p "$out"
tests="$out/defrag-v2-tests.log"
bench="$out/defrag-v2-bench.jsonl"
status=0
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "### defrag_cuda_test"
  timeout 45 "$bin/defrag_cuda_test" --gtest_brief=1 || status=1
  echo "### compute-sanitizer --tool memcheck defrag_cuda_test, the plan strategy's cases"
  SOAHEAP_LOG_LEVEL=warn timeout 75 compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$bin/defrag_cuda_test" --gtest_brief=1 \
    --gtest_filter='*/cuda_plan_forwarding:*TinyObjects*/cuda_plan_records' || status=1
} >"$tests" 2>&1
{
  SOAHEAP_LOG_LEVEL=warn timeout 55 "$bin/defrag_bench" --backend cuda --mode table1 --delete-percent 60 \
    --factors 1,2,3,4,5 --strategy forwarding --compaction both || status=1
  SOAHEAP_LOG_LEVEL=warn timeout 10 "$bin/defrag_bench" --backend cuda --mode table1 --delete-percent 60 \
    --factors 1 --strategy forwarding --compaction plan --target minimum || status=1
} >"$bench" 2>&1
python3 - "$bench" <<'PY' || true
import json, sys
print("n  plan_ms passes_ms speedup  plan_frag passes_frag  plan_blocks passes_blocks minimum  plan_copy_bw plan_rewrite_bw")
for line in open(sys.argv[1]):
    if '"comparison"' not in line:
        continue
    r = json.loads(line)
    print("%-2d %7.3f %9.3f %7.2f  %9.4f %11.4f  %11d %13d %7d  %12.2f %15.2f" % (
        r["n"], r["plan_total_ms"], r["passes_total_ms"], r["speedup"], r["plan_fragmentation_after"],
        r["passes_fragmentation_after"], r["plan_blocks_after"], r["passes_blocks_after"], r["minimum_blocks"],
        r["plan_copy_bandwidth_fraction"], r["plan_rewrite_bandwidth_fraction"]))
PY
tail -n 3 "$tests"
exit $status
