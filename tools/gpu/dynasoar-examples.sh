#!/usr/bin/env bash
# DynaSOAr's own example applications, built UNCHANGED against soaheap's DynaSOAr shim (issue 11),
# then run with their default parameters. Their sources are not part of this repository: place a
# checkout of prg-titech/dynasoar (or just its example/ folder) somewhere and pass that directory.
#
# Usage (repo root):  tools/gpu/dynasoar-examples.sh DYNASOAR_DIR [build|run|all]   (default: all)
#   build: compiles every example into build-dynasoar-examples/ (or $BIN_DIR), in parallel
#   run:   runs the binaries found there, each under `timeout $TIMEOUT` (default 45 s)
# Writes "$OUT"/dynasoar-examples.log (build output, each program's printed result, exit status and
# wall time) and "$OUT"/dynasoar-examples.json (one JSON line per program).
# Environment: OUT (default .), BIN_DIR, TIMEOUT, JOBS (parallel nvcc, default 8), NVCC,
#   EXTRA_FLAGS (e.g. -DPARAM_SIZE_X=512 to shrink a problem), GOL_PGM (a game-of-life .pgm data
#   set; without it a 2000x2000 random one is generated), WITH_DEBUG=1 (also build and run wa-tor,
#   collision and nbody without -DNDEBUG, which prints their checksums).
# The programs' default sizes are those of the DynaSOAr paper: several run for minutes with their
# default iteration counts, so the default TIMEOUT stops them (a timed-out run is recorded, not an
# error); raise TIMEOUT for full runs. Build ~2 min on 16 cores, runs at most 10 x TIMEOUT.
# Exit status: non-zero when a build failed or a program exited with an error other than the timeout.
set -uo pipefail
src="${1:?usage: $0 DYNASOAR_DIR [build|run|all]}"
mode="${2:-all}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:-.}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
bin="${BIN_DIR:-$repo/build-dynasoar-examples}"  # build* is git-ignored; not under $OUT
log="$out/dynasoar-examples.log"
json="$out/dynasoar-examples.json"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
timeout_s="${TIMEOUT:-45}"
jobs="${JOBS:-8}"
mkdir -p "$bin"
src="$(cd "$src" && pwd)"
status=0

# The include path of soaheap's library target (every module's include folder) with the shim first;
# then DynaSOAr's own example flags: their configuration folder for allocator_config.h and the
# checkout root (their build uses -I.), C++17 instead of their C++11 (soaheap needs it).
includes="-I$repo/compat/shim"
for module_include in "$repo"/*/include; do
  includes="$includes -I$module_include"
done
flags="-std=c++17 -arch=sm_90 --extended-lambda --expt-relaxed-constexpr -lineinfo -maxrregcount=64 $includes"
flags="$flags -I$src/example/configuration/dynasoar -I$src ${EXTRA_FLAGS:-}"
libs="-lspdlog -lfmt"

# name | main source | extra sources | options (their build_scripts/build_*.sh defaults)
programs=(
  "wator|example/wa-tor/dynasoar/wator.cu||-O3 -DNDEBUG"
  "wator_defrag|example/wa-tor/dynasoar/wator.cu||-O3 -DNDEBUG -DOPTION_DEFRAG"
  "collision|example/collision/dynasoar/collision.cu||-O3 -DNDEBUG"
  "structure|example/structure/dynasoar/structure.cu|example/structure/dataset.cc|-O3 -DNDEBUG"
  "nbody|example/nbody/dynasoar/nbody.cu||-O3 -DNDEBUG"
  "barnes_hut|example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DNDEBUG"
  "traffic|example/traffic/dynasoar/traffic.cu||-O3 -DNDEBUG"
  "gol|example/game-of-life/dynasoar/gol.cu|example/game-of-life/dataset_loader.cu|-O3 -DNDEBUG"
  "sugarscape|example/sugarscape/dynasoar/sugarscape.cu||-O3 -DNDEBUG"
  "generation|example/generation/dynasoar/generation.cu|example/generation/dataset_loader.cu|-O3 -DNDEBUG"
)
if [ "${WITH_DEBUG:-0}" = 1 ]; then
  programs+=("wator_debug|example/wa-tor/dynasoar/wator.cu||-O3"
             "collision_debug|example/collision/dynasoar/collision.cu||-O3"
             "nbody_debug|example/nbody/dynasoar/nbody.cu||-O3")
fi

build_one() {  # entry
  IFS='|' read -r name main extra opts <<<"$1"
  local extra_paths=""
  [ -n "$extra" ] && extra_paths="$src/$extra"
  local cmd="$nvcc $flags $opts $src/$main $extra_paths -o $bin/$name $libs"
  {
    echo "### build $name: $cmd"
    $cmd 2>&1 | grep -v -e 'fmt/core.h' -e '^ *|' -e 'inlined from' -e '^\s*\^' -e '~~~' || true
    [ -x "$bin/$name" ] && echo "### build $name: ok" || echo "### build $name: FAILED"
  } >"$bin/$name.buildlog" 2>&1
}
export -f build_one
export nvcc flags bin src libs

if [ "$mode" = build ] || [ "$mode" = all ]; then
  : >"$log"
  printf '%s\n' "${programs[@]}" | xargs -P "$jobs" -I{} bash -c 'build_one "$@"' _ {}
  for entry in "${programs[@]}"; do
    name="${entry%%|*}"
    cat "$bin/$name.buildlog" >>"$log"
    [ -x "$bin/$name" ] || status=1
  done
fi

if [ "$mode" = run ] || [ "$mode" = all ]; then
  [ "$mode" = run ] && : >"$log"
  : >"$json"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
  pgm="${GOL_PGM:-}"
  if [ -z "$pgm" ]; then  # their loader: "P2", a comment line, "cols rows", then 0 = alive
    pgm="$bin/gol-random.pgm"
    awk 'BEGIN { srand(42); print "P2"; print "# random, soaheap"; print "2000 2000";
                 for (i = 0; i < 2000 * 2000; ++i) printf "%d%s", (rand() < 0.1 ? 0 : 1), (i % 2000 == 1999 ? "\n" : " ") }' >"$pgm"
  fi
  for entry in "${programs[@]}"; do
    name="${entry%%|*}"
    [ -x "$bin/$name" ] || { echo "### run $name: no binary" >>"$log"; continue; }
    args=()
    [[ "$name" == gol* ]] && args=("$pgm")
    echo "### run $name ${args[*]:-}" >>"$log"
    start=$(date +%s.%N)
    output="$(timeout "$timeout_s" "$bin/$name" "${args[@]}" 2>&1)"
    rc=$?
    end=$(date +%s.%N)
    wall=$(awk "BEGIN { printf \"%.2f\", $end - $start }")
    tail -n 40 <<<"$output" >>"$log"
    echo "### run $name: exit $rc, $wall s" >>"$log"
    # Their last line is "<total microseconds>, <enumeration microseconds>".
    last="$(grep -E '^[0-9]+, [0-9]+$' <<<"$output" | tail -n 1)"
    printf '{"program":"%s","exit":%d,"timed_out":%s,"wall_s":%s,"printed":"%s"}\n' \
      "$name" "$rc" "$([ "$rc" -eq 124 ] && echo true || echo false)" "$wall" "${last:-}" >>"$json"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then status=1; fi
  done
fi
exit "$status"
