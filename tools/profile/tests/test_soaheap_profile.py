"""Tests of soaheap-profile: the file format, the figures, the plots and the errors.

Run from the repository root with

    /usr/bin/python3 -m unittest discover -s tools/profile/tests -v

The command-line tests run the executable named by $SOAHEAP_PROFILE_TOOL
(CTest points it at the built copy) and otherwise the source-tree wrapper.
Expected numbers for the hand-made fixtures are worked out in the comments.
"""

import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(TESTS_DIR, "data")
TOOL_DIR = os.path.dirname(TESTS_DIR)
sys.path.insert(0, TOOL_DIR)

import soaheap_profile as tool  # noqa: E402  (needs the path above)

TOOL_COMMAND = os.environ.get("SOAHEAP_PROFILE_TOOL", os.path.join(TOOL_DIR, "soaheap-profile"))

# Fixture classes: Fish has 64 slots per 4096-byte block (64 B a slot),
# Shark has 32 (128 B a slot); Agent is abstract.
BLOCK_BYTES = 4096


def data_file(name):
    return os.path.join(DATA_DIR, name)


def run_tool(*arguments):
    return subprocess.run([TOOL_COMMAND, *arguments], capture_output=True, text=True, timeout=120)


def png_size(path):
    """(width, height) from the IHDR chunk, which directly follows the signature."""
    with open(path, "rb") as image:
        head = image.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG file")
    return struct.unpack(">II", head[16:24])


def svg_texts(path):
    """The strings drawn as <text> elements (there only with svg.fonttype 'none')."""
    with open(path, encoding="utf-8") as image:
        return re.findall(r"<text\b[^>]*>([^<]*)</text>", image.read())


def example_header():
    return tool.ProfileHeader(
        application="wa-tor",
        backend="cuda",
        device="NVIDIA H100 80GB HBM3",
        heap_bytes=1 << 30,
        block_bytes=BLOCK_BYTES,
        classes=[
            tool.ClassInfo(id=0, name="Agent", capacity=0, abstract=True),
            tool.ClassInfo(id=1, name="Fish", capacity=64),
            tool.ClassInfo(id=2, name="Shark", capacity=32),
        ],
        config={"defrag_factor": 2, "policy": {"every": 50}},
    )


class ToolTestCase(unittest.TestCase):
    def setUp(self):
        self._scratch = tempfile.TemporaryDirectory(prefix="soaheap-profile-test-")
        self.addCleanup(self._scratch.cleanup)

    def scratch_path(self, name):
        return os.path.join(self._scratch.name, name)

    def write_scratch(self, name, text):
        path = self.scratch_path(name)
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        return path

    def assert_success(self, result):
        self.assertEqual(result.returncode, 0, msg=f"stderr: {result.stderr}")
        self.assertNotIn("Traceback", result.stderr)

    def assert_one_line_error(self, result, *expected_fragments):
        """Exit code 2, exactly one stderr line in the tool's error format, no traceback."""
        self.assertEqual(result.returncode, tool.EXIT_ERROR, msg=f"stderr: {result.stderr}")
        self.assertNotIn("Traceback", result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, msg=f"expected one line, got: {result.stderr!r}")
        self.assertTrue(lines[0].startswith("soaheap-profile: error: "), msg=lines[0])
        for fragment in expected_fragments:
            self.assertIn(fragment, lines[0])


class FormatRoundTripTest(ToolTestCase):
    def write_example(self, path, with_end=True):
        header = example_header()
        samples = [
            tool.Sample(iteration=0, time_s=0.0, classes={
                "Fish": tool.ClassSample(used_slots=1000, allocated_blocks=16, active_blocks=1),
                "Shark": tool.ClassSample(used_slots=0, allocated_blocks=0),
            }),
            tool.Sample(iteration=50, time_s=0.75, classes={
                "Fish": tool.ClassSample(used_slots=300, allocated_blocks=16, active_blocks=16,
                                         candidate_blocks=12),
                "Shark": tool.ClassSample(used_slots=70, allocated_blocks=3, active_blocks=1),
            }),
        ]
        defrag = tool.DefragRun(
            iteration=50, time_s=0.8, class_name="Fish", passes=3, blocks_freed=11, objects_moved=260,
            fragmentation_before=0.70703125, fragmentation_after=0.0625,
            phase_ms={"scan": 0.125, "copy": 0.5, "forward": 0.0625, "rewrite": 0.25, "state": 0.03125,
                      "total": 0.96875},
        )
        end = tool.RunEnd(iterations=100, total_time_s=1.5, defrag_time_s=0.00096875)
        with tool.ProfileWriter(path, header) as writer:
            writer.write_sample(samples[0])
            writer.write_defrag(defrag)
            writer.write_sample(samples[1])
            if with_end:
                writer.write_end(end)
        return header, samples, [defrag], end

    def test_written_profile_reads_back_identically(self):
        path = self.scratch_path("round-trip.jsonl")
        header, samples, defrag_runs, end = self.write_example(path)
        profile = tool.load_profile(path)
        self.assertEqual(profile.header, header)
        self.assertEqual(profile.samples, samples)
        self.assertEqual(profile.defrag_runs, defrag_runs)
        self.assertEqual(profile.end, end)
        self.assertEqual(profile.warnings, [])

    def test_written_lines_follow_the_documented_layout(self):
        path = self.scratch_path("layout.jsonl")
        self.write_example(path)
        with open(path, encoding="utf-8") as stream:
            records = [json.loads(line) for line in stream]
        header = records[0]
        self.assertEqual((header["format"], header["version"]), ("soaheap-profile", 1))
        self.assertEqual(header["classes"][1], {"id": 1, "name": "Fish", "capacity": 64, "abstract": False})
        self.assertEqual([record.get("type") for record in records[1:]], ["sample", "defrag", "sample", "end"])
        # The derived fields: 16 blocks x 64 slots, 1 - 300/1024.
        fish = records[3]["classes"]["Fish"]
        self.assertEqual(fish["allocated_slots"], 1024)
        self.assertAlmostEqual(fish["fragmentation"], 1 - 300 / 1024)
        self.assertEqual(records[2]["class"], "Fish")
        self.assertEqual(set(records[2]["ms"]), set(tool.DEFRAG_PHASES))

    def test_file_of_a_cut_off_run_reads_with_a_warning(self):
        path = self.scratch_path("cut.jsonl")
        self.write_example(path, with_end=False)
        profile = tool.load_profile(path)
        self.assertIsNone(profile.end)
        self.assertEqual(profile.runtime_s, 0.75)  # time of the last sample
        self.assertEqual(len(profile.warnings), 1)
        self.assertIn("no end line", profile.warnings[0])

    def test_hand_made_fixture_parses_abstract_class_and_config(self):
        profile = tool.load_profile(data_file("known.jsonl"))
        self.assertEqual([info.name for info in profile.header.concrete_classes], ["Fish", "Shark"])
        self.assertTrue(profile.header.class_named("Agent").abstract)
        self.assertEqual(profile.header.config, {"defrag_factor": 2, "k1": 0})
        self.assertEqual([sample.iteration for sample in profile.samples], [0, 10, 20])
        self.assertEqual([run.class_name for run in profile.defrag_runs], ["Fish", "Shark"])
        self.assertEqual(profile.end, tool.RunEnd(iterations=30, total_time_s=3.0, defrag_time_s=0.003))


class HeapMemoryKeysTest(ToolTestCase):
    """The optional keys of a heap that can grow: max_bytes and object_bytes in
    the header, resident_bytes and mapped_blocks in samples (FORMAT.md)."""

    def test_new_keys_round_trip_and_are_left_out_when_unknown(self):
        path = self.scratch_path("resident.jsonl")
        header = example_header()
        header.max_bytes = 1 << 34
        header.classes[1] = tool.ClassInfo(id=1, name="Fish", capacity=64, object_bytes=48)
        samples = [
            tool.Sample(iteration=0, time_s=0.0, classes={"Fish": tool.ClassSample(used_slots=10, allocated_blocks=1)},
                        resident_bytes=5 << 20, mapped_blocks=1200),
            tool.Sample(iteration=1, time_s=0.5, classes={"Fish": tool.ClassSample(used_slots=10, allocated_blocks=1)}),
        ]
        with tool.ProfileWriter(path, header) as writer:
            for sample in samples:
                writer.write_sample(sample)
        profile = tool.load_profile(path)
        self.assertEqual(profile.header, header)
        self.assertEqual(profile.samples, samples)
        with open(path, encoding="utf-8") as stream:
            records = [json.loads(line) for line in stream]
        self.assertEqual(records[0]["max_bytes"], 1 << 34)
        self.assertEqual(records[0]["classes"][1]["object_bytes"], 48)
        self.assertNotIn("object_bytes", records[0]["classes"][2])
        self.assertEqual((records[1]["resident_bytes"], records[1]["mapped_blocks"]), (5 << 20, 1200))
        self.assertNotIn("resident_bytes", records[2])
        self.assertNotIn("mapped_blocks", records[2])

    def test_fixture_values_are_read(self):
        profile = tool.load_profile(data_file("known_resident.jsonl"))
        self.assertEqual(profile.header.heap_bytes, 67584)
        self.assertEqual(profile.header.max_bytes, 1048576)
        self.assertEqual(profile.header.class_named("Fish").object_bytes, 48)
        self.assertIsNone(profile.header.class_named("Shark").object_bytes)
        self.assertEqual([sample.resident_bytes for sample in profile.samples], [67584, 100352, 83968])
        self.assertEqual([sample.mapped_blocks for sample in profile.samples], [16, 24, 20])
        self.assertEqual(profile.warnings, [])

    def test_old_fixture_has_none_of_them(self):
        profile = tool.load_profile(data_file("known.jsonl"))
        self.assertIsNone(profile.header.max_bytes)
        self.assertEqual([info.object_bytes for info in profile.header.classes], [None, None, None])
        self.assertEqual([sample.resident_bytes for sample in profile.samples], [None, None, None])
        self.assertEqual([sample.mapped_blocks for sample in profile.samples], [None, None, None])

    def test_bad_values_are_rejected(self):
        with open(data_file("known_resident.jsonl"), encoding="utf-8") as stream:
            lines = stream.readlines()
        header, first_sample = lines[0], lines[1]
        cases = {
            "resident": (header, first_sample.replace('"resident_bytes":67584', '"resident_bytes":-1', 1),
                         "'resident_bytes' must be an integer >= 0"),
            "mapped": (header, first_sample.replace('"mapped_blocks":16', '"mapped_blocks":1.5', 1),
                       "'mapped_blocks' must be an integer >= 0"),
            "max": (header.replace('"max_bytes":1048576', '"max_bytes":0', 1), first_sample,
                    "'max_bytes' must be an integer >= 1"),
            "object": (header.replace('"object_bytes":48', '"object_bytes":true', 1), first_sample,
                       "'object_bytes' must be an integer >= 1"),
        }
        for name, (header_line, sample_line, message) in cases.items():
            with self.subTest(name):
                self.assertNotEqual(header_line + sample_line, header + first_sample)  # the case changed a line
                path = self.write_scratch(f"{name}.jsonl", header_line + sample_line)
                self.assert_one_line_error(run_tool("summary", path), message)

    def test_summary_and_compare_read_both_kinds_of_file(self):
        result = run_tool("summary", data_file("known_resident.jsonl"), "--json")
        self.assert_success(result)
        self.assertEqual(json.loads(result.stdout)["total"]["peak_allocated_bytes"], 16384)
        result = run_tool("compare", data_file("known.jsonl"), data_file("known_resident.jsonl"), "--json")
        self.assert_success(result)
        self.assertEqual(json.loads(result.stdout)["metrics"]["peak_allocated_bytes"]["ratio"], 1.0)


class MemoryTimelineTest(unittest.TestCase):
    """memory_timeline() of the fixtures, worked out by hand (4096-byte blocks).

    known_resident.jsonl: Fish has object_bytes 48, Shark none (so 4096/32 = 128 B a slot).
    sample  Fish used/blocks  Shark used/blocks  untyped blocks  allocated            live
    it 0    100 / 2           0 / 0              1               3 x 4096 = 12288     100*48          = 4800
    it 10   120 / 3           20 / 1             2               6 x 4096 = 24576     120*48 + 20*128 = 8320
    it 20   120 / 2           16 / 1             -               3 x 4096 = 12288     120*48 + 16*128 = 7808
    known.jsonl knows capacities only: live = used_slots * 4096 / capacity (Fish 64 B, Shark 128 B).
    """

    def test_profile_with_resident_bytes_and_object_sizes(self):
        timeline = tool.memory_timeline(tool.load_profile(data_file("known_resident.jsonl")))
        self.assertEqual(timeline.iterations, [0, 10, 20])
        self.assertEqual(timeline.resident_bytes, [67584, 100352, 83968])
        self.assertTrue(timeline.has_resident)
        self.assertEqual(timeline.allocated_bytes, [12288, 24576, 12288])
        self.assertEqual(timeline.live_bytes, [4800, 8320, 7808])

    def test_old_profile_uses_capacities_and_has_no_resident_bytes(self):
        timeline = tool.memory_timeline(tool.load_profile(data_file("known.jsonl")))
        self.assertEqual(timeline.resident_bytes, [None, None, None])
        self.assertFalse(timeline.has_resident)
        self.assertEqual(timeline.allocated_bytes, [8192, 16384, 12288])
        self.assertEqual(timeline.live_bytes, [100 * 64, 120 * 64 + 20 * 128, 120 * 64 + 16 * 128])


class SummaryTest(ToolTestCase):
    """Figures of tests/data/known.jsonl (4096-byte blocks), worked out by hand.

    sample  Fish used/blocks  Shark used/blocks  allocated  used bytes
    it 0    100 / 2           0 / 0              8192       100*64            = 6400
    it 10   120 / 3           20 / 1             16384      120*64 + 20*128   = 10240
    it 20   120 / 2           16 / 1             12288      120*64 + 16*128   = 9728
    Defrag: Fish 2.0 ms at it 10, Shark 1.0 ms at it 20; runtime 3.0 s.
    """

    def setUp(self):
        super().setUp()
        self.summary = tool.summarize(tool.load_profile(data_file("known.jsonl")))
        self.rows = {row.name: row for row in self.summary.classes}

    def test_run_information(self):
        self.assertEqual(self.summary.application, "wa-tor")
        self.assertEqual(self.summary.samples, 3)
        self.assertEqual(self.summary.iterations, 30)
        self.assertEqual(self.summary.runtime_s, 3.0)
        self.assertTrue(self.summary.complete)
        self.assertEqual(self.summary.reported_defrag_time_s, 0.003)

    def test_abstract_classes_get_no_row(self):
        self.assertEqual(list(self.rows), ["Fish", "Shark"])

    def test_fish_figures(self):
        fish = self.rows["Fish"]
        self.assertEqual(fish.peak_allocated_bytes, 3 * BLOCK_BYTES)
        self.assertEqual(fish.peak_allocated_slots, 192)
        self.assertEqual(fish.peak_used_bytes, 120 * 64)
        self.assertEqual(fish.peak_used_slots, 120)
        # 1 - 100/128, 1 - 120/192, 1 - 120/128
        self.assertAlmostEqual(fish.mean_fragmentation, (0.21875 + 0.375 + 0.0625) / 3)
        self.assertAlmostEqual(fish.max_fragmentation, 0.375)
        self.assertEqual(fish.defrag_runs, 1)
        self.assertAlmostEqual(fish.defrag_ms, 2.0)
        self.assertAlmostEqual(fish.defrag_share, 2.0 / 3000.0)

    def test_shark_fragmentation_ignores_samples_without_blocks(self):
        shark = self.rows["Shark"]
        self.assertEqual(shark.peak_allocated_bytes, BLOCK_BYTES)
        self.assertEqual(shark.peak_used_bytes, 20 * 128)
        # it 0 has no Shark block; it 10: 1 - 20/32, it 20: 1 - 16/32
        self.assertAlmostEqual(shark.mean_fragmentation, (0.375 + 0.5) / 2)
        self.assertAlmostEqual(shark.max_fragmentation, 0.5)

    def test_total_row_uses_peaks_of_per_sample_sums(self):
        total = self.summary.total
        self.assertEqual(total.name, "TOTAL")
        self.assertEqual(total.peak_allocated_bytes, 16384)
        self.assertEqual(total.peak_allocated_slots, 128 + 96)  # it 10: 192 + 32
        self.assertEqual(total.peak_used_bytes, 10240)
        self.assertEqual(total.peak_used_slots, 140)
        self.assertAlmostEqual(total.mean_fragmentation, (1 - 6400 / 8192 + 1 - 10240 / 16384 + 1 - 9728 / 12288) / 3)
        self.assertAlmostEqual(total.max_fragmentation, 0.375)
        self.assertEqual(total.defrag_runs, 2)
        self.assertAlmostEqual(total.defrag_ms, 3.0)
        self.assertAlmostEqual(total.defrag_share, 0.001)

    def test_json_output_carries_the_same_figures(self):
        result = run_tool("summary", data_file("known.jsonl"), "--json")
        self.assert_success(result)
        document = json.loads(result.stdout)
        self.assertEqual(document["runtime_s"], 3.0)
        self.assertEqual([row["name"] for row in document["classes"]], ["Fish", "Shark"])
        self.assertEqual(document["classes"][0]["peak_allocated_bytes"], 12288)
        self.assertEqual(document["total"]["peak_allocated_bytes"], 16384)
        self.assertAlmostEqual(document["total"]["mean_fragmentation"], self.summary.total.mean_fragmentation)

    def test_untyped_memory_peaks_are_summarized(self):
        # known_untyped.jsonl: untyped blocks 3 then 5 (one sample has none), reserved 9000 then 12000 bytes.
        summary = tool.summarize(tool.load_profile(data_file("known_untyped.jsonl")))
        self.assertEqual(summary.untyped.peak_blocks, 5)
        self.assertEqual(summary.untyped.peak_block_bytes, 5 * BLOCK_BYTES)
        self.assertEqual(summary.untyped.peak_bytes_reserved, 12000)
        self.assertEqual(summary.untyped.peak_live_allocations, 40)
        self.assertIsNone(self.summary.untyped)
        result = run_tool("summary", data_file("known_untyped.jsonl"))
        self.assert_success(result)
        self.assertIn("untyped memory (soaheap::malloc): peak 5 blocks (20.0 KiB), peak reserved 11.7 KiB",
                      result.stdout)

    def test_text_table_has_a_row_per_class_and_a_total_row(self):
        result = run_tool("summary", data_file("known.jsonl"))
        self.assert_success(result)
        rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
        self.assertEqual(rows["Fish"], ["Fish", "12.0", "KiB", "192", "7.5", "KiB", "21.9%", "37.5%", "1", "2.000",
                                        "0.07%"])
        self.assertEqual(rows["TOTAL"], ["TOTAL", "16.0", "KiB", "224", "10.0", "KiB", "26.7%", "37.5%", "2",
                                         "3.000", "0.10%"])
        self.assertNotIn("Agent", rows)

    def test_class_that_never_has_blocks_has_no_fragmentation(self):
        path = self.scratch_path("idle-class.jsonl")
        header = example_header()
        with tool.ProfileWriter(path, header) as writer:
            writer.write_sample(tool.Sample(iteration=0, time_s=0.0,
                                            classes={"Fish": tool.ClassSample(used_slots=64, allocated_blocks=1)}))
            writer.write_end(tool.RunEnd(iterations=1, total_time_s=0.0, defrag_time_s=0.0))
        summary = tool.summarize(tool.load_profile(path))
        shark = summary.classes[1]
        self.assertEqual((shark.name, shark.peak_allocated_bytes), ("Shark", 0))
        self.assertIsNone(shark.mean_fragmentation)
        self.assertIsNone(shark.defrag_share)  # a run time of 0 has no shares
        result = run_tool("summary", path)
        self.assert_success(result)
        self.assertIn("n/a", result.stdout)


class PlotTest(ToolTestCase):
    def test_png_has_the_requested_pixel_size(self):
        for size, extra_arguments in (((1200, 700), []), ((913, 457), ["--size", "913x457"]),
                                      ((640, 480), ["--size", "640x480", "--dpi", "150"])):
            with self.subTest(size=size):
                output = self.scratch_path(f"profile-{size[0]}.png")
                result = run_tool("plot", data_file("known.jsonl"), "-o", output, *extra_arguments)
                self.assert_success(result)
                self.assertGreater(os.path.getsize(output), 1000)
                self.assertEqual(png_size(output), size)

    def test_svg_keeps_labels_and_class_names_as_text(self):
        output = self.scratch_path("profile.svg")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output, "--title", "Wa-Tor n=2")
        self.assert_success(result)
        texts = svg_texts(output)
        self.assertIn("iteration", texts)
        self.assertIn("memory (KiB)", texts)  # peak 16 KiB picks the unit
        self.assertTrue(any(text.startswith("fragmentation") for text in texts), msg=texts)
        self.assertIn("Wa-Tor n=2", texts)
        for label in ("Fish (used)", "Shark (used)", "allocated (total)", "defrag Fish", "defrag Shark"):
            self.assertIn(label, texts)
        self.assertFalse(any("Agent" in text for text in texts))

    def test_class_selection_limits_what_is_drawn(self):
        output = self.scratch_path("sharks.svg")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output, "--classes", "Shark")
        self.assert_success(result)
        texts = svg_texts(output)
        self.assertIn("Shark (used)", texts)
        self.assertFalse(any("Fish" in text for text in texts), msg=texts)
        # Shark alone peaks at one 4096-byte block.
        self.assertIn("peak allocated (4.0 KiB)", texts)

    def test_unknown_class_selection_is_rejected(self):
        output = self.scratch_path("whale.png")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output, "--classes", "Fish,Whale")
        self.assert_one_line_error(result, "'Whale'", "Fish, Shark")
        self.assertFalse(os.path.exists(output))

    def test_bad_output_extension_is_rejected_before_reading(self):
        output = self.scratch_path("profile.jpg")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output)
        self.assert_one_line_error(result, "profile.jpg", "unsupported output format 'jpg'", ".png or .svg")
        self.assertFalse(os.path.exists(output))

    def test_bad_figure_size_is_rejected(self):
        result = run_tool("plot", data_file("known.jsonl"), "-o", self.scratch_path("x.png"), "--size", "wide")
        self.assert_one_line_error(result, "--size", "WIDTHxHEIGHT")

    def test_unwritable_output_is_one_line_error(self):
        output = os.path.join(self.scratch_path("missing-directory"), "profile.png")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output)
        self.assert_one_line_error(result, "cannot write")

    def test_profile_without_samples_cannot_be_plotted(self):
        with open(data_file("known.jsonl"), encoding="utf-8") as stream:
            header_line = stream.readline()
        end_line = '{"type":"end","iterations":0,"total_time_s":0.5,"defrag_time_s":0}\n'
        path = self.write_scratch("header-only.jsonl", header_line + end_line)
        result = run_tool("plot", path, "-o", self.scratch_path("empty.png"))
        self.assert_one_line_error(result, "no sample lines")


class MemoryPlotTest(ToolTestCase):
    RESIDENT = "resident (held by the heap)"
    ALLOCATED = "allocated (blocks in use)"
    LIVE = "live (objects)"

    def test_profile_with_resident_bytes(self):
        output = self.scratch_path("memory.svg")
        result = run_tool("plot", data_file("known_resident.jsonl"), "-o", output, "--memory")
        self.assert_success(result)
        self.assertEqual(result.stderr, "")
        self.assertGreater(os.path.getsize(output), 1000)
        texts = svg_texts(output)
        for label in (self.RESIDENT, self.ALLOCATED, self.LIVE, "defrag run", "iteration", "memory (KiB)"):
            self.assertIn(label, texts)
        self.assertIn("wa-tor: memory over time (test fixture, host; may grow to 1.0 MiB)", texts)
        # The memory plot, not the per-class profile.
        self.assertNotIn("Fish (used)", texts)
        self.assertFalse(any(text.startswith("fragmentation") for text in texts), msg=texts)

    def test_png_has_the_requested_pixel_size(self):
        output = self.scratch_path("memory.png")
        result = run_tool("plot", data_file("known_resident.jsonl"), "-o", output, "--memory", "--size", "700x400")
        self.assert_success(result)
        self.assertEqual(png_size(output), (700, 400))

    def test_old_profile_without_resident_bytes_still_plots(self):
        output = self.scratch_path("old-memory.svg")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output, "--memory")
        self.assert_success(result)
        self.assertIn("no resident_bytes", result.stderr)
        texts = svg_texts(output)
        self.assertIn(self.ALLOCATED, texts)
        self.assertIn(self.LIVE, texts)
        self.assertNotIn(self.RESIDENT, texts)
        self.assertIn("wa-tor: memory over time (test fixture, host)", texts)

    def test_classes_do_not_go_with_memory(self):
        output = self.scratch_path("memory-fish.png")
        result = run_tool("plot", data_file("known.jsonl"), "-o", output, "--memory", "--classes", "Fish")
        self.assert_one_line_error(result, "--classes", "--memory")
        self.assertFalse(os.path.exists(output))

    def test_profile_without_samples_cannot_be_plotted(self):
        with open(data_file("known_resident.jsonl"), encoding="utf-8") as stream:
            header_line = stream.readline()
        path = self.write_scratch("header-only.jsonl", header_line)
        result = run_tool("plot", path, "-o", self.scratch_path("empty.png"), "--memory")
        self.assertNotIn("Traceback", result.stderr)
        self.assertEqual(result.returncode, tool.EXIT_ERROR)
        self.assertIn("no sample lines", result.stderr)


class CompareTest(ToolTestCase):
    """known.jsonl (A, defrag) against known_no_defrag.jsonl (B, no defrag).

    B keeps 4 Fish blocks from it 10 on: allocated 8192, 20480, 20480 bytes;
    used bytes equal A's (6400, 10240, 9728); runtime 2.4 s; no defrag.
    """

    def compare_json(self, file_a, file_b):
        result = run_tool("compare", data_file(file_a), data_file(file_b), "--json")
        self.assert_success(result)
        return json.loads(result.stdout)

    def test_ratios_b_over_a(self):
        metrics = self.compare_json("known.jsonl", "known_no_defrag.jsonl")["metrics"]
        self.assertEqual(metrics["peak_allocated_bytes"], {"a": 16384, "b": 20480, "ratio": 1.25})
        self.assertEqual(metrics["peak_used_bytes"]["ratio"], 1.0)
        self.assertAlmostEqual(metrics["runtime_s"]["ratio"], 0.8)
        mean_a = (1 - 6400 / 8192 + 1 - 10240 / 16384 + 1 - 9728 / 12288) / 3
        mean_b = (1 - 6400 / 8192 + 1 - 10240 / 20480 + 1 - 9728 / 20480) / 3
        self.assertAlmostEqual(metrics["mean_fragmentation"]["a"], mean_a)
        self.assertAlmostEqual(metrics["mean_fragmentation"]["ratio"], mean_b / mean_a)
        self.assertEqual(metrics["defrag_ms"]["b"], 0.0)
        self.assertEqual(metrics["defrag_ms"]["ratio"], 0.0)

    def test_ratio_over_zero_is_null(self):
        metrics = self.compare_json("known_no_defrag.jsonl", "known.jsonl")["metrics"]
        self.assertEqual(metrics["peak_allocated_bytes"]["ratio"], 0.8)
        self.assertIsNone(metrics["defrag_ms"]["ratio"])

    def test_text_table_and_overlay_plot(self):
        output = self.scratch_path("compare.png")
        result = run_tool("compare", data_file("known.jsonl"), data_file("known_no_defrag.jsonl"),
                          "-o", output, "--size", "800x600")
        self.assert_success(result)
        rows = {line.split("  ")[0]: line.split() for line in result.stdout.splitlines()[1:]}
        self.assertEqual(rows["peak allocated memory"][-1], "1.250")
        self.assertEqual(rows["runtime"][-1], "0.800")
        self.assertEqual(rows["defrag time"][-1], "0.000")
        self.assertEqual(png_size(output), (800, 600))

    def test_overlay_svg_names_both_runs(self):
        output = self.scratch_path("compare.svg")
        result = run_tool("compare", data_file("known.jsonl"), data_file("known_no_defrag.jsonl"), "-o", output)
        self.assert_success(result)
        texts = svg_texts(output)
        for label in ("A: known.jsonl allocated", "A: known.jsonl used", "B: known_no_defrag.jsonl allocated",
                      "iteration", "memory (KiB)"):
            self.assertIn(label, texts)


    def test_memory_overlay_draws_resident_and_allocated_of_both_runs(self):
        output = self.scratch_path("compare-memory.svg")
        result = run_tool("compare", data_file("known_resident.jsonl"), data_file("known.jsonl"), "-o", output,
                          "--memory")
        self.assert_success(result)
        texts = svg_texts(output)
        for label in ("A: known_resident.jsonl resident", "A: known_resident.jsonl allocated",
                      "B: known.jsonl allocated", "A: live (objects)"):
            self.assertIn(label, texts)
        # B records no resident bytes: no line is made up for it.
        self.assertNotIn("B: known.jsonl resident", texts)

    def test_memory_overlay_needs_an_output(self):
        result = run_tool("compare", data_file("known_resident.jsonl"), data_file("known.jsonl"), "--memory")
        self.assert_one_line_error(result, "--memory", "--output")


class BadInputTest(ToolTestCase):
    def test_missing_file(self):
        missing = self.scratch_path("does-not-exist.jsonl")
        result = run_tool("summary", missing)
        self.assert_one_line_error(result, missing, "No such file")

    def test_truncated_last_line_is_ignored_with_warnings(self):
        result = run_tool("summary", data_file("truncated.jsonl"), "--json")
        self.assert_success(result)
        self.assertIn("truncated.jsonl:5: ignoring incomplete last line", result.stderr)
        self.assertIn("no end line", result.stderr)
        document = json.loads(result.stdout)
        self.assertEqual(document["samples"], 2)
        self.assertFalse(document["complete"])
        self.assertEqual(document["runtime_s"], 1.0)  # the last complete sample's time
        self.assertEqual(document["total"]["defrag_runs"], 1)

    def test_garbage_middle_line_is_rejected(self):
        result = run_tool("summary", data_file("garbage_middle.jsonl"))
        self.assert_one_line_error(result, "garbage_middle.jsonl:3:", "invalid JSON")
        self.assertEqual(result.stdout, "")

    def test_complete_but_malformed_last_line_is_rejected(self):
        # It ends with a newline, so the writer finished it: not a cut-off run.
        with open(data_file("known.jsonl"), encoding="utf-8") as stream:
            lines = stream.readlines()
        path = self.write_scratch("bad-last.jsonl", "".join(lines[:3]) + '{"type":"sample",\n')
        self.assert_one_line_error(run_tool("summary", path), "bad-last.jsonl:4:")

    def test_wrong_version(self):
        result = run_tool("summary", data_file("wrong_version.jsonl"))
        self.assert_one_line_error(result, "wrong_version.jsonl:1:", "unsupported format version 2")

    def test_unknown_class(self):
        result = run_tool("summary", data_file("unknown_class.jsonl"))
        self.assert_one_line_error(result, "unknown_class.jsonl:3:", "unknown class 'Whale'")

    def test_not_a_profile(self):
        cases = {
            "empty.jsonl": ("", "empty file"),
            "no-header.jsonl": ('{"type":"end","iterations":1,"total_time_s":1,"defrag_time_s":0}\n',
                                "not a soaheap-profile file"),
            "text.jsonl": ("hello\n", "not a soaheap-profile file"),
        }
        for name, (content, message) in cases.items():
            with self.subTest(name):
                self.assert_one_line_error(run_tool("summary", self.write_scratch(name, content)), f"{name}:1:",
                                           message)

    def test_inconsistent_records_are_rejected(self):
        with open(data_file("known.jsonl"), encoding="utf-8") as stream:
            lines = stream.readlines()
        header, first_sample, second_sample = lines[0], lines[1], lines[2]
        cases = {
            "slots": (first_sample.replace('"allocated_slots":128', '"allocated_slots":120', 1),
                      "allocated_slots 120 is not allocated_blocks 2 x capacity 64"),
            "fragmentation": (first_sample.replace('"fragmentation":0.21875', '"fragmentation":0.5', 1),
                              "fragmentation 0.5 does not match"),
            "negative": (first_sample.replace('"used_slots":100', '"used_slots":-1', 1),
                         "'used_slots' must be an integer >= 0"),
            "nan": (first_sample.replace('"time_s":0.0', '"time_s":NaN', 1), "NaN is not valid JSON"),
            "order": (second_sample + first_sample, "samples must be in iteration order"),
            "type": ('{"type":"snapshot"}\n', "unknown line type \"snapshot\""),
            "after-end": ('{"type":"end","iterations":1,"total_time_s":1,"defrag_time_s":0}\n' + first_sample,
                          "after the end line"),
        }
        for name, (body, message) in cases.items():
            with self.subTest(name):
                path = self.write_scratch(f"{name}.jsonl", header + body)
                self.assert_one_line_error(run_tool("summary", path), message)

    def test_usage_errors_are_one_line(self):
        self.assert_one_line_error(run_tool(), "COMMAND")
        self.assert_one_line_error(run_tool("plot", data_file("known.jsonl")), "-o/--output")
        self.assert_one_line_error(run_tool("frobnicate"), "invalid choice")


class HelpTest(unittest.TestCase):
    def test_every_subcommand_documents_its_options(self):
        expected_options = {
            (): ["summary", "plot", "compare"],
            ("summary",): ["FILE", "--json"],
            ("plot",): ["FILE", "--output", "--title", "--classes", "--memory", "--size", "--dpi"],
            ("compare",): ["--output", "--json", "--memory", "--title", "--size", "--dpi"],
        }
        for command, options in expected_options.items():
            with self.subTest(command=command):
                result = run_tool(*command, "--help")
                self.assertEqual(result.returncode, 0, msg=result.stderr)
                self.assertIn("usage: soaheap-profile", result.stdout)
                for option in options:
                    self.assertIn(option, result.stdout)


if __name__ == "__main__":
    unittest.main()
