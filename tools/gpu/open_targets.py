#!/usr/bin/env python3
"""Reads the files tools/gpu/open-targets.sh wrote into OUT_DIR and prints one line per speed target
of the open issues: the target, the value measured (median over the runs where there are several)
and whether it is met. Lines whose inputs are missing say so instead of guessing."""
import json
import statistics
import sys


def lines(path):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().splitlines()
    except OSError:
        return []
    rows = []
    for line in text:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return [row for row in rows if isinstance(row, dict)]


def by_app(rows):
    """{app: {variant: result}} from soaheap-bench's raw lines. A baseline names itself after its own
    binary (e.g. wa_tor_baseline), so it is filed under the application whose runs precede it:
    soaheap-bench runs each application's off, on and baseline variants one after the other."""
    table = {}
    current = None
    for row in rows:
        variant = row.get("bench_variant")
        if variant != "baseline":
            current = row.get("app") or row.get("application")
        if current is not None:
            table.setdefault(current, {})[variant] = row
    return table


def ratio(numerator, denominator):
    if numerator is None or denominator in (None, 0):
        return None
    return numerator / denominator


def main(out):
    results = []  # (issue, target text, value, limit, "<=" or ">=")

    pdo = lines(f"{out}/parallel_do.jsonl")
    def pdo_median(case, key):
        values = [row[key] for row in pdo if row.get("case") == case and key in row]
        return statistics.median(values) if values else None
    results.append(("18", "axpy parallel_do / plain arrays", pdo_median("ratio", "axpy_parallel_do_over_arrays"), 1.10, "<="))
    results.append(("18", "axpy, half destroyed / plain arrays", pdo_median("ratio", "axpy_half_destroyed_over_arrays"), 1.25, "<="))
    results.append(("18", "empty parallel_do [µs]", pdo_median("empty_class", "us_per_call"), 5.0, "<="))

    core = by_app(lines(f"{out}/core-apps.jsonl"))
    for app, limit in (("collision", 1.0), ("structure", 1.10), ("nbody", 1.0)):
        runs = core.get(app, {})
        value = ratio(runs.get("off", {}).get("total_time_s"), runs.get("baseline", {}).get("total_time_s"))
        results.append(("18", f"{app} / its hand-written baseline", value, limit, "<="))

    auto = by_app(lines(f"{out}/agents-auto.jsonl"))
    paper = by_app(lines(f"{out}/agents-paper.jsonl"))
    for app, limit in (("wa_tor", 2.0), ("sugarscape", 1.0), ("traffic", 1.0), ("generation", 3.0), ("game_of_life", 6.0)):
        on = auto.get(app, {}).get("on", {}).get("total_time_s")
        baseline = paper.get(app, {}).get("baseline", {}).get("total_time_s")
        results.append(("19", f"{app} with auto (ordering) / baseline", ratio(on, baseline), limit, "<="))
    for app in ("wa_tor", "sugarscape", "traffic", "generation", "game_of_life"):
        runs = auto.get(app, {})
        time_ratio = ratio(runs.get("on", {}).get("total_time_s"), runs.get("off", {}).get("total_time_s"))
        if app == "wa_tor":
            results.append(("19", "wa_tor auto / none, time", time_ratio, 0.85, "<="))
            peak = ratio(runs.get("on", {}).get("peak_allocated_blocks"), runs.get("off", {}).get("peak_allocated_blocks"))
            results.append(("19", "wa_tor auto / none, peak blocks", peak, 0.50, "<="))
        else:
            results.append(("19", f"{app} auto / none, time", time_ratio, 1.01, "<="))
        paper_on = paper.get(app, {}).get("on", {}).get("total_time_s")
        results.append(("19", f"{app} auto / paper's policy, time", ratio(runs.get("on", {}).get("total_time_s"), paper_on), 1.0, "<="))

    defrag = [row for row in lines(f"{out}/defrag.jsonl") if "total_ms" in row and "order" in row]
    plan = [row for row in defrag if row.get("order") == "none"]
    ordered = [row for row in defrag if row.get("order") == "field"]
    first = lambda rows, key: rows[0].get(key) if rows else None
    results.append(("19", "defrag_bench 60 %: plan total [ms]", first(plan, "total_ms"), 1.0, "<="))
    results.append(("19", "plan copy / device copy bandwidth", first(plan, "copy_bandwidth_fraction"), 0.60, ">="))
    results.append(("19", "plan rewrite / device copy bandwidth", first(plan, "rewrite_bandwidth_fraction"), 0.60, ">="))
    results.append(("19", "ordered compaction, one class [ms]", first(ordered, "total_ms"), 3.0, "<="))

    width = max(len(text) for _, text, _, _, _ in results)
    for issue, text, value, limit, sense in results:
        if value is None:
            shown, verdict = "-", "not measured"
        else:
            shown = f"{value:.3f}"
            verdict = "met" if (value <= limit if sense == "<=" else value >= limit) else "missed"
        print(f"#{issue}  {text.ljust(width)}  {shown:>8}  target {sense} {limit:<5}  {verdict}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: open_targets.py OUT_DIR", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
