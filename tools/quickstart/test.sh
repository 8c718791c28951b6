#!/usr/bin/env bash
# Quickstart 2: install what is missing, build everything, and run the test suite.
# Without a GPU the cuda suites report themselves as skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SOAHEAP_BUILD_DIR:-$root/build}"
"$root/tools/quickstart/install-deps.sh"
# Without a GPU the device code is only compiled, never run: compile it without optimization, and
# the C++-only sources at -O1 (the suites run in about a minute either way; -O3 costs a third more
# compile). CUDA sources keep -O3 for their host code: at -O1 g++ warns inside CUB.
check_only=ON
optimize=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "GPU [0-9]"; then check_only=OFF; optimize=(); fi
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSOAHEAP_WERROR=ON -DSOAHEAP_CUDA_CHECK_ONLY="$check_only" \
      "${optimize[@]}" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
