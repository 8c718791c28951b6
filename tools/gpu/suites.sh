#!/usr/bin/env bash
# The CUDA test suites and compute-sanitizer (memcheck, racecheck, synccheck) over them, on a GPU machine.
# Usage: tools/gpu/suites.sh BIN_DIR LOG [suite...]   (default: every *_cuda_test in BIN_DIR)
# Appends to LOG; prints one summary line per run.
bin="$1"; log="$2"; shift 2
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  for path in "$bin"/*_cuda_test; do [ -x "$path" ] && suites+=("$(basename "$path")"); done
fi
summary() { echo "$1: exit $2" | tee -a "$log.summary"; }
for suite in "${suites[@]}"; do
  [ -x "$bin/$suite" ] || { summary "$suite missing" 127; continue; }
  echo "=== $suite" >>"$log"; timeout 300 "$bin/$suite" >>"$log" 2>&1; summary "$suite" $?
  echo "=== memcheck $suite" >>"$log"
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/$suite" >>"$log" 2>&1; summary "memcheck $suite" $?
  echo "=== racecheck $suite" >>"$log"
  timeout 300 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 "$bin/$suite" >>"$log" 2>&1
  summary "racecheck $suite" $?
  echo "=== synccheck $suite" >>"$log"
  timeout 300 compute-sanitizer --tool synccheck --error-exitcode 3 "$bin/$suite" >>"$log" 2>&1; summary "synccheck $suite" $?
done
# The churn suite (destroy + new in one kernel, exact live set) 20 times in a row.
if [ -x "$bin/churn_cuda_test" ]; then
  timeout 300 "$bin/churn_cuda_test" --gtest_repeat=20 --gtest_brief=1 >>"$log" 2>&1; summary "churn_cuda_test x20" $?
fi
