"""Tests of bench-table: the benchmark page rendered from a data file of soaheap-bench result lines."""

import importlib.machinery
import importlib.util
import json
import os
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench-table")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("bench_table", TOOL)
    spec = importlib.util.spec_from_loader("bench_table", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


table = load_tool()

DATA = {
    "gpu": "Test GPU", "driver": "1.0", "date": "2026-12-01", "commit": "abc1234", "build": "cmake -S . -B b",
    "notes": ["A note."],
    "results": [
        {"app": "wa_tor", "bench_variant": "on", "defrag_policy": "mass:5%", "defrag_factor": 9,
         "total_time_s": 1.5, "peak_allocated_blocks": 1200000,
         "bench_command": ["wa_tor", "--backend", "cuda", "--defrag-policy", "mass:5%"]},
        {"app": "wa_tor", "bench_variant": "on", "defrag_policy": "mass:5%", "defrag_factor": 9,
         "total_time_s": 1.25, "peak_allocated_blocks": 1100000,
         "bench_command": ["wa_tor", "--backend", "cuda", "--defrag-policy", "mass:5%"]},
        {"app": "wa_tor", "bench_variant": "off", "defrag_policy": "none", "total_time_s": 2.0,
         "bench_command": "wa_tor --backend cuda --defrag-policy none", "commit": "def5678"},
    ],
    "figures": [{"what": "a | b", "value": "1.04", "command": "bench --x", "note": "ok"}],
}


class BenchTableTest(unittest.TestCase):
    def test_runs_of_one_command_share_a_row(self):
        page = table.render(DATA, "test.json")
        self.assertIn("| wa_tor | on | mass:5%, n = 9 | 1.5 / 1.25 | 1,200,000 / 1,100,000 | "
                      "`wa_tor --backend cuda --defrag-policy mass:5%` |", page)
        self.assertIn("| wa_tor | off | none | 2.0 | - | `wa_tor --backend cuda --defrag-policy none` "
                      "(commit def5678) |", page)

    def test_page_names_gpu_commit_and_commands(self):
        page = table.render(DATA, "test.json")
        self.assertTrue(page.startswith("# Benchmarks: Test GPU\n"))
        self.assertIn("- **commit:** abc1234", page)
        self.assertIn("| a \\| b | 1.04 — ok | `bench --x` |", page)
        self.assertTrue(page.endswith("\n"))

    def test_check_reports_a_stale_page(self):
        with tempfile.TemporaryDirectory() as folder:
            data_path = os.path.join(folder, "test.json")
            page_path = os.path.join(folder, "test.md")
            with open(data_path, "w", encoding="utf-8") as handle:
                json.dump(DATA, handle)
            self.assertEqual(table.main([data_path, "-o", page_path]), 0)
            self.assertEqual(table.main([data_path, "-o", page_path, "--check"]), 0)
            with open(page_path, "a", encoding="utf-8") as handle:
                handle.write("edited by hand\n")
            self.assertEqual(table.main([data_path, "-o", page_path, "--check"]), 1)


if __name__ == "__main__":
    unittest.main()
