#!/usr/bin/env bash
# Quickstart 1: install what is missing, build, and run the collision demo (on the GPU if there is one).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
"$root/tools/quickstart/install-deps.sh"
generator=()
[ -f "$root/build/CMakeCache.txt" ] || generator=(-G Ninja)  # as test.sh, which shares the folder
cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j"$(nproc)" --target collision
backend=host
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && backend=cuda
exec "$root/build/bin/collision" --backend "$backend" "$@"
