#!/usr/bin/env bash
# Application speed on a GPU machine (issue "application speed"): the soaheap-bench table with
# baselines, then Nsight Compute kernel totals of the hot applications and their baselines.
# Usage: tools/gpu/app-speed.sh BIN_DIR OUT_DIR [bench|ncu|all]
# Writes OUT_DIR/bench.txt (table), OUT_DIR/bench.jsonl (raw result lines), OUT_DIR/ncu.txt.
set -uo pipefail
bin="$1"; out="$2"; what="${3:-all}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
if [ "$what" = all ] || [ "$what" = bench ]; then
  python3 "$root/tools/bench_runner/soaheap-bench" --bin-dir "$bin" --backend cuda --mass-threshold 5% \
    --timeout 120 --output "$out/bench.jsonl" ${BENCH_ARGS:-} >"$out/bench.txt" 2>"$out/bench.log"
  cat "$out/bench.txt"
fi
if [ "$what" = all ] || [ "$what" = ncu ]; then
  : >"$out/ncu.txt"
  profile() {  # name, command...
    local name="$1"; shift
    echo "### $name: $*" >>"$out/ncu.txt"
    ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel --csv "$@" \
      2>&1 | grep -v '^==PROF==' >>"$out/ncu.txt"
  }
  profile wa_tor "$bin/wa_tor" --backend cuda --size 2048 --iterations 20
  profile wa_tor_baseline "$bin/wa_tor_baseline" --backend cuda --size 2048 --iterations 20
  profile collision "$bin/collision" --backend cuda --size 65536 --iterations 5
  profile collision_baseline "$bin/collision_baseline" --backend cuda --size 65536 --iterations 5
  profile structure "$bin/structure" --backend cuda --iterations 20
  profile structure_baseline "$bin/structure_baseline" --backend cuda --iterations 20
fi
if [ "$what" = all ] || [ "$what" = deep ]; then
  # Full Nsight Compute sections of the hottest method kernels.
  : >"$out/ncu_deep.txt"
  deep() {  # kernel regex, command...
    local kernel="$1"; shift
    echo "### $kernel: $*" >>"$out/ncu_deep.txt"
    ncu --clock-control none --set full --kernel-name-base demangled -k "regex:$kernel" --launch-skip 2 \
      --launch-count 1 "$@" 2>&1 | grep -v '^==PROF==' >>"$out/ncu_deep.txt"
  }
  deep 'Fish::commit_move' "$bin/wa_tor" --backend cuda --size 2048 --iterations 5
  deep 'Fish::request_move' "$bin/wa_tor" --backend cuda --size 2048 --iterations 5
  deep 'compute_force' "$bin/collision" --backend cuda --size 65536 --iterations 5
fi
