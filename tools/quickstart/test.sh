#!/usr/bin/env bash
# Quickstart 2: install what is missing, build everything, and run the test suite.
# Without a GPU the cuda suites report themselves as skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SOAHEAP_BUILD_DIR:-$root/build}"
"$root/tools/quickstart/install-deps.sh"
# Without a GPU the device code is only compiled, never run (SOAHEAP_CUDA_CHECK_ONLY): the programs
# are built as C++ for the host backend with their device code compiled to PTX beside them, the
# CUDA suites (which only report themselves skipped here) with host code at -O0, and the C++
# sources at -O1 (docs/decisions/025-a-test-command-in-minutes.md).
check_only=ON
optimize=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CUDA_FLAGS_RELEASE="-O0 -DNDEBUG")
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "GPU [0-9]"; then check_only=OFF; optimize=(); fi
# Ninja schedules the build's long translation units better than make (decision 025); a build
# folder configured earlier keeps its generator.
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSOAHEAP_WERROR=ON -DSOAHEAP_CUDA_CHECK_ONLY="$check_only" \
      "${optimize[@]}" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
