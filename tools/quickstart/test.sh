#!/usr/bin/env bash
# Quickstart 2: install what is missing, build everything, and run the test suite.
# Without a GPU the cuda suites report themselves as skipped.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${SOAHEAP_BUILD_DIR:-$root/build}"
"$root/tools/quickstart/install-deps.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSOAHEAP_WERROR=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure
