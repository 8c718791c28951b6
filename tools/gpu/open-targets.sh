#!/usr/bin/env bash
# Every speed target of the open issues (core loop, ordered compaction and auto policy) measured in
# one run on a GPU machine, with a table of target, measured value and verdict at the end; device
# time is the scarce resource (docs/benchmarks/ holds the current figures). With "suites" it first runs the CUDA suites
# plain and under compute-sanitizer (tools/gpu/suites.sh).
# Usage: tools/gpu/open-targets.sh BIN_DIR OUT_DIR [suites]
# Environment (for a smoke test on a machine without a GPU): BACKEND=host, PDO_ARGS and DEFRAG_ARGS
# (e.g. "--objects 100000"), BENCH_ARGS (appended to every application, e.g. "--iterations 5").
# Writes OUT_DIR/gpu.txt, parallel_do.jsonl, core-apps.{txt,jsonl}, agents-auto.{txt,jsonl},
# agents-paper.{txt,jsonl}, defrag.jsonl, targets.txt (and suites.log[.summary]); about 3 minutes on
# an H100 without the suites.
set -uo pipefail
bin="$1"; out="$2"; what="${3:-}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
[ "$what" = suites ] && "$root/tools/gpu/suites.sh" "$bin" "$out/suites.log"

: >"$out/parallel_do.jsonl"
for round in 1 2 3; do
  timeout 120 "$bin/parallel_do_bench" --backend "${BACKEND:-cuda}" ${PDO_ARGS:-} >>"$out/parallel_do.jsonl" 2>>"$out/parallel_do.log"
done

bench() {  # name, soaheap-bench arguments...
  local name="$1"; shift
  python3 "$root/tools/bench_runner/soaheap-bench" --bin-dir "$bin" --backend "${BACKEND:-cuda}" --timeout 300 \
    --output "$out/$name.jsonl" ${BENCH_ARGS:+--extra-args "$BENCH_ARGS"} "$@" >"$out/$name.txt" 2>"$out/$name.log"
}
bench core-apps --apps collision,structure,nbody --mass-threshold 5%
bench agents-auto --apps wa_tor,sugarscape,traffic,generation,game_of_life --policy auto --no-baselines
bench agents-paper --apps wa_tor,sugarscape,traffic,generation,game_of_life --mass-threshold 5%

: >"$out/defrag.jsonl"
for order in none field; do
  timeout 300 "$bin/defrag_bench" --backend "${BACKEND:-cuda}" ${DEFRAG_ARGS:-} --mode table1 --delete-percent 60 --compaction plan \
    --target minimum --factors 1 --strategy forwarding --order "$order" >>"$out/defrag.jsonl" 2>>"$out/defrag.log"
done

python3 "$root/tools/gpu/open_targets.py" "$out" | tee "$out/targets.txt"
