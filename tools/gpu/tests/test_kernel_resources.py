"""Tests of kernel-resources: parsing cuobjdump's -res-usage and -sass output and naming kernels."""

import os
import runpy
import types
import unittest

TOOL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernel-resources")
tool = types.SimpleNamespace(**runpy.run_path(TOOL))  # the script's functions, without running main

RES_USAGE = """
Fatbin elf code:
================
arch = sm_90
 Function _Z6kernelA:
  REG:40 STACK:88 SHARED:0 LOCAL:0 CONSTANT[0]:600 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z6kernelB:
  REG:72 STACK:0 SHARED:3360 LOCAL:0 CONSTANT[0]:536 TEXTURE:0 SURFACE:0 SAMPLER:0
"""

SASS = """
\t\tFunction : _Z6kernelA
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                 /* 0x00000a00ff017b82 */
                                                                          /* 0x000fe20000000800 */
        /*0010*/                   STL [R1+0x54], R0 ;                    /* 0x0000540001007387 */
        /*0020*/               @P0 STL.64 [R1+0x58], R2 ;                 /* 0x0000580201000387 */
        /*0030*/                   LDL R9, [R1+0x50] ;                    /* 0x0000500001097983 */
        /*10000*/                  EXIT ;                                 /* 0x000000000000794d */
\t\tFunction : _Z6kernelB
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;           /* 0x0000000402047981 */
        /*0010*/                   EXIT ;                                 /* 0x000000000000794d */
"""


class ParseTest(unittest.TestCase):
    def test_res_usage_gives_registers_and_stack_per_function(self):
        self.assertEqual(tool.parse_res_usage(RES_USAGE), {"_Z6kernelA": (40, 88), "_Z6kernelB": (72, 0)})

    def test_sass_counts_instructions_and_spills_with_predicates_and_long_offsets(self):
        counts = tool.parse_sass(SASS)
        self.assertEqual(counts["_Z6kernelA"], (5, 2, 1))  # five instructions (one at 0x10000), 2 STL, 1 LDL
        self.assertEqual(counts["_Z6kernelB"], (2, 0, 0))  # LDG is no local load


class NameTest(unittest.TestCase):
    def test_kernels_are_named_by_their_launch_template_and_method_or_functor(self):
        cases = [
            # a parallel_do kernel: by its method
            ("void soaheap::detail::for_each_counted_row_kernel<4, soaheap::detail::ParallelDoKernel<"
             "soaheap::HeapView<automaton::Cell>, automaton::Cell, automaton::Cell, &automaton::Cell::register_in, "
             "soaheap::detail::ArgumentPack<automaton::Cell**> > >(soaheap::detail::ParallelDoKernel<x>, "
             "unsigned long const*, unsigned long, unsigned long*)",
             "for_each_counted_row_kernel<4 Cell::register_in"),
            # a method template: by its method, not its template arguments
            ("void soaheap::detail::for_each_bounded_thread_kernel<6, soaheap::detail::ParallelDoKernel<"
             "soaheap::HeapView<automaton::Cell>, automaton::Alive, automaton::Alive, &(void automaton::Alive::"
             "create_candidates<soaheap::HeapView<automaton::Cell> >(soaheap::HeapView<automaton::Cell> const&, "
             "unsigned long)), soaheap::detail::ArgumentPack<unsigned long> > >(int)",
             "for_each_bounded_thread_kernel<6 Alive::create_candidates"),
            # any other kernel: by its functor
            ("void soaheap::detail::for_each_thread_kernel<soaheap::detail::StatisticsKernel<"
             "soaheap::HeapView<automaton::Cell> > >(soaheap::detail::StatisticsKernel<x>, unsigned long)",
             "for_each_thread_kernel StatisticsKernel"),
        ]
        for name, expected in cases:
            with self.subTest(expected=expected):
                self.assertEqual(tool.short_name(name), expected)

    def test_labels_tell_binaries_of_one_name_apart(self):
        self.assertEqual(tool.labels(["a/generation", "b/generation"]), ["a/generation", "b/generation"])
        self.assertEqual(tool.labels(["a/generation", "a/traffic"]), ["generation", "traffic"])


class TableTest(unittest.TestCase):
    def test_rows_align_kernels_across_binaries_and_filter(self):
        columns = [{"k Alive::update": [(40, 88, 100, 7, 9)], "k Cell::register_in": [(32, 0, 50, 0, 0)]},
                   {"k Alive::update": [(48, 40, 90, 3, 2)]}]
        lines = tool.table(["x/gen", "y/gen"], columns, "update")
        self.assertEqual(lines[0], "kernel | x/gen | y/gen")
        self.assertEqual(lines[2:], ["k Alive::update | 40/88/100/7/9 | 48/40/90/3/2"])
        lines = tool.table(["x/gen", "y/gen"], columns, "")
        self.assertIn("k Cell::register_in | 32/0/50/0/0 | -", lines)


if __name__ == "__main__":
    unittest.main()
