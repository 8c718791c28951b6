#!/usr/bin/env bash
# parallel_do_bench of several builds on one GPU, alternating them round by round so that every
# build sees the same machine state; prints µs per call and the ratios, one line per build and round.
# Usage: tools/gpu/parallel-do-variants.sh OUT_FILE ROUNDS DIR...   (each DIR holds a parallel_do_bench)
set -uo pipefail
out="$1"; rounds="$2"; shift 2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$out"
for round in $(seq 1 "$rounds"); do
  for dir in "$@"; do
    timeout 120 "$dir/parallel_do_bench" --backend cuda 2>&1 | sed "s#^#$(basename "$dir") round $round #" >>"$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]).read().splitlines()[1:]:
    name, _, rnd, text = line.split(" ", 3)
    try:
        result = json.loads(text)
    except ValueError:
        continue
    rows.setdefault((name, rnd), {})[result.get("case")] = result
print(f"{'build':12} {'round':>5} {'empty µs':>9} {'axpy µs':>8} {'arrays µs':>9} {'axpy/arr':>8} {'half/arr':>8}")
for (name, rnd), cases in rows.items():
    us = lambda case: cases.get(case, {}).get("us_per_call", float("nan"))
    ratio = cases.get("ratio", {})
    print(f"{name:12} {rnd:>5} {us('empty_class'):9.2f} {us('axpy_parallel_do'):8.2f} {us('axpy_plain_arrays'):9.2f} "
          f"{ratio.get('axpy_parallel_do_over_arrays', float('nan')):8.3f} {ratio.get('axpy_half_destroyed_over_arrays', float('nan')):8.3f}")
PY
