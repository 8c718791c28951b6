#!/usr/bin/env python3
"""Kernel time per kernel kind from the file tools/gpu/app-speed.sh writes (ncu.txt): one section
per '### <name>: <command>' header, each holding `ncu --csv --print-summary per-kernel` output."""

import collections
import csv
import re
import sys

KINDS = ["EnumerateKernel", "SnapshotIterationKernel", "StatisticsKernel", "ParallelNewKernel", "DeviceSelect",
         "DeviceCompact", "InitializeHeaders", "RebuildCandidates"]


def short_name(kernel):
    """parallel_do kernels by their method, library kernels by kind, others by functor."""
    method = re.search(r"&(?:[\w:]+::)?(\w+::\w+)", kernel)
    if "ParallelDoKernel" in kernel and method:
        return "parallel_do " + method.group(1)
    for kind in KINDS:
        if kind in kernel:
            return kind
    functor = re.search(r"for_each_thread_kernel<([\w:]+)", kernel)
    return functor.group(1) if functor else kernel[:70]


def main(path):
    text = open(path, encoding="utf-8").read()
    for section in text.split("### ")[1:]:
        title, _, body = section.partition("\n")
        rows = [line for line in body.splitlines() if line.startswith('"')]
        totals = collections.defaultdict(lambda: [0, 0.0])
        for row in csv.DictReader(rows):
            if row["Metric Name"] != "gpu__time_duration.sum":
                continue
            calls = int(row["Invocations"])
            average_ns = float(row["Average"].replace(",", ""))
            entry = totals[short_name(row["Kernel Name"])]
            entry[0] += calls
            entry[1] += calls * average_ns / 1e6
        print(f"## {title}\n  total kernel time {sum(v[1] for v in totals.values()):.2f} ms")
        for name, (calls, ms) in sorted(totals.items(), key=lambda item: -item[1][1])[:12]:
            print(f"  {ms:9.3f} ms  {calls:6d}x  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
