#!/usr/bin/env bash
# Speed of two builds in one run on one GPU: the applications (soaheap-bench, defragmentation off
# and on) and malloc_bench, alternating before/after so that both see the same machine state.
# Usage: tools/gpu/before-after.sh BIN_BEFORE BIN_AFTER OUT_DIR [rounds]
# Environment: POLICIES (default "paper"; "paper auto" for both of soaheap-bench's policies — one
# round of both, both sides, takes about 320 s on an H200, so plan rounds against the time limit).
# Writes OUT_DIR/{before,after}_{policy}_bench{N}.txt|.jsonl, OUT_DIR/{before,after}_malloc.jsonl,
# and OUT_DIR/compare.txt (per application and policy: total_time_s before, after, ratio; the
# median over rounds). Each soaheap-bench call writes its lines when it ends, so a visit cut short
# keeps the calls it finished.
set -uo pipefail
before="$1"; after="$2"; out="$3"; rounds="${4:-1}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for round in $(seq 1 "$rounds"); do
  for policy in ${POLICIES:-paper}; do
    for side in before after; do
      bin="$before"; [ "$side" = after ] && bin="$after"
      python3 "$root/tools/bench_runner/soaheap-bench" --bin-dir "$bin" --backend cuda --mass-threshold 5% --policy "$policy" \
        --no-baselines --timeout 120 --output "$out/${side}_${policy}_bench$round.jsonl" >"$out/${side}_${policy}_bench$round.txt" 2>&1
    done
  done
done
for side in before after; do
  bin="$before"; [ "$side" = after ] && bin="$after"
  [ -x "$bin/malloc_bench" ] && timeout 300 "$bin/malloc_bench" --backend cuda --no-platform >"$out/${side}_malloc.jsonl" 2>&1
done
python3 - "$out" >"$out/compare.txt" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
def times(side):
    result = {}
    for path in glob.glob(f"{out}/{side}_*_bench*.jsonl"):
        for line in open(path).read().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            key = (row.get("app") or row.get("application"), row.get("defrag_policy", "none"))
            if row.get("total_time_s") is not None:
                result.setdefault(key, []).append(row["total_time_s"])
    return {k: statistics.median(v) for k, v in result.items()}
b, a = times("before"), times("after")
print(f"{'application':<14} {'defrag':<12} {'before s':>9} {'after s':>9} {'after/before':>12}")
for key in sorted(set(b) & set(a), key=str):
    print(f"{str(key[0]):<14} {str(key[1]):<12} {b[key]:>9.3f} {a[key]:>9.3f} {a[key] / b[key]:>12.3f}")
PY
cat "$out/compare.txt"
