"""Tests of soaheap-bench's ratios and table, with fake applications that print JSON lines."""

import importlib.machinery
import importlib.util
import io
import json
import os
import stat
import sys
import tempfile
import textwrap
import unittest

TOOL = os.environ.get("SOAHEAP_BENCH_TOOL") or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                            "soaheap-bench")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("soaheap_bench", TOOL)
    spec = importlib.util.spec_from_loader("soaheap_bench", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


bench = load_tool()

# A fake application: with --defrag-policy none it takes 2 s and peaks at 100 blocks; with any
# other policy 1.5 s (0.3 s of it defragmenting) and 80 blocks. FAKE_FAIL makes it fail its check.
FAKE_APP = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    args = sys.argv[1:]
    policy = args[args.index("--defrag-policy") + 1] if "--defrag-policy" in args else "none"
    factor = int(args[args.index("--defrag-factor") + 1]) if "--defrag-factor" in args else 1
    off = policy == "none"
    failed = os.path.basename(sys.argv[0]) == os.environ.get("FAKE_FAIL")
    print("a log line that is not JSON")
    print(json.dumps({{"app": os.path.basename(sys.argv[0]), "backend": args[args.index("--backend") + 1],
                      "total_time_s": 2.0 if off else 1.5, "defrag_time_s": 0.0 if off else 0.3,
                      "peak_allocated_blocks": 100 if off else 80, "defrag_policy": policy,
                      "defrag_factor": factor, "self_check": "failed" if failed else "passed"}}))
    sys.exit(1 if failed else 0)
""")

FAKE_BASELINE = textwrap.dedent("""\
    #!{python}
    import json
    print(json.dumps({{"app": "baseline", "total_time_s": 0.5, "peak_allocated_blocks": 0, "self_check": "passed"}}))
""")


def write_executable(path, text):
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.format(python=sys.executable))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class RatioTest(unittest.TestCase):
    def test_ratio_handles_missing_and_zero(self):
        self.assertAlmostEqual(bench.ratio(3, 4), 0.75)
        self.assertIsNone(bench.ratio(None, 4))
        self.assertIsNone(bench.ratio(3, None))
        self.assertIsNone(bench.ratio(3, 0))
        self.assertIsNone(bench.ratio("x", 1))

    def test_summarize_computes_every_ratio(self):
        off = {"total_time_s": 2.0, "defrag_time_s": 0.0, "peak_allocated_blocks": 100}
        on = {"total_time_s": 1.5, "defrag_time_s": 0.3, "peak_allocated_blocks": 80, "defrag_policy": "every:50",
              "defrag_factor": 10}
        row = bench.summarize("collision", off, on, {"total_time_s": 0.5})
        self.assertAlmostEqual(row["runtime_ratio"], 0.75)
        self.assertAlmostEqual(row["peak_blocks_ratio"], 0.8)
        self.assertAlmostEqual(row["defrag_share"], 0.2)
        self.assertAlmostEqual(row["baseline_ratio"], 4.0)
        self.assertEqual(row["policy"], "every:50")

    def test_summarize_without_on_run_or_baseline(self):
        row = bench.summarize("nbody", {"total_time_s": 1.0, "peak_allocated_blocks": 5}, None, None)
        self.assertIsNone(row["runtime_ratio"])
        self.assertIsNone(row["baseline_ratio"])
        self.assertIn("| nbody", bench.format_table([dict(row, status="ok")]))

    def test_policy_arguments_follow_the_paper(self):
        self.assertEqual(bench.policy_arguments("every:50", 10, "10%"), ["--defrag-policy", "every:50", "--defrag-factor", "10"])
        self.assertEqual(bench.policy_arguments("mass", 9, "16"), ["--defrag-policy", "mass:16", "--defrag-factor", "9"])
        self.assertEqual(bench.policy_arguments("every:50", None, "10%"), ["--defrag-policy", "every:50"])
        table = {name: (policy, factor) for name, _, policy, factor in bench.APPLICATIONS}
        self.assertEqual(table["collision"], ("every:50", 10))
        self.assertEqual(table["structure"], ("every:50", 10))
        self.assertEqual(table["generation"], ("every:50", 2))
        self.assertEqual(table["wa_tor"], ("mass", 9))

    def test_auto_policy_replaces_the_papers_settings(self):
        self.assertEqual(bench.policy_arguments("auto", None, None), ["--defrag-policy", "auto"])
        self.assertEqual(bench.policy_arguments("auto", None, None, "5%"), ["--defrag-policy", "auto:5%"])
        arguments = bench.parse_arguments(["--policy", "auto", "--auto-budget", "3%"])
        self.assertEqual(bench.on_arguments(arguments, "mass", 9), ["--defrag-policy", "auto:3%"])
        paper = bench.parse_arguments([])
        self.assertEqual(bench.on_arguments(paper, "mass", 9), ["--defrag-policy", "mass:10%", "--defrag-factor", "9"])

    def test_locality_window_reaches_the_on_runs(self):
        windowed = bench.parse_arguments(["--policy", "auto", "--locality-window", "4096"])
        self.assertEqual(bench.on_arguments(windowed, "mass", 9),
                         ["--defrag-policy", "auto", "--defrag-locality-window", "4096"])
        paper = bench.parse_arguments(["--locality-window", "0"])
        self.assertEqual(bench.on_arguments(paper, "every:50", 10),
                         ["--defrag-policy", "every:50", "--defrag-factor", "10", "--defrag-locality-window", "0"])
        self.assertNotIn("--defrag-locality-window", bench.on_arguments(bench.parse_arguments([]), "mass", 9))
        for bad in ("-1", "4k", "2.5"):
            with self.assertRaises(SystemExit, msg=bad):
                bench.parse_arguments(["--locality-window", bad])

    def test_every_application_but_barnes_hut_has_a_baseline(self):
        names = {name for name, _, _, _ in bench.APPLICATIONS}
        self.assertEqual(names - set(bench.BASELINES), {"barnes_hut"})
        self.assertLessEqual(set(bench.BASELINES), names)
        # The first name of each baseline is the binary examples/ builds (examples/baselines/<app>/
        # builds <app>_baseline), and the first name of each application is its own folder's.
        examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples")
        if os.path.isdir(examples):
            for name, binaries in bench.BASELINES.items():
                self.assertEqual(binaries[0], name + "_baseline")
                self.assertTrue(os.path.isfile(os.path.join(examples, "baselines", name, "CMakeLists.txt")), (name, binaries))
            for name, binaries, _, _ in bench.APPLICATIONS:
                self.assertEqual(binaries[0], name)
                self.assertTrue(os.path.isfile(os.path.join(examples, "applications", name, "CMakeLists.txt")), name)

    def test_parse_result_line_skips_logs(self):
        self.assertEqual(bench.parse_result_line('log\n{"a": 1}\nmore log\n'), {"a": 1})
        self.assertIsNone(bench.parse_result_line("no json here\n{broken\n"))


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.bin_dir = self.directory.name
        for name in ("collision", "wa_tor", "nbody"):
            write_executable(os.path.join(self.bin_dir, name), FAKE_APP)
        write_executable(os.path.join(self.bin_dir, "collision_baseline"), FAKE_BASELINE)
        self.output = os.path.join(self.bin_dir, "results.jsonl")
        os.environ.pop("FAKE_FAIL", None)

    def tearDown(self):
        os.environ.pop("FAKE_FAIL", None)
        self.directory.cleanup()

    def run_tool(self, *extra):
        out = io.StringIO()
        code = bench.main(["--bin-dir", self.bin_dir, "--output", self.output] + list(extra), out=out)
        return code, out.getvalue()

    def rows(self, text):
        return {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[1:-1]]
                for line in text.splitlines() if line.startswith("| ") and not line.startswith("| application")}

    def test_table_ratios_missing_binaries_and_raw_lines(self):
        code, text = self.run_tool()
        self.assertEqual(code, 0, text)
        rows = self.rows(text)
        self.assertEqual(set(rows), {"collision", "wa_tor", "nbody"})
        collision = rows["collision"]
        self.assertEqual(collision[1:3], ["every:50", "10"])
        self.assertEqual(collision[3:11], ["2.000", "1.500", "0.750", "0.800", "20.0%", "0.500", "4.00", "ok"])
        self.assertEqual(rows["wa_tor"][1:3], ["mass:10%", "9"])
        self.assertEqual(rows["nbody"][8:10], ["-", "-"])  # no nbody_baseline here
        self.assertIn("missing binaries", text)
        for name in ("structure", "generation", "game_of_life", "sugarscape", "traffic", "barnes_hut",
                     "wa_tor_baseline", "nbody_baseline"):
            self.assertIn(name, text.split("missing binaries")[1])
        with open(self.output, encoding="utf-8") as handle:
            lines = [json.loads(line) for line in handle]
        self.assertEqual(len(lines), 7)  # 3 apps x (off, on) + 1 baseline
        variants = sorted((line["app"], line["bench_variant"]) for line in lines)
        self.assertIn(("collision", "off"), variants)
        self.assertIn(("baseline", "baseline"), variants)
        on_runs = [line for line in lines if line["bench_variant"] == "on" and line["app"] == "collision"]
        self.assertEqual(on_runs[0]["backend"], "cuda")
        self.assertIn("--defrag-factor", on_runs[0]["bench_command"])

    def test_failed_self_check_is_reported_and_sets_exit_status(self):
        os.environ["FAKE_FAIL"] = "nbody"
        code, text = self.run_tool("--apps", "nbody,collision")
        self.assertEqual(code, 1)
        rows = self.rows(text)
        self.assertIn("self_check failed", rows["nbody"][10])
        self.assertEqual(rows["collision"][10], "ok")

    def test_unknown_application_is_a_usage_error(self):
        with self.assertRaises(SystemExit):
            bench.parse_arguments(["--apps", "nosuchapp"])


if __name__ == "__main__":
    unittest.main()
