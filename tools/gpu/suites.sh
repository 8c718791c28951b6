#!/usr/bin/env bash
# The CUDA test suites and compute-sanitizer (memcheck, racecheck, synccheck) over them, on a GPU machine.
# Usage: tools/gpu/suites.sh BIN_DIR LOG [suite...]   (default: every *_cuda_test in BIN_DIR)
# Environment: TOOLS (default "memcheck racecheck synccheck"; empty: none), JOBS, MEMCHECK_SKIP, PLAIN (0: only
# the sanitizers, for a visit that ran the suites already), ONLY (an extended regular expression: sanitize only
# the tests whose full names match, e.g. racecheck's slow migrate tests one visit at a time), TEST_TIMEOUT
# (seconds per test under a sanitizer, default 480), KERNELS (a regular expression: the tool checks only the
# kernels whose mangled names match it, e.g. "(Survey|Pack|Unpack)Kernel" for a layer's own kernels, which
# takes migrate's slowest racecheck tests from over 540 s to 2-4 s; the rest run uninstrumented).
# CUDA_LAUNCH_BLOCKING=1 (passed through to the tests) lets racecheck finish migrate's tests whose ranks are
# host threads launching at once: without it three such ranks sat in cuStreamSynchronize inside the tool for
# as long as any limit allowed (gdb, H200); with it DeparturesRecordedByAKernel passed in 3 s, 0 hazards.
# Appends to LOG; prints one summary line per run.
# Under a sanitizer every test runs in a process of its own, JOBS (default 8) at a time: racecheck
# over a whole suite took longer than any time limit a GPU machine gives a command (migrate: more
# than 540 s), test by test it is the longest test's time. memcheck leaves out the tests that grow a
# heap while a kernel runs (MEMCHECK_SKIP, default GrowthTest): it reports writes into memory mapped
# during a kernel as out of bounds until the next launch, and aborts the kernel (decision 027).
bin="$1"; log="$2"; shift 2
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
  for path in "$bin"/*_cuda_test; do [ -x "$path" ] && suites+=("$(basename "$path")"); done
fi
jobs="${JOBS:-8}"
summary() { echo "$1: $2" | tee -a "$log.summary"; }

# The full names of a suite's tests (gtest lists "Suite." lines, then "  test  # GetParam() = ...").
tests_of() { "$bin/$1" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}'; }

# sanitize TOOL SUITE: each test under compute-sanitizer --tool TOOL; one summary line with the
# tests that failed or reported errors, and every test's output in LOG.
sanitize() {
  local tool="$1" suite="$2" dir skip="" flags=""
  dir=$(mktemp -d)
  [ "$tool" = memcheck ] && skip="${MEMCHECK_SKIP-GrowthTest}"
  [ "$tool" = racecheck ] && flags="--racecheck-report hazard"
  [ -n "${KERNELS:-}" ] && flags="$flags --kernel-name regex=$KERNELS"
  # xargs appends "NUMBER TEST" to: $0 tool, $1 binary, $2 folder, $3 the tool's flags, $4 the timeout.
  tests_of "$suite" | { if [ -n "$skip" ]; then grep -v -- "$skip"; else cat; fi; } |
    { if [ -n "${ONLY:-}" ]; then grep -E -- "$ONLY"; else cat; fi; } | awk '{print NR, $0}' |
    xargs -P "$jobs" -L 1 bash -c 'out="$2/$(printf %04d "$5").log"; echo "test $6" >"$out"
      timeout "$4" compute-sanitizer --tool "$0" $3 --error-exitcode 3 "$1" --gtest_filter="$6" >>"$out" 2>&1
      echo "exit $?" >>"$out"' "$tool" "$bin/$suite" "$dir" "$flags" "${TEST_TIMEOUT:-480}"
  local failed=0 total=0 names="" file
  for file in "$dir"/*.log; do
    [ -e "$file" ] || continue
    total=$((total + 1))
    # A test that never touches the GPU passes, but the tool exits 255 ("terminated before first
    # instrumented API call"): nothing to check, clean.
    if grep -q '^exit 0$' "$file" ||
       { grep -q 'terminated before first instrumented API call' "$file" && grep -q '^\[  PASSED  \] 1 test' "$file"; }; then
      :
    else
      failed=$((failed + 1))
      # The test's name and the tool's first report line (or its last line of output).
      names="$names $(sed -n '1s/^test //p' "$file") [$(grep -m1 -E '^========= (Error|Invalid|Race|ERROR|Program hit|Barrier|Uninit)|^exit [^0]' "$file" | sed 's/^========= //')]"
    fi
    { echo "=== $tool $suite"; cat "$file"; } >>"$log"
  done
  rm -rf "$dir"
  summary "$tool $suite" "$((total - failed)) of $total tests clean${skip:+ (without $skip)}${KERNELS:+ (kernels matching $KERNELS)}${names:+; not clean:$names}"
}

for suite in "${suites[@]}"; do
  [ -x "$bin/$suite" ] || { summary "$suite" "missing"; continue; }
  if [ "${PLAIN:-1}" != 0 ]; then
    echo "=== $suite" >>"$log"
    timeout 300 "$bin/$suite" >>"$log" 2>&1
    summary "$suite" "exit $?"
  fi
  for tool in ${TOOLS-memcheck racecheck synccheck}; do sanitize "$tool" "$suite"; done
done
# The churn suite (destroy + new in one kernel, exact live set) 20 times in a row, when it is one of
# the suites of this call.
if [ "${PLAIN:-1}" != 0 ] && [ -x "$bin/churn_cuda_test" ] && [[ " ${suites[*]} " == *" churn_cuda_test "* ]]; then
  timeout 300 "$bin/churn_cuda_test" --gtest_repeat=20 --gtest_brief=1 >>"$log" 2>&1
  summary "churn_cuda_test x20" "exit $?"
fi
