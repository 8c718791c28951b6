#!/usr/bin/env bash
# DynaSOAr's own example applications, built UNCHANGED against soaheap's DynaSOAr shim (issue 11),
# then run with their default parameters. Their sources are not part of this repository: place a
# checkout of prg-titech/dynasoar (or just its example/ folder) somewhere and pass that directory.
#
# Usage (repo root):  tools/gpu/dynasoar-examples.sh DYNASOAR_DIR [build|run|all|compare|compare-build|compare-run|baseline|baseline-build|baseline-run]   (default: all)
#   build: compiles every example into build-dynasoar-examples/ (or $BIN_DIR), in parallel
#   run:   runs the binaries found there, each under `timeout $TIMEOUT` (default 45 s)
#   compare: builds each program again at the sizes and iteration counts of the table `comparisons`
#          and runs it next to soaheap's native application given the same (binaries in
#          $NATIVE_BIN, e.g. build-gpu/bin); writes dynasoar-vs-native.json (one line per program:
#          both times, their ratio) into $OUT. ROUNDS (default 1) alternates the two that often.
#          compare-build / compare-run: only its first / second half.
#   baseline: builds each program through the shim and DynaSOAr's own hand-written baseline_soa of
#          it (same configuration.h, same options, plain nvcc) and runs the two in turn (ROUNDS
#          times); writes dynasoar-vs-baseline.json (one line per program and round: both printed
#          times in seconds, their ratio). baseline-build / baseline-run: only its first / second half.
# barnes-hut is also built with tools/dynasoar-host/barnes-hut-insertion.patch applied (two races of
# the program's own tree insertion and a 16 KiB device stack, see docs/dynasoar-migration.md):
# barnes_hut_patched, and with WITH_DEBUG=1 barnes_hut_patched_debug (their assertions and
# check_consistency after every step, 20 steps), and both at the host backend's 20000 bodies
# (barnes_hut_small_debug, barnes_hut_patched_small_debug).
# Writes "$OUT"/dynasoar-examples.log (build output, each program's printed result, exit status and
# wall time) and "$OUT"/dynasoar-examples.json (one JSON line per program).
# Environment: OUT (default .), BIN_DIR, TIMEOUT, JOBS (parallel nvcc, default 8), NVCC, CXX,
#   HOST_INCLUDES and HOST_LIBS (flags to find spdlog and fmt where they are not installed; HOST_LIBS
#   replaces -lspdlog -lfmt),
#   ONLY (a regular expression: build and run just the programs whose names match it),
#   EXTRA_FLAGS (e.g. -DPARAM_SIZE_X=512 to shrink a problem), MAXRREGCOUNT (default 64, their
#   build's register cap; empty: none), GOL_PGM (a game-of-life .pgm data
#   set; without it a 2000x2000 random one is generated), WITH_DEBUG=1 (also build and run wa-tor,
#   collision and nbody without -DNDEBUG, which prints their checksums, and sugarscape
#   and a small collision whose checksums examples/dynasoar/* given the same parameters print; their
#   traffic does not compile without -DNDEBUG: it prints a variable that only OPTION_RENDER declares).
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
# -maxrregcount=64 is DynaSOAr's own (its CMakeLists.txt); MAXRREGCOUNT= (empty) builds without it.
maxrreg="${MAXRREGCOUNT-64}"
flags="-std=c++17 -arch=sm_90 --extended-lambda --expt-relaxed-constexpr -lineinfo ${maxrreg:+-maxrregcount=$maxrreg} $includes"
flags="$flags -I$src/example/configuration/dynasoar -I$src ${EXTRA_FLAGS:-}"
# soaheap's log lines are written by a host-compiled function (base/src/log.cpp, spdlog): compiled
# once here by the host compiler; HOST_INCLUDES may name where spdlog's and fmt's headers are.
libs="$bin/soaheap_log.o ${HOST_LIBS:--lspdlog -lfmt}"

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
  "wator_no_cell|example/wa-tor/dynasoar_no_cell/wator.cu||-O3 -DNDEBUG"
  "gol_no_cell|example/game-of-life/dynasoar_no_cell/gol.cu|example/game-of-life/dataset_loader.cu|-O3 -DNDEBUG"
  # Their build script's example (-x 8 -m 262144): with the defaults (1,024 objects per thread) the
  # 16.8 M allocations exceed the heap of kNumObjects = 16.5 M objects, in DynaSOAr as here.
  "linux_scalability|example/linux-scalability/dynasoar/linux_scalability.cu||-O3 -DNDEBUG -DPARAM_SIZE=8 -DPARAM_MAX_OBJ=262144"
  "barnes_hut_patched|@patched/example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DNDEBUG"
)
if [ "${WITH_DEBUG:-0}" = 1 ]; then
  programs+=("wator_debug|example/wa-tor/dynasoar/wator.cu||-O3"
             "collision_debug|example/collision/dynasoar/collision.cu||-O3"
             "nbody_debug|example/nbody/dynasoar/nbody.cu||-O3"
             "barnes_hut_patched_debug|@patched/example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DPARAM_NUM_ITER=20"
             "barnes_hut_patched_small_debug|@patched/example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DPARAM_NUM_ITER=20 -DPARAM_SIZE=20000"
             "barnes_hut_small_debug|example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DPARAM_NUM_ITER=20 -DPARAM_SIZE=20000"
             # Checksums to hold against examples/dynasoar/* (same parameters on their command line).
             "sugarscape_debug|example/sugarscape/dynasoar/sugarscape.cu||-O3"
             "collision_small_debug|example/collision/dynasoar/collision.cu||-O3 -DPARAM_NUM_ITER=50 -DPARAM_MAX_OBJ=1048576")
fi

# Equal parameters for mode compare: name | main | extra | their options | native program and
# arguments. Their sizes and iteration counts where the native application has the same notion
# (fewer iterations than their defaults where a run would take minutes). The native applications of
# the first entries follow rules of their own (docs/dynasoar-migration.md says what differs); the
# *_port entries compare with DynaSOAr's program written with the native API (examples/dynasoar/*).
comparisons=(
  "cmp_wator|example/wa-tor/dynasoar/wator.cu||-O3 -DNDEBUG -DPARAM_SIZE_X=2048 -DPARAM_SIZE_Y=2048|wa_tor --size 2048 --iterations 500"
  "cmp_collision|example/collision/dynasoar/collision.cu||-O3 -DNDEBUG -DPARAM_NUM_ITER=500|collision --size 40000 --iterations 500"
  "cmp_nbody|example/nbody/dynasoar/nbody.cu||-O3 -DNDEBUG -DPARAM_NUM_ITER=500|nbody --size 20000 --iterations 500"
  "cmp_barnes_hut|@patched/example/barnes-hut-dynamic/dynasoar/barnes_hut.cu||-O3 -DNDEBUG -DPARAM_NUM_ITER=100|barnes_hut --size 300000 --iterations 100"
  "cmp_sugarscape|example/sugarscape/dynasoar/sugarscape.cu||-O3 -DNDEBUG|sugarscape --size 1700 --iterations 10000"
  "cmp_gol|example/game-of-life/dynasoar/gol.cu|example/game-of-life/dataset_loader.cu|-O3 -DNDEBUG|game_of_life --size 2000 --iterations 300 --density 100"
  "cmp_traffic|example/traffic/dynasoar/traffic.cu||-O3 -DNDEBUG|traffic --size 35000 --iterations 12000"
  "cmp_structure|example/structure/dynasoar/structure.cu|example/structure/dataset.cc|-O3 -DNDEBUG|structure --size 707 --iterations 7500"
  # Against the same program written with the native API (examples/dynasoar/*: their rules, random
  # numbers, heap size and memory), which isolates what the shim costs.
  "cmp_collision_port|example/collision/dynasoar/collision.cu||-O3 -DNDEBUG -DPARAM_NUM_ITER=500|dynasoar_collision --size 40000 --iterations 500"
  "cmp_sugarscape_port|example/sugarscape/dynasoar/sugarscape.cu||-O3 -DNDEBUG|dynasoar_sugarscape --size 1700 --iterations 10000"
  "cmp_traffic_port|example/traffic/dynasoar/traffic.cu||-O3 -DNDEBUG|dynasoar_traffic --size 17500 --iterations 12000"
)
# Mode baseline: name | their program | extra sources | options | their baseline_soa source.
baselines=(
  "bl_collision|example/collision/dynasoar/collision.cu||-O3 -DNDEBUG|example/collision/baseline_soa/collision.cu"
  "bl_nbody|example/nbody/dynasoar/nbody.cu||-O3 -DNDEBUG|example/nbody/baseline_soa/nbody.cu"
  "bl_structure|example/structure/dynasoar/structure.cu|example/structure/dataset.cc|-O3 -DNDEBUG|example/structure/baseline_soa/structure.cu"
  "bl_wator|example/wa-tor/dynasoar/wator.cu||-O3 -DNDEBUG|example/wa-tor/baseline_soa/wator.cu"  # needs their example/wa-tor/dynasoar_no_cell/
  "bl_traffic|example/traffic/dynasoar/traffic.cu||-O3 -DNDEBUG|example/traffic/baseline_soa/traffic.cu"
  "bl_sugarscape|example/sugarscape/dynasoar/sugarscape.cu||-O3 -DNDEBUG|example/sugarscape/baseline_soa/sugarscape.cu"
  "bl_gol|example/game-of-life/dynasoar/gol.cu|example/game-of-life/dataset_loader.cu|-O3 -DNDEBUG|example/game-of-life/baseline_soa/gol.cu"
)
[[ "$mode" == compare* ]] && programs=("${comparisons[@]}")
[[ "$mode" == baseline* ]] && programs=("${baselines[@]}")
if [ -n "${ONLY:-}" ]; then  # a regular expression of program names to build and run
  selected=()
  for entry in "${programs[@]}"; do [[ "${entry%%|*}" =~ ^($ONLY)$ ]] && selected+=("$entry"); done
  programs=("${selected[@]}")
  [[ "$mode" == compare* ]] && comparisons=("${selected[@]}")
  [[ "$mode" == baseline* ]] && baselines=("${selected[@]}")
fi

# The patched copy of their sources (barnes-hut's insertion races fixed, its stack raised), for
# entries whose main is @patched/...
psrc="$bin/patched-src"
rm -rf "$psrc"
mkdir -p "$psrc"
cp -r "$src/example" "$psrc/"
[ -d "$src/util" ] && cp -r "$src/util" "$psrc/"
patch -s -d "$psrc" -p1 <"$repo/tools/dynasoar-host/barnes-hut-insertion.patch" || status=1

build_one() {  # entry
  IFS='|' read -r name main extra opts _ <<<"$1"
  local root="$src"
  if [[ "$main" == @patched/* ]]; then root="$psrc"; main="${main#@patched/}"; fi
  local extra_paths=""
  [ -n "$extra" ] && extra_paths="$root/$extra"
  local cmd="$nvcc $flags $opts $root/$main $extra_paths -o $bin/$name $libs"
  {
    echo "### build $name: $cmd"
    $cmd 2>&1 | grep -v -e 'fmt/core.h' -e '^ *|' -e 'inlined from' -e '^\s*\^' -e '~~~' || true
    [ -x "$bin/$name" ] && echo "### build $name: ok" || echo "### build $name: FAILED"
  } >"$bin/$name.buildlog" 2>&1
}
# Their baseline_soa program (mode baseline): plain nvcc, no soaheap include path, their options.
build_baseline() {  # entry
  IFS='|' read -r name _ extra opts baseline <<<"$1"
  local extra_paths=""
  [ -n "$extra" ] && extra_paths="$src/$extra"
  # -include cstdio: their collision baseline calls printf without including it (older CUDA headers did)
  local cmd="$nvcc -std=c++17 -arch=sm_90 -lineinfo -include cstdio -I$src ${EXTRA_FLAGS:-} $opts $src/$baseline $extra_paths -o $bin/${name}_baseline_soa"
  {
    echo "### build ${name}_baseline_soa: $cmd"
    $cmd 2>&1 | grep -v -e '^ *|' -e '^\s*\^' || true
    [ -x "$bin/${name}_baseline_soa" ] && echo "### build ${name}_baseline_soa: ok" || echo "### build ${name}_baseline_soa: FAILED"
  } >"$bin/${name}_baseline_soa.buildlog" 2>&1
}
export -f build_one build_baseline
export nvcc flags bin src psrc libs

if [ "$mode" = baseline ] || [ "$mode" = baseline-build ]; then
  : >"$log"
  printf '%s\n' "${baselines[@]}" | xargs -P "$jobs" -I{} bash -c 'build_baseline "$@"' _ {}
  for entry in "${baselines[@]}"; do
    cat "$bin/${entry%%|*}_baseline_soa.buildlog" >>"$log"
  done
fi
if [ "$mode" = build ] || [ "$mode" = all ] || [ "$mode" = compare ] || [ "$mode" = compare-build ] || [[ "$mode" == baseline || "$mode" == baseline-build ]]; then
  [[ "$mode" == baseline* ]] || : >"$log"
  # shellcheck disable=SC2086  # HOST_INCLUDES is a list of flags
  "${CXX:-g++}" -std=c++17 -O2 -c -I"$repo/base/include" ${HOST_INCLUDES:-} "$repo/base/src/log.cpp" \
    -o "$bin/soaheap_log.o" >>"$log" 2>&1 || { echo "### build soaheap_log.o: FAILED" >>"$log"; status=1; }
  printf '%s\n' "${programs[@]}" | xargs -P "$jobs" -I{} bash -c 'build_one "$@"' _ {}
  for entry in "${programs[@]}"; do
    name="${entry%%|*}"
    cat "$bin/$name.buildlog" >>"$log"
    [ -x "$bin/$name" ] || status=1
  done
fi

gol_pgm() {  # prints the game-of-life data set's path (theirs is an archive; this one is random)
  if [ -n "${GOL_PGM:-}" ]; then echo "$GOL_PGM"; return; fi
  local pgm="$bin/gol-random.pgm"  # their loader: "P2", a comment line, "cols rows", then 0 = alive
  [ -s "$pgm" ] || awk 'BEGIN { srand(42); print "P2"; print "# random, soaheap"; print "2000 2000";
               for (i = 0; i < 2000 * 2000; ++i) printf "%d%s", (rand() < 0.1 ? 0 : 1), (i % 2000 == 1999 ? "\n" : " ") }' >"$pgm"
  echo "$pgm"
}

# Runs one of their binaries: log entry, then sets rc, wall and printed (their last line,
# "<total microseconds>, <enumeration microseconds>").
run_theirs() {  # name
  local name="$1" args=() output start end
  [[ "$name" == gol* || "$name" == cmp_gol* || "$name" == bl_gol* ]] && args=("$(gol_pgm)")
  echo "### run $name ${args[*]:-}" >>"$log"
  start=$(date +%s.%N)
  output="$(timeout "$timeout_s" "$bin/$name" "${args[@]}" 2>&1)"
  rc=$?
  end=$(date +%s.%N)
  wall=$(awk "BEGIN { printf \"%.2f\", $end - $start }")
  tail -n 40 <<<"$output" >>"$log"
  echo "### run $name: exit $rc, $wall s" >>"$log"
  # Their programs print "<micros>, <enumeration micros>"; their baselines "<micros>" alone.
  printed="$(grep -E '^[0-9]+(, ?[0-9]+)?$' <<<"$output" | tail -n 1)"
}

if [ "$mode" = run ] || [ "$mode" = all ]; then
  [ "$mode" = run ] && : >"$log"
  : >"$json"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
  for entry in "${programs[@]}"; do
    name="${entry%%|*}"
    [ -x "$bin/$name" ] || { echo "### run $name: no binary" >>"$log"; continue; }
    run_theirs "$name"
    printf '{"program":"%s","exit":%d,"timed_out":%s,"wall_s":%s,"printed":"%s"}\n' \
      "$name" "$rc" "$([ "$rc" -eq 124 ] && echo true || echo false)" "$wall" "${printed:-}" >>"$json"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then status=1; fi
  done
fi

if [ "$mode" = compare ] || [ "$mode" = compare-run ]; then
  native_bin="${NATIVE_BIN:?compare needs NATIVE_BIN, the folder of the native applications}"
  cjson="$out/dynasoar-vs-native.json"
  : >"$cjson"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
  for ((round = 1; round <= ${ROUNDS:-1}; ++round)); do
    for entry in "${comparisons[@]}"; do
      IFS='|' read -r name _ _ opts native <<<"$entry"
      [ -x "$bin/$name" ] || { echo "### run $name: no binary" >>"$log"; status=1; continue; }
      run_theirs "$name"
      theirs_rc=$rc
      theirs_s=$(awk -F', *' '{ printf "%.6f", $1 / 1e6 }' <<<"${printed:-0, 0}")
      read -r -a native_args <<<"$native"
      echo "### run native ${native_args[*]} --backend cuda" >>"$log"
      native_out="$(timeout "$timeout_s" "$native_bin/${native_args[0]}" "${native_args[@]:1}" --backend cuda 2>&1)"
      native_rc=$?
      result="$(grep -E '^\{.*"total_time_s"' <<<"$native_out" | tail -n 1)"
      echo "${result:-$(tail -n 20 <<<"$native_out")}" >>"$log"
      # The native result line's time of its iterations where it reports one (the examples/dynasoar/*
      # programs time what DynaSOAr's programs print: the iterations), else its total time (setup +
      # iterations; its self-check is timed apart).
      native_s=$(python3 -c 'import json, sys
try:
    line = json.loads(sys.stdin.read())
    print(line.get("iterations_time_s", line["total_time_s"]))
except Exception: print(0)' <<<"$result")
      check=$(grep -o '"self_check":"[a-z]*"' <<<"$result" | cut -d'"' -f4)
      ratio=$(awk "BEGIN { print ($native_s > 0 ? $theirs_s / $native_s : 0) }")
      printf '{"program":"%s","round":%d,"their_options":"%s","native":"%s","dynasoar_shim_s":%s,"dynasoar_exit":%d,"native_s":%s,"native_exit":%d,"native_self_check":"%s","ratio":%s}\n' \
        "$name" "$round" "$opts" "$native" "$theirs_s" "$theirs_rc" "$native_s" "$native_rc" "$check" "$ratio" >>"$cjson"
      if [ "$theirs_rc" -ne 0 ] || [ "$native_rc" -ne 0 ]; then status=1; fi
    done
  done
fi
if [ "$mode" = baseline ] || [ "$mode" = baseline-run ]; then
  [ "$mode" = baseline-run ] && : >"$log"
  bjson="$out/dynasoar-vs-baseline.json"
  : >"$bjson"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$log" 2>&1
  for ((round = 1; round <= ${ROUNDS:-1}; ++round)); do
    for entry in "${baselines[@]}"; do
      IFS='|' read -r name _ _ opts _ <<<"$entry"
      [ -x "$bin/$name" ] && [ -x "$bin/${name}_baseline_soa" ] || { echo "### run $name: no binary" >>"$log"; status=1; continue; }
      run_theirs "$name"
      shim_rc=$rc
      shim_s=$(awk -F', *' '{ printf "%.6f", $1 / 1e6 }' <<<"${printed:-0}")
      run_theirs "${name}_baseline_soa"
      baseline_rc=$rc
      baseline_s=$(awk -F', *' '{ printf "%.6f", $1 / 1e6 }' <<<"${printed:-0}")
      ratio=$(awk "BEGIN { print ($baseline_s > 0 ? $shim_s / $baseline_s : 0) }")
      printf '{"program":"%s","round":%d,"options":"%s","dynasoar_shim_s":%s,"shim_exit":%d,"baseline_soa_s":%s,"baseline_exit":%d,"ratio":%s}\n' \
        "$name" "$round" "$opts" "$shim_s" "$shim_rc" "$baseline_s" "$baseline_rc" "$ratio" >>"$bjson"
      if [ "$shim_rc" -ne 0 ] && [ "$shim_rc" -ne 124 ]; then status=1; fi
    done
  done
fi
exit "$status"
