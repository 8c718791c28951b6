#!/usr/bin/env bash
# Issue "memory that follows the live set", its time and memory targets in one run on a GPU machine:
# each application grown from 64 MiB (also with defrag.map_fresh_blocks) against its own fixed
# heap and against a fixed heap of the size the growing run peaked at (--heap-mib), best of two,
# then Nsight Compute kernel totals of game_of_life on its own heap and on a growing one that never
# waits for growth (decision 027).
# Usage: tools/gpu/growing-heap.sh BIN_DIR OUT_DIR [apps...]   (default: the growing-heap table's)
# Environment: BACKEND=host and RUN_ARGS="--size 64 --iterations 20" for a smoke test without a GPU.
# Writes OUT_DIR/gpu.txt, runs.jsonl (one tagged result line per run), table.txt, ncu.txt.
set -uo pipefail
bin="$1"; out="$2"; shift 2
apps=("$@")
[ ${#apps[@]} -eq 0 ] && apps=(game_of_life generation traffic wa_tor sugarscape nbody barnes_hut collision structure)
root="$(cd "$(dirname "$0")/../.." && pwd)"
backend="${BACKEND:-cuda}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
export CUDA_MODULE_LOADING=EAGER
: >"$out/runs.jsonl"
run() {  # tag, application, arguments...: appends {"tag": ..., "result": the application's JSON line or null}
  local tag="$1" app="$2"; shift 2
  local line
  line=$(timeout 300 "$bin/$app" --backend "$backend" --defrag-policy auto ${RUN_ARGS:-} "$@" 2>>"$out/runs.log" | grep '^{' | tail -1)
  echo "{\"tag\": \"$tag\", \"app\": \"$app\", \"result\": ${line:-null}}" >>"$out/runs.jsonl"
}
peak_mib() {  # the largest peak resident of an application's growing runs so far, in whole MiB (rounded up)
  python3 - "$out/runs.jsonl" "$1" <<'EOF'
import json, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
peaks = [run["result"]["peak_resident_bytes"] for run in runs
         if run["app"] == sys.argv[2] and run["tag"] == "grown" and run["result"]]
print(-(-max(peaks) // (1 << 20)) if peaks else 0)
EOF
}
for app in "${apps[@]}"; do
  [ -x "$bin/$app" ] || { echo "$app: not built" >>"$out/runs.log"; continue; }
  for round in 1 2; do
    run own "$app"
    run grown "$app" --grow-from-mib 64
    SOAHEAP_DEFRAG_MAP_FRESH_BLOCKS=1 run grown_fresh "$app" --grow-from-mib 64
  done
  peak=$(peak_mib "$app")
  if [ "$peak" -gt 0 ]; then
    for round in 1 2; do run at_peak "$app" --heap-mib "$peak"; done
  fi
done
python3 - "$out/runs.jsonl" <<'EOF' | tee "$out/table.txt"
import json, sys
runs = {}
for line in open(sys.argv[1]):
    entry = json.loads(line)
    if entry["result"]:
        runs.setdefault((entry["app"], entry["tag"]), []).append(entry["result"])
def best(app, tag):
    results = runs.get((app, tag))
    return min(results, key=lambda r: r["total_time_s"]) if results else None
print("| application | grown ÷ own fixed heap | ÷ fixed heap of its peak | with map_fresh_blocks ÷ fixed heap of the peak; its peak resident ÷ peak allocated | peak resident ÷ peak allocated | after trim ÷ allocated | longest growth wait | self-checks |")
print("|---|---|---|---|---|---|---|---|")
for app in dict.fromkeys(app for app, _ in runs):
    own, grown, at_peak, fresh = best(app, "own"), best(app, "grown"), best(app, "at_peak"), best(app, "grown_fresh")
    if not own or not grown:
        print(f"| {app} | missing runs | | | | | | |")
        continue
    block = grown["block_bytes"]
    ratio = lambda a, b: f"{a['total_time_s']:.3f} ÷ {b['total_time_s']:.3f} s = {a['total_time_s'] / b['total_time_s']:.2f}"
    peak = grown["peak_resident_bytes"] / max(1, grown["peak_allocated_blocks"] * block)
    trim = grown["resident_after_trim"] / max(1, grown["allocated_blocks"] * block)
    versus_peak = f"{ratio(grown, at_peak)} ({at_peak['heap_bytes'] >> 20} MiB)" if at_peak else "—"
    fresh_peak = fresh["peak_resident_bytes"] / max(1, fresh["peak_allocated_blocks"] * block) if fresh else 0
    versus_fresh = f"{ratio(fresh, at_peak)}; {fresh_peak:.2f}" if fresh and at_peak else "—"
    checks = "/".join(r["self_check"] for tag in ("own", "grown", "grown_fresh", "at_peak") for r in runs.get((app, tag), []))
    print(f"| {app} | {ratio(grown, own)} | {versus_peak} | {versus_fresh} | {peak:.2f} | {trim:.2f} | "
          f"{grown.get('growth_longest_ns', 0) / 1e6:.2f} ms | {checks} |")
EOF
if [ "$backend" = cuda ] && [ -x "$bin/game_of_life" ]; then
  : >"$out/ncu.txt"
  for heap in own grown; do
    extra=(); [ $heap = grown ] && extra=(--grow-from-mib 1400)  # room for the whole run: no kernel waits
    echo "### game_of_life, $heap heap" >>"$out/ncu.txt"
    timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel --csv \
      "$bin/game_of_life" --backend cuda --defrag-policy auto --iterations 200 "${extra[@]}" 2>&1 | grep -v '^==PROF==' >>"$out/ncu.txt"
  done
fi
