#!/usr/bin/env bash
# The distributed checks and the scaling table on a machine with several GPUs (issue 21), one
# process per GPU through mpirun. Usage: tools/gpu/distributed.sh BIN_DIR OUT_DIR [size]
# Writes OUT_DIR/distributed.log (everything) and OUT_DIR/scaling.jsonl (one JSON line per run).
set -u
bin="$1"; out="$2"; size="${3:-16384}"
mkdir -p "$out"; log="$out/distributed.log"; jsonl="$out/scaling.jsonl"
gpus=$(nvidia-smi -L | grep -c "^GPU")
mpi=(mpirun --allow-run-as-root -x NCCL_NVLS_ENABLE -x NCCL_DEBUG)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  echo "GPUs: $gpus, NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset}"
  echo "== migrate_nccl_test on $gpus ranks"; timeout 300 "${mpi[@]}" -np "$gpus" "$bin/migrate_nccl_test"
  for n in 1 "$gpus"; do
    echo "== particles (self-check: the same fingerprint for every rank count) on $n ranks"
    timeout 300 "${mpi[@]}" -np "$n" "$bin/particles" --backend cuda --transport nccl --size 256 --iterations 200 | tee -a "$jsonl"
    echo "== wa_tor_slabs 512 (self-check against the reference) on $n ranks"
    timeout 300 "${mpi[@]}" -np "$n" "$bin/wa_tor_slabs" --backend cuda --transport nccl --size 512 --iterations 100 | tee -a "$jsonl"
    echo "== wa_tor_slabs $size (strong scaling) on $n ranks"
    timeout 600 "${mpi[@]}" -np "$n" "$bin/wa_tor_slabs" --backend cuda --transport nccl --size "$size" --iterations 100 | tee -a "$jsonl"
    echo "== migrate_bench 100 M objects, 1 % per iteration, on $n ranks"
    timeout 300 "${mpi[@]}" -np "$n" "$bin/migrate_bench" --backend cuda --transport nccl --objects 100000000 --departures --placement blocks | tee -a "$jsonl"
  done
} >>"$log" 2>&1
echo "logs: $log, $jsonl"
