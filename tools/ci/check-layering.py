#!/usr/bin/env python3
"""Fails when a library header includes a header of a higher layer (docs/architecture.md).

Layers, bottom to top; a file may include its own module and any module of a lower rank:

  0  base        portability layer, tagged-pointer encoding
  0  config      the compiled configuration library (host C++ only; a separate bottom library)
  1  reflection  field DSL, compile-time class queries
  2  core        heap, blocks, bitmaps, allocation, parallel operations, statistics
  3  defrag      compaction, policies
  4  profiler    memory profiles
  4  distributed one heap per rank: migration of objects between ranks (NCCL, or in-process ranks)
  5  umbrella    soaheap/soaheap.cuh, the header applications include
  6  compat      DynaSOAr source compatibility (builds on the umbrella header)

Two modules of the same rank may not include each other. Programs (examples/, tools/, tests/) sit
above everything and are not checked. Also checked: toml++ is included only by config/src, the one
place compiled by the C++ compiler alone (nvcc cannot compile it), and nlohmann-json only by the
compiled libraries' src/ folders (config/src, profiler/src), so no library header brings it into a
CUDA source; and a module's detail/ headers are included by that module only, except the named
access points of ACCESS_POINTS (each for the modules listed with it); and a heap's internals
(detail::internals() and what it returns) are used only by the modules of INTERNALS_MODULES, never
by the umbrella header or the examples, which see the public HeapView.

Usage: tools/ci/check-layering.py [repository root]   (exit status 1 on a violation)
"""
import pathlib
import re
import sys

# A module's detail/ headers are its own: another module includes one only through a named access
# point, listed here with the modules that may use it (each with its reason).
ACCESS_POINTS = {
    # The SOA field copy: compaction moves objects with it, migration packs and unpacks them.
    "soaheap/core/detail/field_copy.cuh": {"defrag", "distributed"},
    # The heap's private state, for the layers that operate on a heap from outside it.
    "soaheap/core/detail/heap_internals.cuh": {"defrag", "profiler", "distributed", "compat"},
    # Grid kernels and the per-operation timer that compaction runs reuse.
    "soaheap/core/detail/kernels.cuh": {"defrag"},
    "soaheap/core/detail/operation_timer.cuh": {"defrag"},
    # The DynaSOAr shim's allocator handle keeps the host one operation ahead of the GPU.
    "soaheap/core/detail/operations_ahead.cuh": {"compat"},
}
DETAIL_OF_INCLUDE = re.compile(r"^soaheap/([a-z_]+)/detail/")
# A heap's internals (HeapInternals behind HeapView) are reached only through detail::internals();
# these modules may call it (core/include/soaheap/core/heap_view.cuh). Examples and other
# programs use the public HeapView, so they are checked too; tests may look inside.
INTERNALS_USE = re.compile(r"\bdetail::(internals|internals_t|InternalsAccess|HeapInternals)\b")
INTERNALS_MODULES = {"core", "defrag", "profiler", "distributed", "compat"}
INTERNALS_CHECKED_PROGRAMS = ["examples", "umbrella"]

RANKS = {"base": 0, "config": 0, "reflection": 1, "core": 2, "defrag": 3, "profiler": 4, "distributed": 4, "umbrella": 5, "compat": 6}
SOURCE_SUFFIXES = {".hpp", ".cuh", ".h", ".cpp", ".cu", ".inc"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
MODULE_OF_INCLUDE = re.compile(r"^soaheap/([a-z_]+)/")


def module_of_include(target):
    """The module a `soaheap/...` include path names, or None for other libraries."""
    if target == "soaheap/soaheap.cuh":
        return "umbrella"
    match = MODULE_OF_INCLUDE.match(target)
    return match.group(1) if match else None


def module_of_file(root, path):
    """The module a library file belongs to: the top folder it lies in."""
    return path.relative_to(root).parts[0]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2]).resolve()
    problems = []
    files = 0
    for module in RANKS:
        for path in sorted((root / module).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            files += 1
            source_module = module_of_file(root, path)
            text = path.read_text(encoding="utf-8")
            for match in INCLUDE.finditer(text):
                kind, target = match.groups()
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path.relative_to(root)}:{line}"
                if target.startswith("toml++/") and path.relative_to(root).parts[:2] != ("config", "src"):
                    problems.append(f"{where}: includes <{target}>; only config/src may include toml++")
                if target.startswith("nlohmann/") and path.relative_to(root).parts[1:2] != ("src",):
                    problems.append(f"{where}: includes <{target}>; only the compiled libraries' src/ may include "
                                    "nlohmann-json (headers reach CUDA sources through the umbrella header)")
                if kind == '"':
                    resolved = (path.parent / target).resolve()
                    if not resolved.is_relative_to(root):
                        continue
                    target_module = module_of_file(root, resolved)
                    shown = str(resolved.relative_to(root))
                else:
                    target_module = module_of_include(target)
                    shown = target
                if target_module is None or target_module == source_module:
                    continue
                detail = DETAIL_OF_INCLUDE.match(shown if kind == "<" else "")
                if kind == '"' and "/detail/" in shown:
                    detail = True
                if detail and source_module not in ACCESS_POINTS.get(shown, set()):
                    problems.append(f"{where}: {source_module} includes {shown}, a detail header of {target_module} "
                                    "that is no named access point for it (ACCESS_POINTS)")
                if target_module not in RANKS:
                    problems.append(f"{where}: includes {shown} of unknown module '{target_module}'")
                elif RANKS[target_module] >= RANKS[source_module]:
                    problems.append(
                        f"{where}: {source_module} (layer {RANKS[source_module]}) includes {shown} of "
                        f"{target_module} (layer {RANKS[target_module]}); includes must run downward")
    for folder in sorted(set(RANKS) | set(INTERNALS_CHECKED_PROGRAMS)):
        if folder in INTERNALS_MODULES:
            continue
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            for match in INTERNALS_USE.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                problems.append(f"{path.relative_to(root)}:{line}: uses {match.group(0)}; only "
                                f"{', '.join(sorted(INTERNALS_MODULES))} reach a heap's internals")
    if files == 0:
        problems.append(f"no library files found under {root}")
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"check-layering: {files} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
