#!/usr/bin/env bash
# The allocation core before and after a change, on one GPU in one visit: builds two source trees
# (SASS for sm_90) against carried Debian dependencies, then runs the CUDA suites with memcheck and
# racecheck and churn x20 on the "after" build, and malloc_bench, soaheap-bench (paper and auto),
# parallel_do_bench, linux_scalability and churn timings on both, alternating before/after.
#
# Usage (on the GPU machine, from the repository root):
#   tools/gpu/allocation-core.sh build SRC_BEFORE SRC_AFTER DEPS_PREFIX WORK     # ~5 min on 16 cores
#   tools/gpu/allocation-core.sh suites WORK OUT
#   tools/gpu/allocation-core.sh malloc WORK OUT       # malloc_bench's table on both builds
#   tools/gpu/allocation-core.sh apps WORK OUT [rounds] # soaheap-bench, parallel_do_bench, linux_scalability, churn
# DEPS_PREFIX: a copy of /usr from a Debian 12 machine holding spdlog, fmt, toml++, nlohmann-json,
# CLI11 and GoogleTest (headers, libraries, CMake packages); the GPU image has none of them.
set -uo pipefail
mode="$1"; shift
root="$(cd "$(dirname "$0")/../.." && pwd)"
targets_common=(malloc_bench parallel_do_bench linux_scalability churn_cuda_test collision structure generation
                wa_tor wa-tor nbody game_of_life game-of-life sugarscape traffic barnes_hut)
suites=(heap_cuda_test churn_cuda_test defrag_cuda_test ordered_defrag_cuda_test untyped_cuda_test migrate_cuda_test
        compat_dynasoar_cuda_test)

build_tree() {  # build_tree SRC BUILD DEPS LOG targets...
  local src="$1" build="$2" deps="$3" log="$4"; shift 4
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCMAKE_PREFIX_PATH="$deps" -DSOAHEAP_DISTRIBUTED=OFF >"$log" 2>&1 || { echo "configure $src failed"; return 1; }
  local known=() all
  all="$(ninja -C "$build" -t targets all 2>/dev/null)"
  for t in "$@"; do grep -q "^$t:" <<<"$all" && known+=("$t"); done
  ninja -C "$build" -j8 "${known[@]}" >>"$log" 2>&1
}

case "$mode" in
build)
  before="$1"; after="$2"; deps="$3"; work="$4"
  mkdir -p "$work"
  build_tree "$before" "$work/before" "$deps" "$work/before.log" "${targets_common[@]}" &
  build_tree "$after" "$work/after" "$deps" "$work/after.log" "${targets_common[@]}" "${suites[@]}" &
  wait
  grep -E "error|FAILED" "$work/before.log" "$work/after.log" | head -20
  ls "$work/before/bin" "$work/after/bin"
  ;;
suites)
  work="$1"; out="$2"; bin="$work/after/bin"; log="$out/suites.log"
  export LD_LIBRARY_PATH="$root/.gpu/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$log"
  for suite in "${suites[@]}"; do
    echo "=== $suite" >>"$log"; timeout 240 "$bin/$suite" >>"$log" 2>&1; echo "$suite: exit $?" | tee -a "$log"
    # Storms and long lists run in the plain suite; under the sanitizers they take minutes each.
    echo "=== memcheck $suite" >>"$log"
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/$suite" --gtest_filter='-*Storm*:*Long*:*Many*' >>"$log" 2>&1
    echo "memcheck $suite: exit $?" | tee -a "$log"
    echo "=== racecheck $suite" >>"$log"
    timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 "$bin/$suite" \
      --gtest_filter='-*Storm*:*Long*:*Many*' >>"$log" 2>&1
    echo "racecheck $suite: exit $?" | tee -a "$log"
  done
  timeout 300 "$bin/churn_cuda_test" --gtest_repeat=20 --gtest_brief=1 >>"$log" 2>&1
  echo "churn_cuda_test x20: exit $?" | tee -a "$log"
  ;;
malloc)
  work="$1"; out="$2"
  export LD_LIBRARY_PATH="$root/.gpu/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
  table=(--sizes 16,64,256,1024,4096,8192 --threads 1024,16384,131072,1048576 --no-platform --heap-mib 16384)
  for side in before after; do
    timeout 280 "$work/$side/bin/malloc_bench" --backend cuda "${table[@]}" >"$out/malloc_$side.jsonl" 2>&1
    echo "malloc_bench $side: exit $?"
  done
  ;;
apps)
  work="$1"; out="$2"; rounds="${3:-1}"
  export LD_LIBRARY_PATH="$root/.gpu/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  now() { python3 -c 'import time; print(time.time())'; }
  for round in $(seq 1 "$rounds"); do
    for side in before after; do
      bin="$work/$side/bin"
      for policy in paper auto; do
        python3 "$root/tools/bench_runner/soaheap-bench" --bin-dir "$bin" --backend cuda --policy "$policy" \
          --no-baselines --timeout 120 --output "$out/bench_${side}_${policy}_$round.jsonl" >/dev/null 2>&1
        echo "soaheap-bench $side $policy round $round: exit $?"
      done
      timeout 120 "$bin/parallel_do_bench" --backend cuda >"$out/pdo_${side}_$round.jsonl" 2>&1
      timeout 120 "$bin/linux_scalability" --backend cuda >"$out/linux_${side}_$round.jsonl" 2>&1
      start=$(now); timeout 200 "$bin/churn_cuda_test" --gtest_brief=1 >/dev/null 2>&1
      echo "{\"side\":\"$side\",\"round\":$round,\"churn_suite_s\":$(python3 -c "print($(now) - $start)")}" >>"$out/churn_times.jsonl"
    done
  done
  ;;
*) echo "usage: $0 build|suites|bench ..." >&2; exit 2 ;;
esac
