#!/usr/bin/env python3
"""Fails when a kernel named inlined_* in the given PTX files calls a function or uses local memory.

Usage: check_inlined.py FILE.ptx...   (tests/ptx/allocation_paths.cu says why)
"""
import re
import sys


def kernels(ptx):
    """(name, body) of every .entry in @p ptx."""
    starts = list(re.finditer(r"^\.(?:visible|weak)?\s*\.entry\s+(\S+?)\(", ptx, re.M))
    for index, match in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(ptx)
        yield match.group(1), ptx[match.start():end]


def main(paths):
    checked, failures = 0, []
    for path in paths:
        for name, body in kernels(open(path).read()):
            if "inlined_" not in name:
                continue
            checked += 1
            calls = sorted(set(re.findall(r"\bcall(?:\.uni)?\s+(?:\([^)]*\),\s*)?(\w+)", body)))
            if calls:
                failures.append(f"{name}: calls {', '.join(calls)}")
            if "__local_depot" in body:
                failures.append(f"{name}: uses local memory (a stack frame)")
    if checked == 0:
        failures.append("no inlined_* kernel found in " + " ".join(paths))
    for failure in failures:
        print("check_inlined:", failure)
    print(f"check_inlined: {checked} kernels, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
