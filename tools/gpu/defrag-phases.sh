#!/usr/bin/env bash
# The compactor's phases for several builds on one GPU: defrag_bench's plan run (order none) and its
# ordered run (order field), alternating the builds round by round so that each sees the same machine
# state, then the kernel times of one plan run of each build under ncu. One JSON line per run in
# OUT/defrag-phases.jsonl (with "build" and "round"), ncu's per-kernel summary in OUT/defrag-ncu.txt
# ("### <build>" sections), and a table of phase times per build in OUT/defrag-phases.txt.
# Usage: tools/gpu/defrag-phases.sh OUT_DIR ROUNDS DIR...   (each DIR holds a defrag_bench)
# Environment: DEFRAG_ARGS (e.g. "--objects 1000000"), BACKEND (default cuda), NCU=0 skips ncu.
set -uo pipefail
out="$1"; rounds="$2"; shift 2
mkdir -p "$out"
: >"$out/defrag-phases.jsonl"; : >"$out/defrag-ncu.txt"
run() {  # dir order
  timeout 300 "$1/defrag_bench" --backend "${BACKEND:-cuda}" ${DEFRAG_ARGS:-} --mode table1 --delete-percent 60 \
    --compaction plan --target minimum --factors 1 --strategy forwarding --order "$2"
}
for round in $(seq 1 "$rounds"); do
  for dir in "$@"; do
    for order in none field; do
      run "$dir" "$order" 2>>"$out/defrag-phases.log" | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        row = json.loads(line)
    except ValueError:
        continue
    row["build"], row["round"] = sys.argv[1], int(sys.argv[2])
    print(json.dumps(row))' "$dir" "$round" >>"$out/defrag-phases.jsonl"
    done
  done
done
if [ "${NCU:-1}" != 0 ] && command -v ncu >/dev/null; then
  for dir in "$@"; do
    echo "### $dir" >>"$out/defrag-ncu.txt"
    timeout 300 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$dir/defrag_bench" --backend cuda ${DEFRAG_ARGS:-} --mode table1 --delete-percent 60 --compaction plan \
      --target minimum --factors 1 --strategy forwarding --order none >>"$out/defrag-ncu.txt" 2>&1
  done
fi
python3 - "$out/defrag-phases.jsonl" <<'PY' | tee "$out/defrag-phases.txt"
import json, sys
keys = ["scan_ms", "order_ms", "copy_ms", "rewrite_ms", "state_ms", "total_ms", "copy_bandwidth_fraction",
        "rewrite_bandwidth_fraction"]
print(f"{'build':40} {'round':>5} {'order':>6} " + " ".join(f"{k.replace('_ms', '').replace('_bandwidth_fraction', ' bw'):>9}" for k in keys))
for line in open(sys.argv[1]):
    row = json.loads(line)
    if "total_ms" not in row:
        continue
    print(f"{row['build'][-40:]:40} {row['round']:>5} {row['order']:>6} " + " ".join(f"{row.get(k, 0):9.3f}" for k in keys))
PY
