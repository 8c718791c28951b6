"""soaheap-profile: summarise, plot and compare soaheap fragmentation profiles.

A profile is the JSON Lines file that the soaheap profiler writes while an
application runs; FORMAT.md next to this file describes it.  This module is
the command-line tool (see main()) and a small library at the same time:

- load_profile() reads and validates a file into a Profile,
- summarize() computes the figures of the summary table,
- plot_profile() / plot_memory() / plot_comparison() draw memory-profile
  figures (memory_timeline() computes what plot_memory() draws),
- ProfileWriter writes files in the same format (used by the tests, and handy
  for anyone who wants to produce profiles from Python).

Only the standard library is needed to read and summarise; matplotlib is
imported when a plot is requested, so that `summary` and `compare` work on
machines without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

TOOL_NAME = "soaheap-profile"
FORMAT_NAME = "soaheap-profile"
FORMAT_VERSION = 1

EXIT_SUCCESS = 0
EXIT_ERROR = 2

DEFRAG_PHASES = ("scan", "copy", "forward", "rewrite", "state", "total")

# Writers may print the derived `fragmentation` field with about six
# significant digits, so the reader only insists on agreement to this much.
FRAGMENTATION_TOLERANCE = 1e-6

PLOT_FORMATS = ("png", "svg")
DEFAULT_FIGURE_SIZE_PX = (1200, 700)
DEFAULT_DPI = 100
MAX_FIGURE_SIDE_PX = 20000

BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


class ProfileError(Exception):
    """Bad input or bad arguments: main() prints the message as one line."""


# --------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassInfo:
    """A managed class as declared in the header."""

    id: int
    name: str
    capacity: int  # object slots per block
    abstract: bool = False
    # Bytes of one object's fields; None when the file does not say (older files).
    object_bytes: Optional[int] = None


@dataclass
class ProfileHeader:
    application: str
    backend: str
    device: str
    heap_bytes: int
    block_bytes: int
    classes: List[ClassInfo]
    config: dict = field(default_factory=dict)
    # The most the heap may grow to (its size when fixed); None in older files.
    max_bytes: Optional[int] = None

    def class_named(self, name: str) -> Optional[ClassInfo]:
        for info in self.classes:
            if info.name == name:
                return info
        return None

    @property
    def concrete_classes(self) -> List[ClassInfo]:
        """Classes that can own blocks, in header order."""
        return [info for info in self.classes if not info.abstract]


@dataclass(frozen=True)
class ClassSample:
    """Heap statistics of one class at one sample.

    allocated_slots and fragmentation are stored in the file too, but they
    follow from these fields and the class capacity, so they are not kept.
    """

    used_slots: int
    allocated_blocks: int
    active_blocks: int = 0
    candidate_blocks: int = 0


# A class that a sample does not mention owns no blocks at that sample.
NO_BLOCKS = ClassSample(used_slots=0, allocated_blocks=0)


@dataclass
class UntypedSample:
    """Untyped memory (soaheap::malloc) at one sample: blocks it holds, live
    allocations and the bytes handed out to them (size-class chunks and runs)."""

    blocks: int
    live_allocations: int
    bytes_reserved: int


@dataclass
class Sample:
    iteration: int
    time_s: float
    classes: Dict[str, ClassSample]
    # Optional in the file: absent when the program used no untyped memory.
    untyped: Optional[UntypedSample] = None
    # Optional in the file: absent in files written before heaps could grow.
    resident_bytes: Optional[int] = None  # memory the heap held: mapped data, headers, bitmaps
    mapped_blocks: Optional[int] = None  # blocks with memory: free, allocated or untyped

    def of(self, class_name: str) -> ClassSample:
        return self.classes.get(class_name, NO_BLOCKS)


@dataclass
class DefragRun:
    iteration: int
    time_s: float
    class_name: str
    passes: int
    blocks_freed: int
    objects_moved: int
    fragmentation_before: float
    fragmentation_after: float
    phase_ms: Dict[str, float]  # one entry per name in DEFRAG_PHASES

    @property
    def total_ms(self) -> float:
        return self.phase_ms["total"]


@dataclass
class RunEnd:
    iterations: int
    total_time_s: float
    defrag_time_s: float


@dataclass
class Profile:
    path: str
    header: ProfileHeader
    samples: List[Sample]
    defrag_runs: List[DefragRun]
    end: Optional[RunEnd]
    # Problems the reader tolerated (cut-off run); main() prints them.
    warnings: List[str] = field(default_factory=list)

    @property
    def runtime_s(self) -> float:
        """Run time from the end line, or up to the last sample of a cut-off run."""
        if self.end is not None:
            return self.end.total_time_s
        if self.samples:
            return self.samples[-1].time_s
        return 0.0


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Location:
    """Where in the input a record came from, for error messages."""

    path: str
    line: int

    def error(self, message: str) -> ProfileError:
        return ProfileError(f"{self.path}:{self.line}: {message}")


def _is_integer(value) -> bool:
    # bool is a subclass of int in Python, but `true` is no count in JSON.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (_is_integer(value) or isinstance(value, float)) and math.isfinite(value)


def _required(record: dict, key: str, what: str, where: _Location):
    if key not in record:
        raise where.error(f"{what} has no '{key}'")
    return record[key]


def _count(record: dict, key: str, what: str, where: _Location, minimum: int = 0) -> int:
    value = _required(record, key, what, where)
    if not _is_integer(value) or value < minimum:
        raise where.error(f"{what}: '{key}' must be an integer >= {minimum}, got {json.dumps(value)}")
    return value


def _amount(record: dict, key: str, what: str, where: _Location) -> float:
    value = _required(record, key, what, where)
    if not _is_number(value) or value < 0:
        raise where.error(f"{what}: '{key}' must be a non-negative number, got {json.dumps(value)}")
    return value


def _fraction(record: dict, key: str, what: str, where: _Location) -> float:
    value = _amount(record, key, what, where)
    if value > 1:
        raise where.error(f"{what}: '{key}' must be between 0 and 1, got {json.dumps(value)}")
    return value


def _text(record: dict, key: str, what: str, where: _Location) -> str:
    value = _required(record, key, what, where)
    if not isinstance(value, str) or not value:
        raise where.error(f"{what}: '{key}' must be a non-empty string, got {json.dumps(value)}")
    return value


def _object(record: dict, key: str, what: str, where: _Location) -> dict:
    value = _required(record, key, what, where)
    if not isinstance(value, dict):
        raise where.error(f"{what}: '{key}' must be a JSON object, got {json.dumps(value)}")
    return value


def _reject_non_finite(constant: str):
    raise ValueError(f"{constant} is not valid JSON")


def _decode_json_object(raw_line: bytes) -> dict:
    """Decodes one line; ValueError says what is wrong with it."""
    try:
        record = json.loads(raw_line.decode("utf-8"), parse_constant=_reject_non_finite)
    except json.JSONDecodeError as error:
        # Its own message says "line 1", which means nothing to the user here.
        raise ValueError(f"invalid JSON at column {error.colno}: {error.msg}") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    return record


def _parse_header(record: dict, where: _Location) -> ProfileHeader:
    format_name = record.get("format")
    if format_name != FORMAT_NAME:
        raise where.error(
            f"not a {FORMAT_NAME} file: the first line must be a header with "
            f"\"format\":\"{FORMAT_NAME}\", got format {json.dumps(format_name)}"
        )
    version = record.get("version")
    if not _is_integer(version) or version != FORMAT_VERSION:
        raise where.error(
            f"unsupported format version {json.dumps(version)}; this tool reads version {FORMAT_VERSION}"
        )
    what = "header"
    class_records = _required(record, "classes", what, where)
    if not isinstance(class_records, list) or not class_records:
        raise where.error("header: 'classes' must be a non-empty JSON array")
    classes = [_parse_class_info(entry, index, where) for index, entry in enumerate(class_records)]
    for index, info in enumerate(classes):
        for earlier in classes[:index]:
            if earlier.name == info.name:
                raise where.error(f"header: class name {info.name!r} is declared twice")
            if earlier.id == info.id:
                raise where.error(f"header: class id {info.id} is used by {earlier.name!r} and {info.name!r}")
    config = record.get("config", {})
    if not isinstance(config, dict):
        raise where.error(f"header: 'config' must be a JSON object, got {json.dumps(config)}")
    max_bytes = _count(record, "max_bytes", what, where, minimum=1) if "max_bytes" in record else None
    return ProfileHeader(
        application=_text(record, "application", what, where),
        backend=_text(record, "backend", what, where),
        device=_text(record, "device", what, where),
        heap_bytes=_count(record, "heap_bytes", what, where, minimum=1),
        block_bytes=_count(record, "block_bytes", what, where, minimum=1),
        classes=classes,
        config=config,
        max_bytes=max_bytes,
    )


def _parse_class_info(entry, index: int, where: _Location) -> ClassInfo:
    what = f"header class #{index}"
    if not isinstance(entry, dict):
        raise where.error(f"{what} must be a JSON object, got {json.dumps(entry)}")
    abstract = entry.get("abstract", False)
    if not isinstance(abstract, bool):
        raise where.error(f"{what}: 'abstract' must be true or false, got {json.dumps(abstract)}")
    name = _text(entry, "name", what, where)
    # An abstract class never owns a block, so its capacity is not used.
    capacity = _count(entry, "capacity", f"class {name!r}", where, minimum=0 if abstract else 1)
    object_bytes = None
    if "object_bytes" in entry:
        object_bytes = _count(entry, "object_bytes", f"class {name!r}", where, minimum=0 if abstract else 1)
    return ClassInfo(id=_count(entry, "id", what, where), name=name, capacity=capacity, abstract=abstract,
                     object_bytes=object_bytes)


def _class_for(name: str, header: ProfileHeader, where: _Location) -> ClassInfo:
    info = header.class_named(name)
    if info is None:
        declared = ", ".join(known.name for known in header.classes)
        raise where.error(f"unknown class {name!r} (the header declares: {declared})")
    return info


def _parse_class_sample(name: str, stats, header: ProfileHeader, where: _Location) -> ClassSample:
    info = _class_for(name, header, where)
    what = f"sample of class {name!r}"
    if not isinstance(stats, dict):
        raise where.error(f"{what} must be a JSON object, got {json.dumps(stats)}")
    sample = ClassSample(
        used_slots=_count(stats, "used_slots", what, where),
        allocated_blocks=_count(stats, "allocated_blocks", what, where),
        active_blocks=_count(stats, "active_blocks", what, where),
        candidate_blocks=_count(stats, "candidate_blocks", what, where),
    )
    allocated_slots = _count(stats, "allocated_slots", what, where)
    recorded_fragmentation = _fraction(stats, "fragmentation", what, where)

    # The redundant fields let us catch a writer that disagrees with itself.
    if info.abstract and (sample.allocated_blocks or sample.used_slots):
        raise where.error(f"{what}: abstract class cannot own blocks or objects")
    if allocated_slots != sample.allocated_blocks * info.capacity:
        raise where.error(
            f"{what}: allocated_slots {allocated_slots} is not allocated_blocks "
            f"{sample.allocated_blocks} x capacity {info.capacity}"
        )
    if sample.used_slots > allocated_slots:
        raise where.error(f"{what}: used_slots {sample.used_slots} exceeds allocated_slots {allocated_slots}")
    if sample.active_blocks > sample.allocated_blocks:
        raise where.error(
            f"{what}: active_blocks {sample.active_blocks} exceeds allocated_blocks {sample.allocated_blocks}")
    if sample.candidate_blocks > sample.active_blocks:
        raise where.error(
            f"{what}: candidate_blocks {sample.candidate_blocks} exceeds active_blocks {sample.active_blocks}")
    expected_fragmentation = _slot_fragmentation(sample.used_slots, allocated_slots)
    if abs(recorded_fragmentation - expected_fragmentation) > FRAGMENTATION_TOLERANCE:
        raise where.error(
            f"{what}: fragmentation {recorded_fragmentation} does not match "
            f"1 - used_slots/allocated_slots = {expected_fragmentation:.6g}"
        )
    return sample


def _slot_fragmentation(used_slots: int, allocated_slots: int) -> float:
    return 1.0 - used_slots / allocated_slots if allocated_slots else 0.0


def _parse_sample(record: dict, header: ProfileHeader, where: _Location) -> Sample:
    what = "sample line"
    class_records = _object(record, "classes", what, where)
    untyped = None
    if "untyped" in record:
        untyped_record = _object(record, "untyped", what, where)
        untyped_what = "untyped statistics of a sample line"
        untyped = UntypedSample(
            blocks=_count(untyped_record, "blocks", untyped_what, where),
            live_allocations=_count(untyped_record, "live_allocations", untyped_what, where),
            bytes_reserved=_count(untyped_record, "bytes_reserved", untyped_what, where),
        )
    # Heap-wide figures that files written before heaps could grow do not have.
    resident_bytes = _count(record, "resident_bytes", what, where) if "resident_bytes" in record else None
    mapped_blocks = _count(record, "mapped_blocks", what, where) if "mapped_blocks" in record else None
    return Sample(
        iteration=_count(record, "iteration", what, where),
        time_s=_amount(record, "time_s", what, where),
        classes={
            name: _parse_class_sample(name, stats, header, where)
            for name, stats in class_records.items()
        },
        untyped=untyped,
        resident_bytes=resident_bytes,
        mapped_blocks=mapped_blocks,
    )


def _parse_defrag(record: dict, header: ProfileHeader, where: _Location) -> DefragRun:
    what = "defrag line"
    class_name = _text(record, "class", what, where)
    if _class_for(class_name, header, where).abstract:
        raise where.error(f"{what}: class {class_name!r} is abstract and cannot be defragmented")
    phase_records = _object(record, "ms", what, where)
    return DefragRun(
        iteration=_count(record, "iteration", what, where),
        time_s=_amount(record, "time_s", what, where),
        class_name=class_name,
        passes=_count(record, "passes", what, where),
        blocks_freed=_count(record, "blocks_freed", what, where),
        objects_moved=_count(record, "objects_moved", what, where),
        fragmentation_before=_fraction(record, "fragmentation_before", what, where),
        fragmentation_after=_fraction(record, "fragmentation_after", what, where),
        phase_ms={phase: _amount(phase_records, phase, f"{what} 'ms'", where) for phase in DEFRAG_PHASES},
    )


def _parse_end(record: dict, where: _Location) -> RunEnd:
    what = "end line"
    return RunEnd(
        iterations=_count(record, "iterations", what, where),
        total_time_s=_amount(record, "total_time_s", what, where),
        defrag_time_s=_amount(record, "defrag_time_s", what, where),
    )


def load_profile(path: str) -> Profile:
    """Reads and validates a profile file.

    Raises ProfileError naming file and line for anything malformed.  What a
    run that was cut off leaves behind (no end line, a half-written last line)
    is accepted and noted in Profile.warnings.
    """
    try:
        with open(path, "rb") as stream:
            content = stream.read()
    except OSError as error:
        raise ProfileError(f"{path}: cannot read: {error.strerror}") from None

    # Every complete line ends with a newline; only the last line can lack
    # one, and then the writer stopped while writing it.
    raw_lines = content.split(b"\n")
    last_line_is_incomplete = raw_lines[-1] != b""
    if not last_line_is_incomplete:
        raw_lines.pop()

    header: Optional[ProfileHeader] = None
    samples: List[Sample] = []
    defrag_runs: List[DefragRun] = []
    end: Optional[RunEnd] = None
    warnings: List[str] = []

    for line_number, raw_line in enumerate(raw_lines, start=1):
        if not raw_line.strip():
            continue
        where = _Location(path, line_number)
        if end is not None:
            raise where.error("unexpected line after the end line")
        try:
            record = _decode_json_object(raw_line)
        except ValueError as problem:
            if last_line_is_incomplete and line_number == len(raw_lines) and header is not None:
                warnings.append(
                    f"{path}:{line_number}: ignoring incomplete last line (the run stopped while writing it)")
                break
            if header is None:
                raise where.error(
                    f"not a {FORMAT_NAME} file: the first line is not a JSON header ({problem})") from None
            raise where.error(f"malformed line: {problem}") from None

        if header is None:
            header = _parse_header(record, where)
            continue
        line_type = _required(record, "type", "line", where)
        if line_type == "sample":
            sample = _parse_sample(record, header, where)
            if samples and sample.iteration < samples[-1].iteration:
                raise where.error(
                    f"sample iteration {sample.iteration} comes after iteration {samples[-1].iteration}; "
                    "samples must be in iteration order"
                )
            samples.append(sample)
        elif line_type == "defrag":
            defrag_runs.append(_parse_defrag(record, header, where))
        elif line_type == "end":
            end = _parse_end(record, where)
        else:
            raise where.error(f"unknown line type {json.dumps(line_type)} (expected \"sample\", \"defrag\" or \"end\")")

    if header is None:
        raise ProfileError(f"{path}:1: empty file; expected a {FORMAT_NAME} header line")
    profile = Profile(path=path, header=header, samples=samples, defrag_runs=defrag_runs, end=end, warnings=warnings)
    if end is None and samples:
        profile.warnings.append(
            f"{path}: no end line, the run stopped early; runtime taken from the last sample "
            f"({profile.runtime_s:g} s)"
        )
    elif end is None:
        profile.warnings.append(f"{path}: no end line and no samples, the run stopped before its first sample")
    return profile


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


class ProfileWriter:
    """Writes a profile file in the format that load_profile() reads.

    Each line is flushed as soon as it is written, like the C++ profiler does,
    so that a run that dies leaves a readable file behind.
    """

    def __init__(self, path: str, header: ProfileHeader):
        self._header = header
        self._stream = open(path, "w", encoding="utf-8")
        record = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "application": header.application,
            "backend": header.backend,
            "device": header.device,
            "heap_bytes": header.heap_bytes,
        }
        if header.max_bytes is not None:
            record["max_bytes"] = header.max_bytes
        record["block_bytes"] = header.block_bytes
        record["classes"] = [self._class_record(info) for info in header.classes]
        record["config"] = header.config
        self._write_line(record)

    @staticmethod
    def _class_record(info: ClassInfo) -> dict:
        record = {"id": info.id, "name": info.name, "capacity": info.capacity, "abstract": info.abstract}
        if info.object_bytes is not None:
            record["object_bytes"] = info.object_bytes
        return record

    def write_sample(self, sample: Sample) -> None:
        class_records = {}
        for name, stats in sample.classes.items():
            info = self._header.class_named(name)
            if info is None:
                raise ValueError(f"class {name!r} is not declared in the header")
            allocated_slots = stats.allocated_blocks * info.capacity
            class_records[name] = {
                "used_slots": stats.used_slots,
                "allocated_slots": allocated_slots,
                "allocated_blocks": stats.allocated_blocks,
                "fragmentation": _slot_fragmentation(stats.used_slots, allocated_slots),
                "active_blocks": stats.active_blocks,
                "candidate_blocks": stats.candidate_blocks,
            }
        record = {"type": "sample", "iteration": sample.iteration, "time_s": sample.time_s}
        if sample.resident_bytes is not None:
            record["resident_bytes"] = sample.resident_bytes
        if sample.mapped_blocks is not None:
            record["mapped_blocks"] = sample.mapped_blocks
        record["classes"] = class_records
        if sample.untyped is not None:
            record["untyped"] = {"blocks": sample.untyped.blocks,
                                 "live_allocations": sample.untyped.live_allocations,
                                 "bytes_reserved": sample.untyped.bytes_reserved}
        self._write_line(record)

    def write_defrag(self, run: DefragRun) -> None:
        self._write_line({
            "type": "defrag",
            "iteration": run.iteration,
            "time_s": run.time_s,
            "class": run.class_name,
            "passes": run.passes,
            "blocks_freed": run.blocks_freed,
            "objects_moved": run.objects_moved,
            "fragmentation_before": run.fragmentation_before,
            "fragmentation_after": run.fragmentation_after,
            "ms": dict(run.phase_ms),
        })

    def write_end(self, end: RunEnd) -> None:
        self._write_line({"type": "end", "iterations": end.iterations, "total_time_s": end.total_time_s,
                          "defrag_time_s": end.defrag_time_s})

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> "ProfileWriter":
        return self

    def __exit__(self, *exception_info) -> None:
        self.close()

    def _write_line(self, record: dict) -> None:
        self._stream.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._stream.flush()


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPoint:
    """Memory of one class (or of several, summed) at one sample."""

    allocated_bytes: int
    allocated_slots: int
    used_bytes: float
    used_slots: int

    @property
    def fragmentation(self) -> Optional[float]:
        """Unused share of allocated memory; None when nothing is allocated.

        Summed over classes this weighs each class by its bytes, which equals
        the paper's F (mean free share over all allocated blocks) because all
        blocks have the same size.
        """
        if not self.allocated_bytes:
            return None
        return 1.0 - self.used_bytes / self.allocated_bytes

    def __add__(self, other: "MemoryPoint") -> "MemoryPoint":
        return MemoryPoint(
            allocated_bytes=self.allocated_bytes + other.allocated_bytes,
            allocated_slots=self.allocated_slots + other.allocated_slots,
            used_bytes=self.used_bytes + other.used_bytes,
            used_slots=self.used_slots + other.used_slots,
        )


EMPTY_MEMORY = MemoryPoint(allocated_bytes=0, allocated_slots=0, used_bytes=0.0, used_slots=0)


def class_memory(profile: Profile, info: ClassInfo) -> List[MemoryPoint]:
    """One MemoryPoint per sample for one class."""
    block_bytes = profile.header.block_bytes
    points = []
    for sample in profile.samples:
        stats = sample.of(info.name)
        points.append(MemoryPoint(
            allocated_bytes=stats.allocated_blocks * block_bytes,
            allocated_slots=stats.allocated_blocks * info.capacity,
            # A slot's share of its block: this is the memory objects occupy.
            used_bytes=stats.used_slots * block_bytes / info.capacity,
            used_slots=stats.used_slots,
        ))
    return points


def combined_memory(profile: Profile, classes: Sequence[ClassInfo]) -> List[MemoryPoint]:
    """One MemoryPoint per sample, summed over the given classes."""
    totals = [EMPTY_MEMORY] * len(profile.samples)
    for info in classes:
        totals = [total + point for total, point in zip(totals, class_memory(profile, info))]
    return totals


@dataclass
class MemoryTimeline:
    """What `plot --memory` draws: the heap's memory at each sample."""

    iterations: List[int]
    # Bytes the heap held (mapped data, headers and bitmaps); None at samples
    # without resident_bytes (files written before heaps could grow).
    resident_bytes: List[Optional[int]]
    # Allocated blocks of all classes and untyped blocks, times block_bytes.
    allocated_bytes: List[int]
    # Used slots times each class's object size (object_bytes in the header),
    # or times its slot's share of a block (block_bytes / capacity) for a
    # class whose size the file does not give.
    live_bytes: List[float]

    @property
    def has_resident(self) -> bool:
        return any(value is not None for value in self.resident_bytes)


def live_bytes_per_object(header: ProfileHeader, info: ClassInfo) -> float:
    """The object size of a class if the profile has it, else its slot's share of a block."""
    if info.object_bytes is not None:
        return info.object_bytes
    return header.block_bytes / info.capacity


def memory_timeline(profile: Profile) -> MemoryTimeline:
    """Resident, allocated and live bytes of the whole heap at each sample."""
    header = profile.header
    classes = header.concrete_classes
    object_bytes = {info.name: live_bytes_per_object(header, info) for info in classes}
    allocated_bytes = []
    live_bytes = []
    for sample in profile.samples:
        blocks = sum(sample.of(info.name).allocated_blocks for info in classes)
        if sample.untyped is not None:
            blocks += sample.untyped.blocks
        allocated_bytes.append(blocks * header.block_bytes)
        live_bytes.append(sum(sample.of(info.name).used_slots * object_bytes[info.name] for info in classes))
    return MemoryTimeline(
        iterations=[sample.iteration for sample in profile.samples],
        resident_bytes=[sample.resident_bytes for sample in profile.samples],
        allocated_bytes=allocated_bytes,
        live_bytes=live_bytes,
    )


@dataclass
class MemoryFigures:
    """One row of the summary table."""

    name: str
    peak_allocated_bytes: int
    peak_allocated_slots: int
    peak_used_bytes: float
    peak_used_slots: int
    # Over the samples where something is allocated; None if there are none.
    mean_fragmentation: Optional[float]
    max_fragmentation: Optional[float]
    defrag_runs: int
    defrag_ms: float
    # defrag_ms as a share of the run time; None when the run time is 0.
    defrag_share: Optional[float]


@dataclass
class RunSummary:
    path: str
    application: str
    backend: str
    device: str
    heap_bytes: int
    block_bytes: int
    samples: int
    # From the end line, or the last sample's iteration for a cut-off run.
    iterations: int
    runtime_s: float
    complete: bool  # whether the file has its end line
    # Defrag time as the end line reports it (None for a cut-off run); the
    # table's defrag_ms is the sum of the recorded defrag runs.
    reported_defrag_time_s: Optional[float]
    classes: List[MemoryFigures]
    total: MemoryFigures
    # Peaks of untyped memory over the samples; None when no sample has any.
    untyped: Optional["UntypedFigures"] = None


@dataclass
class UntypedFigures:
    peak_blocks: int
    peak_block_bytes: int
    peak_bytes_reserved: int
    peak_live_allocations: int


def _untyped_figures(profile: Profile) -> Optional[UntypedFigures]:
    samples = [sample.untyped for sample in profile.samples if sample.untyped is not None]
    if not samples:
        return None
    peak_blocks = max(sample.blocks for sample in samples)
    return UntypedFigures(
        peak_blocks=peak_blocks,
        peak_block_bytes=peak_blocks * profile.header.block_bytes,
        peak_bytes_reserved=max(sample.bytes_reserved for sample in samples),
        peak_live_allocations=max(sample.live_allocations for sample in samples),
    )


def _memory_figures(name: str, points: Sequence[MemoryPoint], defrag_runs: Sequence[DefragRun],
                    runtime_s: float) -> MemoryFigures:
    fragmentations = [point.fragmentation for point in points if point.fragmentation is not None]
    defrag_ms = sum((run.total_ms for run in defrag_runs), 0.0)
    return MemoryFigures(
        name=name,
        peak_allocated_bytes=max((point.allocated_bytes for point in points), default=0),
        peak_allocated_slots=max((point.allocated_slots for point in points), default=0),
        peak_used_bytes=max((point.used_bytes for point in points), default=0.0),
        peak_used_slots=max((point.used_slots for point in points), default=0),
        mean_fragmentation=sum(fragmentations) / len(fragmentations) if fragmentations else None,
        max_fragmentation=max(fragmentations) if fragmentations else None,
        defrag_runs=len(defrag_runs),
        defrag_ms=defrag_ms,
        defrag_share=defrag_ms / (runtime_s * 1000.0) if runtime_s > 0 else None,
    )


def summarize(profile: Profile) -> RunSummary:
    header = profile.header
    runtime_s = profile.runtime_s
    classes = header.concrete_classes
    rows = [
        _memory_figures(
            info.name,
            class_memory(profile, info),
            [run for run in profile.defrag_runs if run.class_name == info.name],
            runtime_s,
        )
        for info in classes
    ]
    total = _memory_figures("TOTAL", combined_memory(profile, classes), profile.defrag_runs, runtime_s)
    if profile.end is not None:
        iterations = profile.end.iterations
    else:
        iterations = profile.samples[-1].iteration if profile.samples else 0
    return RunSummary(
        path=profile.path,
        application=header.application,
        backend=header.backend,
        device=header.device,
        heap_bytes=header.heap_bytes,
        block_bytes=header.block_bytes,
        samples=len(profile.samples),
        iterations=iterations,
        runtime_s=runtime_s,
        complete=profile.end is not None,
        reported_defrag_time_s=profile.end.defrag_time_s if profile.end is not None else None,
        classes=rows,
        total=total,
        untyped=_untyped_figures(profile),
    )


@dataclass
class MetricComparison:
    metric: str  # key in the JSON output
    label: str  # row title in the text table
    unit: str  # "bytes", "s", "ms" or "fraction": how to print the values
    a: Optional[float]
    b: Optional[float]

    @property
    def ratio(self) -> Optional[float]:
        """b / a; None where it is undefined (a missing or zero)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a


def compare_summaries(summary_a: RunSummary, summary_b: RunSummary) -> List[MetricComparison]:
    def metric(key: str, label: str, unit: str, value_of) -> MetricComparison:
        return MetricComparison(key, label, unit, value_of(summary_a), value_of(summary_b))

    return [
        metric("peak_allocated_bytes", "peak allocated memory", "bytes", lambda s: s.total.peak_allocated_bytes),
        metric("peak_used_bytes", "peak used memory", "bytes", lambda s: s.total.peak_used_bytes),
        metric("runtime_s", "runtime", "s", lambda s: s.runtime_s),
        metric("mean_fragmentation", "mean fragmentation", "fraction", lambda s: s.total.mean_fragmentation),
        metric("defrag_ms", "defrag time", "ms", lambda s: s.total.defrag_ms),
    ]


# --------------------------------------------------------------------------
# Text output
# --------------------------------------------------------------------------


def _binary_unit(byte_count: float) -> Tuple[str, int]:
    """The largest binary unit in which byte_count is at least 1."""
    for exponent in range(len(BINARY_UNITS) - 1, 0, -1):
        if byte_count >= 1024 ** exponent:
            return BINARY_UNITS[exponent], 1024 ** exponent
    return BINARY_UNITS[0], 1


def format_bytes(byte_count: float) -> str:
    unit, unit_bytes = _binary_unit(byte_count)
    if unit_bytes == 1:
        return f"{byte_count:.0f} B"
    return f"{byte_count / unit_bytes:.1f} {unit}"


def _format_share(fraction: Optional[float], decimals: int = 1) -> str:
    return "n/a" if fraction is None else f"{fraction * 100:.{decimals}f}%"


def _format_table(header_cells: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Aligns columns: the first one to the left (names), the others to the right (numbers)."""
    widths = [max(len(row[column]) for row in [header_cells, *rows]) for column in range(len(header_cells))]

    def render(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])]
        parts += [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:])]
        return "  ".join(parts).rstrip()

    return "\n".join(render(cells) for cells in [header_cells, *rows])


def format_summary(summary: RunSummary) -> str:
    if summary.complete:
        completeness = "complete run"
    else:
        completeness = "no end line: the run stopped early"
    lines = [
        f"{summary.path}: {summary.application} on {summary.device} ({summary.backend} backend)",
        f"heap {format_bytes(summary.heap_bytes)} in {summary.block_bytes}-byte blocks; "
        f"{summary.samples} samples, {summary.iterations} iterations, "
        f"runtime {summary.runtime_s:.3f} s ({completeness})",
        "",
    ]
    header_cells = ["class", "peak allocated", "peak alloc slots", "peak used", "mean frag", "max frag",
                    "defrag runs", "defrag ms", "defrag share"]
    rows = [
        [
            figures.name,
            format_bytes(figures.peak_allocated_bytes),
            str(figures.peak_allocated_slots),
            format_bytes(figures.peak_used_bytes),
            _format_share(figures.mean_fragmentation),
            _format_share(figures.max_fragmentation),
            str(figures.defrag_runs),
            f"{figures.defrag_ms:.3f}",
            _format_share(figures.defrag_share, decimals=2),
        ]
        for figures in [*summary.classes, summary.total]
    ]
    lines.append(_format_table(header_cells, rows))
    if summary.untyped is not None:
        lines.append("")
        lines.append(f"untyped memory (soaheap::malloc): peak {summary.untyped.peak_blocks} blocks "
                     f"({format_bytes(summary.untyped.peak_block_bytes)}), peak reserved "
                     f"{format_bytes(summary.untyped.peak_bytes_reserved)}, peak "
                     f"{summary.untyped.peak_live_allocations} live allocations")
    return "\n".join(lines)


def _format_metric_value(value: Optional[float], unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "bytes":
        return format_bytes(value)
    if unit == "fraction":
        return _format_share(value)
    return f"{value:.3f} {unit}"


def format_comparison(summary_a: RunSummary, summary_b: RunSummary, metrics: Sequence[MetricComparison]) -> str:
    header_cells = ["metric", f"A: {summary_a.path}", f"B: {summary_b.path}", "B/A"]
    rows = [
        [
            metric.label,
            _format_metric_value(metric.a, metric.unit),
            _format_metric_value(metric.b, metric.unit),
            "n/a" if metric.ratio is None else f"{metric.ratio:.3f}",
        ]
        for metric in metrics
    ]
    return _format_table(header_cells, rows)


def comparison_as_json(summary_a: RunSummary, summary_b: RunSummary, metrics: Sequence[MetricComparison]) -> dict:
    return {
        "a": summary_a.path,
        "b": summary_b.path,
        "metrics": {metric.metric: {"a": metric.a, "b": metric.b, "ratio": metric.ratio} for metric in metrics},
    }


# --------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------

# Class colours leave out red (reserved for the fragmentation line) and grey
# and black (used for totals), so every line stays distinguishable.
CLASS_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink",
                "tab:olive", "tab:cyan")
FRAGMENTATION_COLOR = "tab:red"
RUN_COLORS = ("tab:blue", "tab:orange")  # runs A and B of a comparison


@dataclass(frozen=True)
class FigureOptions:
    output_path: str
    size_px: Tuple[int, int] = DEFAULT_FIGURE_SIZE_PX
    dpi: int = DEFAULT_DPI
    title: Optional[str] = None


def plot_format(output_path: str) -> str:
    """The image format implied by the file name; ProfileError if unsupported."""
    extension = os.path.splitext(output_path)[1].lower().lstrip(".")
    if extension not in PLOT_FORMATS:
        raise ProfileError(
            f"{output_path}: unsupported output format {extension or '(no extension)'!r}; "
            "name the file .png or .svg"
        )
    return extension


def _new_figure(options: FigureOptions):
    """A matplotlib Figure drawn with the Agg canvas, without pyplot's global state."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ProfileError(
            "plotting needs matplotlib, which this Python cannot import "
            "(on Debian/Ubuntu: apt install python3-matplotlib)"
        ) from None
    width_px, height_px = options.size_px
    # Agg truncates the canvas to whole pixels, and width/dpi*dpi can land a
    # hair below an integer; half a pixel more makes the PNG exactly as large
    # as requested.
    figure = Figure(
        figsize=((width_px + 0.5) / options.dpi, (height_px + 0.5) / options.dpi),
        dpi=options.dpi,
        layout="constrained",
    )
    FigureCanvasAgg(figure)
    return figure


def _save_figure(figure, options: FigureOptions) -> None:
    import matplotlib

    image_format = plot_format(options.output_path)
    # Text stays text in SVG (searchable, and tests can read the labels);
    # no date, so that the same profile gives the same file.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": FORMAT_NAME}):
        metadata = {"Date": None} if image_format == "svg" else None
        try:
            figure.savefig(options.output_path, format=image_format, metadata=metadata)
        except OSError as error:
            raise ProfileError(f"{options.output_path}: cannot write: {error.strerror}") from None


def _label_iteration_axis(axes) -> None:
    from matplotlib.ticker import MaxNLocator

    axes.set_xlabel("iteration")
    # Iterations are whole numbers; ticks like 2.5 would suggest otherwise.
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _place_legend(axes, handles, labels) -> None:
    # Below the plot, so that it never hides the curves.
    axes.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.12),
                ncol=min(4, max(1, len(labels))), frameon=False)


def select_classes(profile: Profile, class_names: Optional[Sequence[str]]) -> List[ClassInfo]:
    """The concrete classes to show: all of them, or the named ones in the given order."""
    if class_names is None:
        return profile.header.concrete_classes
    selected = []
    for name in class_names:
        info = profile.header.class_named(name)
        if info is None or info.abstract:
            available = ", ".join(known.name for known in profile.header.concrete_classes)
            raise ProfileError(f"--classes: {profile.path} has no concrete class {name!r} (it has: {available})")
        if info not in selected:
            selected.append(info)
    return selected


def plot_profile(profile: Profile, options: FigureOptions, class_names: Optional[Sequence[str]] = None) -> None:
    """Memory profile in the style of the CompactGpu paper's Figures 11-14.

    Stacked areas: memory that holds objects, per class.  Solid black line:
    allocated memory (all slots of allocated blocks); the gap between it and
    the areas is fragmentation.  Dashed verticals: defragmentation runs.
    Red line, right axis: fragmentation of the shown classes together.
    """
    plot_format(options.output_path)
    if not profile.samples:
        raise ProfileError(f"{profile.path}: no sample lines, nothing to plot")
    classes = select_classes(profile, class_names)
    color_of = {info.name: CLASS_COLORS[index % len(CLASS_COLORS)]
                for index, info in enumerate(profile.header.concrete_classes)}

    iterations = [sample.iteration for sample in profile.samples]
    used_per_class = [[point.used_bytes for point in class_memory(profile, info)] for info in classes]
    totals = combined_memory(profile, classes)
    allocated = [point.allocated_bytes for point in totals]
    peak_allocated = max(allocated)
    unit, unit_bytes = _binary_unit(max(peak_allocated, max(point.used_bytes for point in totals)))

    def in_unit(values: Iterable[float]) -> List[float]:
        return [value / unit_bytes for value in values]

    figure = _new_figure(options)
    memory_axes = figure.add_subplot()
    memory_axes.stackplot(
        iterations,
        *[in_unit(used) for used in used_per_class],
        labels=[f"{info.name} (used)" for info in classes],
        colors=[color_of[info.name] for info in classes],
        alpha=0.45,
    )
    memory_axes.plot(iterations, in_unit(allocated), color="black", linewidth=1.8, label="allocated (total)")
    memory_axes.axhline(peak_allocated / unit_bytes, color="black", linestyle=":", linewidth=1,
                        label=f"peak allocated ({format_bytes(peak_allocated)})")
    for info in classes:
        defrag_iterations = [run.iteration for run in profile.defrag_runs if run.class_name == info.name]
        if defrag_iterations:
            # x in data coordinates, y spanning the whole plot height.
            memory_axes.vlines(defrag_iterations, 0, 1, transform=memory_axes.get_xaxis_transform(),
                               colors=color_of[info.name], linestyles="--", linewidth=1,
                               label=f"defrag {info.name}")
    _label_iteration_axis(memory_axes)
    memory_axes.set_ylabel(f"memory ({unit})")
    memory_axes.set_ylim(bottom=0)
    memory_axes.margins(x=0)

    fragmentation_axes = memory_axes.twinx()
    fragmentation = [point.fragmentation if point.fragmentation is not None else math.nan for point in totals]
    fragmentation_axes.plot(iterations, fragmentation, color=FRAGMENTATION_COLOR, linewidth=1.2,
                            label="fragmentation (right axis)")
    fragmentation_axes.set_ylim(0, 1)
    fragmentation_axes.set_ylabel("fragmentation (unused share of allocated memory)", color=FRAGMENTATION_COLOR)
    fragmentation_axes.tick_params(axis="y", colors=FRAGMENTATION_COLOR)

    header = profile.header
    memory_axes.set_title(options.title or f"{header.application}: memory profile ({header.device}, {header.backend})")
    memory_handles, memory_labels = memory_axes.get_legend_handles_labels()
    fragmentation_handles, fragmentation_labels = fragmentation_axes.get_legend_handles_labels()
    _place_legend(memory_axes, memory_handles + fragmentation_handles, memory_labels + fragmentation_labels)
    _save_figure(figure, options)


RESIDENT_COLOR = "black"
ALLOCATED_COLOR = "tab:blue"
LIVE_COLOR = "tab:green"
DEFRAG_MARKER_COLOR = "tab:gray"


def _finish_memory_axes(figure, axes, unit: str, title: str, options: FigureOptions) -> None:
    """Iteration and memory axes from 0, the title, the legend; then writes the figure."""
    _label_iteration_axis(axes)
    axes.set_ylabel(f"memory ({unit})")
    axes.set_ylim(bottom=0)
    axes.margins(x=0)
    axes.set_title(title)
    handles, labels = axes.get_legend_handles_labels()
    _place_legend(axes, handles, labels)
    _save_figure(figure, options)


def _require_samples(*profiles: Profile) -> None:
    for profile in profiles:
        if not profile.samples:
            raise ProfileError(f"{profile.path}: no sample lines, nothing to plot")


def _timeline_peak(timeline: MemoryTimeline) -> float:
    return max(max(timeline.allocated_bytes), max(timeline.live_bytes),
               max((value for value in timeline.resident_bytes if value is not None), default=0))


def plot_memory(profile: Profile, options: FigureOptions) -> None:
    """Memory of the whole heap over iterations (see memory_timeline()).

    Black: resident bytes, what the heap holds (left out for files without
    resident_bytes).  Blue: allocated bytes, the blocks that classes and
    untyped memory use.  Green: live bytes, the objects.  Grey dashed
    verticals: defragmentation runs.
    """
    plot_format(options.output_path)
    _require_samples(profile)
    timeline = memory_timeline(profile)
    unit, unit_bytes = _binary_unit(_timeline_peak(timeline))

    figure = _new_figure(options)
    axes = figure.add_subplot()
    iterations = timeline.iterations
    if timeline.has_resident:
        # A sample without the key leaves a gap rather than a made-up value.
        axes.plot(iterations, [math.nan if value is None else value / unit_bytes for value in timeline.resident_bytes],
                  color=RESIDENT_COLOR, linewidth=1.8, label="resident (held by the heap)")
    axes.plot(iterations, [value / unit_bytes for value in timeline.allocated_bytes], color=ALLOCATED_COLOR,
              linewidth=1.5, label="allocated (blocks in use)")
    axes.plot(iterations, [value / unit_bytes for value in timeline.live_bytes], color=LIVE_COLOR, linewidth=1.2,
              label="live (objects)")
    defrag_iterations = sorted({run.iteration for run in profile.defrag_runs})
    if defrag_iterations:
        axes.vlines(defrag_iterations, 0, 1, transform=axes.get_xaxis_transform(), colors=DEFRAG_MARKER_COLOR,
                    linestyles="--", linewidth=1, label="defrag run")
    header = profile.header
    limit = f"; may grow to {format_bytes(header.max_bytes)}" if header.max_bytes is not None else ""
    _finish_memory_axes(figure, axes, unit, options.title or
                        f"{header.application}: memory over time ({header.device}, {header.backend}{limit})", options)


def plot_comparison(profile_a: Profile, profile_b: Profile, options: FigureOptions) -> None:
    """Allocated (solid) and used (dashed) memory of two runs over iterations."""
    plot_format(options.output_path)
    _require_samples(profile_a, profile_b)
    series = []
    for letter, profile in (("A", profile_a), ("B", profile_b)):
        totals = combined_memory(profile, profile.header.concrete_classes)
        series.append((f"{letter}: {os.path.basename(profile.path)}",
                       [sample.iteration for sample in profile.samples],
                       [point.allocated_bytes for point in totals],
                       [point.used_bytes for point in totals]))
    unit, unit_bytes = _binary_unit(max(max(allocated + used) for _, _, allocated, used in series))

    figure = _new_figure(options)
    axes = figure.add_subplot()
    for (run_label, iterations, allocated, used), color in zip(series, RUN_COLORS):
        axes.plot(iterations, [value / unit_bytes for value in allocated], color=color, linewidth=1.8,
                  label=f"{run_label} allocated")
        axes.plot(iterations, [value / unit_bytes for value in used], color=color, linewidth=1.2,
                  linestyle="--", label=f"{run_label} used")
    _finish_memory_axes(figure, axes, unit, options.title or "allocated (solid) and used (dashed) memory: A vs B",
                        options)


def plot_memory_comparison(profile_a: Profile, profile_b: Profile, options: FigureOptions) -> None:
    """Resident (solid) and allocated (dashed) memory of two runs, and A's live bytes (dotted):
    e.g. a growing heap against a fixed one of the same program."""
    plot_format(options.output_path)
    _require_samples(profile_a, profile_b)
    timelines = [memory_timeline(profile_a), memory_timeline(profile_b)]
    unit, unit_bytes = _binary_unit(max(_timeline_peak(timeline) for timeline in timelines))

    figure = _new_figure(options)
    axes = figure.add_subplot()
    for letter, profile, timeline, color in zip("AB", (profile_a, profile_b), timelines, RUN_COLORS):
        run_label = f"{letter}: {os.path.basename(profile.path)}"
        if timeline.has_resident:
            axes.plot(timeline.iterations,
                      [math.nan if value is None else value / unit_bytes for value in timeline.resident_bytes],
                      color=color, linewidth=1.8, label=f"{run_label} resident")
        axes.plot(timeline.iterations, [value / unit_bytes for value in timeline.allocated_bytes], color=color,
                  linewidth=1.2, linestyle="--", label=f"{run_label} allocated")
    axes.plot(timelines[0].iterations, [value / unit_bytes for value in timelines[0].live_bytes], color=LIVE_COLOR,
              linewidth=1.2, linestyle=":", label="A: live (objects)")
    _finish_memory_axes(figure, axes, unit, options.title or "resident (solid) and allocated (dashed) memory: A vs B",
                        options)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


class _ArgumentParser(argparse.ArgumentParser):
    """Reports usage errors as one line, like every other error of the tool."""

    def error(self, message):
        raise ProfileError(f"{message} (see '{self.prog} --help')")


def _figure_size(text: str) -> Tuple[int, int]:
    width, separator, height = text.lower().partition("x")
    if not separator or not width.isdigit() or not height.isdigit():
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, e.g. 1200x700, got {text!r}")
    size = (int(width), int(height))
    if not all(1 <= side <= MAX_FIGURE_SIDE_PX for side in size):
        raise argparse.ArgumentTypeError(f"each side must be 1..{MAX_FIGURE_SIDE_PX} pixels, got {text!r}")
    return size


def _dots_per_inch(text: str) -> int:
    if not text.isdigit() or not 10 <= int(text) <= 1200:
        raise argparse.ArgumentTypeError(f"expected an integer between 10 and 1200, got {text!r}")
    return int(text)


def _class_list(text: str) -> List[str]:
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected class names separated by commas, got {text!r}")
    return names


def _add_figure_options(parser: argparse.ArgumentParser) -> None:
    default_width, default_height = DEFAULT_FIGURE_SIZE_PX
    parser.add_argument("--title", help="figure title (default: describes the run)")
    parser.add_argument("--size", type=_figure_size, default=DEFAULT_FIGURE_SIZE_PX, metavar="WxH",
                        help=f"figure size in pixels (default: {default_width}x{default_height}); "
                             "a PNG is exactly this large, an SVG this large at --dpi")
    parser.add_argument("--dpi", type=_dots_per_inch, default=DEFAULT_DPI,
                        help="dots per inch: font and line sizes scale with it (default: %(default)s)")


def build_argument_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog=TOOL_NAME,
        description="Summarise, plot and compare soaheap fragmentation profiles "
                    "(JSON Lines files written by the soaheap profiler; see FORMAT.md).",
        epilog="Exit status: 0 on success, 2 on bad input or arguments.",
    )
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    summary = subcommands.add_parser(
        "summary", help="per-class table of peak memory, fragmentation and defrag time",
        description="Print one row per class and a TOTAL row: peak allocated memory and slots, "
                    "peak used memory (bytes holding objects), mean and max fragmentation over the "
                    "samples where the class has blocks, number of defrag runs, time spent in them "
                    "and their share of the run time.")
    summary.add_argument("file", metavar="FILE", help="profile file to read")
    summary.add_argument("--json", action="store_true", help="print the figures as one JSON object instead of a table")

    plot = subcommands.add_parser(
        "plot", help="draw the memory profile of one run",
        description="Draw memory over iterations: stacked areas of used memory per class, a line of "
                    "allocated memory, dashed markers at defrag runs and fragmentation on a second "
                    "axis. With --memory, draw the whole heap's memory instead: resident, allocated "
                    "and live bytes.")
    plot.add_argument("file", metavar="FILE", help="profile file to read")
    plot.add_argument("-o", "--output", required=True, metavar="OUT",
                      help="image to write; the format follows the extension (.png or .svg)")
    plot.add_argument("--classes", type=_class_list, metavar="A,B",
                      help="show only these classes, comma separated (default: all concrete classes); "
                           "totals and fragmentation then cover only them")
    plot.add_argument("--memory", action="store_true",
                      help="draw memory over iterations instead: resident bytes (what the heap holds; "
                           "left out for profiles that do not record it), allocated bytes (blocks of all "
                           "classes and untyped blocks) and live bytes (used slots times the object size, "
                           "or times block_bytes/capacity where the profile has no object size); covers "
                           "the whole heap, so it does not take --classes")
    _add_figure_options(plot)

    compare = subcommands.add_parser(
        "compare", help="compare two runs, with ratios B/A",
        description="Print peak allocated memory, peak used memory, runtime, mean fragmentation and "
                    "defrag time of two runs and the ratio B/A of each (n/a where A is 0).")
    compare.add_argument("file_a", metavar="A", help="baseline profile")
    compare.add_argument("file_b", metavar="B", help="profile compared against A")
    compare.add_argument("-o", "--output", metavar="OUT",
                         help="also draw both runs' allocated and used memory over iterations into this "
                              "image (.png or .svg)")
    compare.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    compare.add_argument("--memory", action="store_true",
                         help="with --output: draw both runs' resident and allocated bytes (and A's live "
                              "bytes) instead, e.g. a growing heap against a fixed one")
    _add_figure_options(compare)
    return parser


def _load_reporting_warnings(path: str) -> Profile:
    profile = load_profile(path)
    for warning in profile.warnings:
        print(f"{TOOL_NAME}: warning: {warning}", file=sys.stderr)
    return profile


def _figure_options(arguments: argparse.Namespace) -> FigureOptions:
    return FigureOptions(output_path=arguments.output, size_px=arguments.size, dpi=arguments.dpi,
                         title=arguments.title)


def _run(arguments: argparse.Namespace) -> None:
    if arguments.command == "summary":
        summary = summarize(_load_reporting_warnings(arguments.file))
        if arguments.json:
            print(json.dumps(dataclasses.asdict(summary), indent=2))
        else:
            print(format_summary(summary))
    elif arguments.command == "plot":
        if arguments.memory and arguments.classes is not None:
            raise ProfileError("--classes does not go with --memory: the memory plot shows the whole heap")
        plot_format(arguments.output)  # before reading, so a typo fails fast
        profile = _load_reporting_warnings(arguments.file)
        if arguments.memory:
            if profile.samples and all(sample.resident_bytes is None for sample in profile.samples):
                print(f"{TOOL_NAME}: warning: {profile.path}: the samples record no resident_bytes "
                      "(written before heaps could grow); the plot has no resident line", file=sys.stderr)
            plot_memory(profile, _figure_options(arguments))
        else:
            plot_profile(profile, _figure_options(arguments), arguments.classes)
    elif arguments.command == "compare":
        if arguments.memory and arguments.output is None:
            raise ProfileError("--memory draws a figure: give it --output")
        if arguments.output is not None:
            plot_format(arguments.output)
        profile_a = _load_reporting_warnings(arguments.file_a)
        profile_b = _load_reporting_warnings(arguments.file_b)
        summary_a, summary_b = summarize(profile_a), summarize(profile_b)
        metrics = compare_summaries(summary_a, summary_b)
        if arguments.json:
            print(json.dumps(comparison_as_json(summary_a, summary_b, metrics), indent=2))
        else:
            print(format_comparison(summary_a, summary_b, metrics))
        if arguments.output is not None:
            if arguments.memory:
                plot_memory_comparison(profile_a, profile_b, _figure_options(arguments))
            else:
                plot_comparison(profile_a, profile_b, _figure_options(arguments))


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        _run(build_argument_parser().parse_args(argv))
    except ProfileError as error:
        print(f"{TOOL_NAME}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # Whoever read our output (e.g. `head`) stopped early: not an error.
        # Point stdout at /dev/null so Python's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_SUCCESS


if __name__ == "__main__":
    sys.exit(main())
