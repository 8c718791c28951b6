#!/usr/bin/env bash
# Several MPI processes on one GPU (issue 54): the cuda migration suite and both applications with
# `mpirun -np 2 ... --transport mpi`, their results compared with one rank (particles: the same
# fingerprint of every particle's bits; wa_tor_slabs: the same grid fingerprint, cell by cell, and
# each run's self-check against the single-heap reference), compute-sanitizer memcheck on every
# rank, and migrate_bench with in-process ranks and with 2 MPI processes (the migration's share of
# the iteration).
#
# Usage: tools/gpu/mpi-one-gpu.sh BIN_DIR [OUT_DIR]      (OUT_DIR defaults to $OUT)
# BIN_DIR holds migrate_mpi_test, particles, wa_tor_slabs and migrate_bench of a cuda build with
# MPI (cmake -DSOAHEAP_CUDA=ON; CMake reports "MPI transport ON").
# Writes OUT_DIR/mpi-one-gpu.log (everything, a verdict line per check and a summary at the end)
# and OUT_DIR/mpi-one-gpu.jsonl (the programs' result lines). Exit code: the number of failed checks.
set -u
bin="$1"; out="${2:-${OUT:?give OUT_DIR or set OUT}}"
mkdir -p "$out"; log="$out/mpi-one-gpu.log"; jsonl="$out/mpi-one-gpu.jsonl"
: >"$log"; : >"$jsonl"
mpi=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export SOAHEAP_MPI_TIMEOUT="${SOAHEAP_MPI_TIMEOUT:-120}"
memcheck=(compute-sanitizer --tool memcheck --error-exitcode 97 --leak-check full)
failures=0
verdict() {  # verdict NAME STATUS(0 = pass) [detail]
  if [ "$2" = 0 ]; then echo "PASS $1 ${3:-}"; else echo "FAIL $1 ${3:-}"; failures=$((failures + 1)); fi
}
# The result line of a run (the last line that is a JSON object), kept in the jsonl file.
result_line() { grep '^{' "$1" | tail -1 | tee -a "$jsonl"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2"; }

{
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  mpirun --version | head -1
  ompi_info --parsable --all 2>/dev/null | grep -m1 "mpi_built_with_cuda_support:value" || echo "ompi_info: no CUDA support line"
  echo "git: $(git -C "$(dirname "$0")/../.." rev-parse --short HEAD 2>/dev/null || echo unknown)"

  echo "== migrate_mpi_test --backend cuda, 2 processes on one GPU"
  timeout 600 "${mpi[@]}" "$bin/migrate_mpi_test" --backend cuda
  verdict migrate_mpi_test_cuda_np2 $?
  echo "== the same under compute-sanitizer memcheck, every rank"
  timeout 900 "${mpi[@]}" "${memcheck[@]}" "$bin/migrate_mpi_test" --backend cuda --gtest_filter=-*TimeOut*
  verdict migrate_mpi_test_cuda_np2_memcheck $?

  echo "== particles: one rank, then 2 MPI processes (bit-identical: the same fingerprint)"
  particles=(--backend cuda --size 256 --iterations 200)
  "$bin/particles" "${particles[@]}" --ranks 1 >"$out/particles_1.out" 2>&1; status_one=$?
  timeout 600 "${mpi[@]}" "$bin/particles" "${particles[@]}" --transport mpi >"$out/particles_2.out" 2>&1; status_two=$?
  cat "$out/particles_1.out" "$out/particles_2.out"
  one=$(result_line "$out/particles_1.out"); two=$(result_line "$out/particles_2.out")
  f1=$(field "$one" fingerprint); f2=$(field "$two" fingerprint)
  verdict particles_self_check_np1 $status_one "$(field "$one" self_check)"
  verdict particles_self_check_np2 $status_two "$(field "$two" self_check)"
  [ -n "$f1" ] && [ "$f1" = "$f2" ]; verdict particles_bit_identical $? "one rank $f1, two processes $f2"

  echo "== wa_tor_slabs 512: one rank, then 2 MPI processes (cell by cell: the same grid fingerprint)"
  wator=(--backend cuda --size 512 --iterations 100)
  "$bin/wa_tor_slabs" "${wator[@]}" --ranks 1 >"$out/wator_1.out" 2>&1; status_one=$?
  timeout 600 "${mpi[@]}" "$bin/wa_tor_slabs" "${wator[@]}" --transport mpi >"$out/wator_2.out" 2>&1; status_two=$?
  cat "$out/wator_1.out" "$out/wator_2.out"
  one=$(result_line "$out/wator_1.out"); two=$(result_line "$out/wator_2.out")
  g1=$(field "$one" state_fingerprint); g2=$(field "$two" state_fingerprint)
  verdict wa_tor_slabs_self_check_np1 $status_one "$(field "$one" self_check), mismatches $(field "$one" self_check_mismatches)"
  verdict wa_tor_slabs_self_check_np2 $status_two "$(field "$two" self_check), mismatches $(field "$two" self_check_mismatches)"
  [ -n "$g1" ] && [ "$g1" = "$g2" ]; verdict wa_tor_slabs_cell_by_cell $? "one rank $g1, two processes $g2"

  echo "== the applications under compute-sanitizer memcheck, every rank (small sizes)"
  timeout 900 "${mpi[@]}" "${memcheck[@]}" "$bin/particles" --backend cuda --transport mpi --size 64 --iterations 20
  verdict particles_np2_memcheck $?
  timeout 900 "${mpi[@]}" "${memcheck[@]}" "$bin/wa_tor_slabs" --backend cuda --transport mpi --size 96 --iterations 20
  verdict wa_tor_slabs_np2_memcheck $?

  echo "== migrate_bench: 100 M objects, 1 % leaving per iteration, recorded departures, fresh blocks"
  bench=(--backend cuda --objects 100000000 --fraction 0.01 --iterations 20 --departures --placement blocks)
  "$bin/migrate_bench" "${bench[@]}" --ranks 2 >"$out/bench_local.out" 2>&1; status_one=$?
  timeout 600 "${mpi[@]}" "$bin/migrate_bench" "${bench[@]}" --transport mpi >"$out/bench_mpi.out" 2>&1; status_two=$?
  cat "$out/bench_local.out" "$out/bench_mpi.out"
  one=$(result_line "$out/bench_local.out"); two=$(result_line "$out/bench_mpi.out")
  verdict migrate_bench_local_ranks2 $status_one "migration_share $(field "$one" migration_share)"
  verdict migrate_bench_mpi_np2 $status_two "migration_share $(field "$two" migration_share)"

  echo "== summary: $failures failed check(s)"
} >>"$log" 2>&1
grep -E "^(PASS|FAIL) |^== summary" "$log"
echo "log: $log, result lines: $jsonl"
exit "$failures"
