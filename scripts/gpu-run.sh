#!/usr/bin/env bash
# The GPU run of a tutti pack. `cargo xtask gpu-pack` builds the GPU test binaries and the
# CUDA-enabled `tutti` on a machine with Rust and copies this script into the pack as
# `.gpu/run.sh`; on the GPU machine (no Rust, no network) run
#
#   bash .gpu/run.sh                       # from anywhere; exit 0 only when every step passed
#   TUTTI_GPU_RUN_DRY=1 bash .gpu/run.sh   # dry run, e.g. on the build machine without a GPU
#
# Steps, each under `timeout`, all within TUTTI_GPU_RUN_BUDGET seconds (default 420):
#   pack        check the MANIFEST's sha256 sums; unpack `bin/*.xz` (xz, else python3's lzma)
#   gpu-info    nvidia-smi (name, driver, compute capability, memory), glibc, python3
#   cuda-libs   the CUDA library folder: <site-packages>/nvidia/cu13/lib (CUDA 13 wheels), else
#               <site-packages>/nvidia/*/lib (CUDA 12 wheels), and /usr/local/cuda/lib64; the
#               .so files found. LD_LIBRARY_PATH gets every such folder, TUTTI_CUDA_LIB_DIR the
#               first, and TUTTI_REQUIRE_GPU=1 TUTTI_REQUIRE_NVRTC=1 make a test that cannot
#               reach the GPU or NVRTC fail instead of skipping.
#   test-*      every packed test binary (bin/test-*), --test-threads=1 --nocapture (so the
#               "skipping: " lines of tests that found no GPU are counted)
#   sanitizer   compute-sanitizer --tool memcheck on the backend's cuda tests ("unavailable"
#               where compute-sanitizer is not installed; that does not fail the run)
#   tutti-*     `tutti devices`, and small `tutti fmm` / `tutti sweep` runs on --kind gpu and
#               --kind cpu (the inputs are in the pack's data/), timed
#   device-gemm Device::gemm (cuBLAS) at n = 4096 (f64) and 2048 (complex) beside faer on the
#               host's cores: GFLOP/s and the GPU / CPU ratio (bin/device_gemm)
#   fmm-gpu     the FMM with M2L and P2P as kernels on the GPU beside the host code on every
#               core: 1e6 and 1e7 uniform and Plummer bodies at p = 7, bodies per second, the
#               ratio, the error against the direct sum on 1000 bodies; 1e6 on two ranks of the
#               GPU, whose bits must equal one rank's (bin/fmm_gpu; the CPU column at 1e7 is
#               the 1e6 rate, marked)
#
# Output, in ${OUT:-./out} (a relative OUT is taken from the pack's folder), three files and
# the benchmarks' JSON results (fmm_gpu.json, device_gemm.json):
#   summary.json   versions, the library folders, and per step: status (pass, fail, timeout,
#                  unavailable, skipped), exit code, seconds, whether it needs the GPU machine,
#                  a note, the test counts of test steps, and the last lines of its log
#   run.log        every step's full log, one after another
#   table.txt      the PASS/FAIL table printed at the end
#
# Environment:
#   OUT                    output folder (default ./out beside this script)
#   TUTTI_GPU_RUN_DRY=1    dry run (also: the first argument `--dry`): TUTTI_REQUIRE_GPU and
#                          TUTTI_REQUIRE_NVRTC are not set, so the GPU tests skip and pass
#                          without a GPU; the result then counts only the steps that do not
#                          need the GPU machine (needs_gpu false in summary.json)
#   TUTTI_GPU_RUN_BUDGET   seconds for all steps together (default 420)
#
# Exit status: 0 when the result is PASS, 1 when it is FAIL. A missing GPU, driver or library
# makes steps fail (quickly: nothing waits for a GPU); it never stops the run.
set -u

script_start=$(date +%s)
pack=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || exit 1
cd "$pack" || exit 1

dry=0
if [ "${TUTTI_GPU_RUN_DRY:-0}" = 1 ] || [ "${1:-}" = --dry ]; then
    dry=1
fi
budget=${TUTTI_GPU_RUN_BUDGET:-420}
case $budget in
'' | *[!0-9]*) echo "TUTTI_GPU_RUN_BUDGET must be a number of seconds, got '$budget'" >&2; exit 1 ;;
esac
deadline=$((script_start + budget))

out=${OUT:-./out}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd) || exit 1
run_log=$out/run.log
: >"$run_log"
work=$(mktemp -d "${TMPDIR:-/tmp}/tutti-gpu.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
bin=$work/bin
mkdir -p "$bin"
export bin

say() { printf '%s\n' "$*" | tee -a "$run_log"; }
now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# A JSON string literal of $1: printable ASCII, tabs and newlines kept (escaped), the rest
# dropped.
json_str() {
    local s
    s=$(printf '%s' "$1" | LC_ALL=C tr -d '\000-\010\013\014\016-\037\177-\377')
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\t'/\\t}
    s=${s//$'\r'/}
    s=${s//$'\n'/\\n}
    printf '"%s"' "$s"
}

# A JSON array of the lines of file $1 (the last $2 lines when given).
json_lines() {
    local file=$1 count=${2:-} line first=1
    printf '['
    while IFS= read -r line || [ -n "$line" ]; do
        [ "$first" = 1 ] || printf ', '
        first=0
        json_str "$line"
    done < <(if [ -n "$count" ]; then tail -n "$count" "$file"; else cat "$file"; fi)
    printf ']'
}

# The steps, in order: parallel arrays.
step_name=()
step_status=()
step_exit=()
step_secs=()
step_gpu=()
step_note=()
step_tail=()
step_extra=()

# record NAME STATUS EXIT SECONDS NEEDS_GPU NOTE [LOG]
record() {
    step_name+=("$1")
    step_status+=("$2")
    step_exit+=("$3")
    step_secs+=("$4")
    step_gpu+=("$5")
    step_note+=("$6")
    if [ -n "${7:-}" ] && [ -f "$7" ]; then
        step_tail+=("$(json_lines "$7" 12)")
    else
        step_tail+=("[]")
    fi
    step_extra+=("")
}

# step NAME NEEDS_GPU LIMIT_S COMMAND...: runs COMMAND under timeout (at most LIMIT_S, and at
# most what is left of the budget), logs it to $work/NAME.log and run.log, and records it.
# Sets last_log and last_rc.
step() {
    local name=$1 needs_gpu=$2 limit=$3
    shift 3
    last_log=$work/$name.log
    last_rc=
    local left=$((deadline - $(date +%s) - 5))
    if [ "$left" -lt 3 ]; then
        say "== $name: skipped, out of time (budget ${budget}s)"
        : >"$last_log"
        record "$name" skipped "" 0 "$needs_gpu" "out of time (budget ${budget}s)"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    say "== $name (limit ${limit}s): $*"
    printf '$ %s\n' "$*" >"$last_log"
    # timeout runs programs, not shell functions: a function runs in a child bash.
    if [ "$(type -t "$1")" = function ]; then
        set -- bash -c "$(declare -f "$1"); $1"
    fi
    local start status note=""
    start=$(now)
    timeout --kill-after=5 "$limit" "$@" >>"$last_log" 2>&1 </dev/null
    last_rc=$?
    local secs
    secs=$(seconds_since "$start")
    case $last_rc in
    0) status=pass ;;
    124 | 137) status=timeout note="timed out after ${limit}s" ;;
    126 | 127) status=fail note="could not run $1 (exit $last_rc)" ;;
    *) status=fail ;;
    esac
    # A failure's note is its last line of output (an error message, mostly).
    if [ "$status" = fail ] && [ -z "$note" ]; then
        note=$(grep -v '^[[:space:]]*$' "$last_log" | tail -n 1 | cut -c 1-100)
    fi
    cat "$last_log" >>"$run_log"
    say "-- $name: $status (exit $last_rc, ${secs}s)"
    record "$name" "$status" "$last_rc" "$secs" "$needs_gpu" "$note" "$last_log"
}

# note TEXT: sets the note of the last step (kept when it already has one).
note() {
    local i=$((${#step_name[@]} - 1))
    if [ -z "${step_note[$i]}" ]; then
        step_note[i]=$1
    else
        step_note[i]="${step_note[$i]}; $1"
    fi
}

# ---------------------------------------------------------------------------------------------
say "== tutti GPU run: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), pack $pack"
[ "$dry" = 1 ] && say "dry run: TUTTI_REQUIRE_GPU and TUTTI_REQUIRE_NVRTC are not set"
revision=unknown
if [ -f MANIFEST ]; then
    revision=$(sed -n 's/^# revision //p' MANIFEST | head -1)
fi
say "pack revision: $revision"

# Step: pack. Checksums, then the binaries into $bin (unpacked where compressed).
unpack_all() {
    local failed=0 file name mismatched
    mismatched=$(grep -v '^#' MANIFEST | awk '{ print $1 "  " $3 }' | sha256sum -c 2>&1 |
        grep -v ': OK$')
    for file in bin/*; do
        [ -f "$file" ] || continue
        name=$(basename "$file")
        case $name in
        *.xz)
            name=${name%.xz}
            if command -v xz >/dev/null 2>&1; then
                xz -dc "$file" >"$bin/$name" || failed=1
            else
                python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)' "$file" "$bin/$name" || failed=1
            fi
            ;;
        *) cp "$file" "$bin/$name" || failed=1 ;;
        esac
        chmod +x "$bin/$name" || failed=1
        echo "unpacked $name ($(wc -c <"$bin/$name") bytes)"
    done
    [ "$failed" = 0 ] || echo "unpacking failed"
    if [ -n "$mismatched" ]; then
        printf '%s\n' "$mismatched"
        echo "MANIFEST check failed: $(printf '%s\n' "$mismatched" | grep -c ': FAILED') file(s) differ"
        failed=1
    fi
    return "$failed"
}
if [ -f MANIFEST ]; then
    step pack 0 60 unpack_all
else
    say "== pack: no MANIFEST beside this script (run \`cargo xtask gpu-pack\` first)"
    record pack fail "" 0 0 "no MANIFEST: not a pack built by cargo xtask gpu-pack"
fi

# Step: gpu-info, and the versions of the machine.
gpu_info() {
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "nvidia-smi not found"
        ldconfig -p 2>/dev/null | grep 'libcuda\.so' || echo "libcuda.so: not in the ldconfig cache"
        return 1
    fi
    nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv || return 1
    ldconfig -p 2>/dev/null | grep 'libcuda\.so' || echo "libcuda.so: not in the ldconfig cache"
}
step gpu-info 1 30 gpu_info
gpu_csv=$(grep -v '^\$ ' "$last_log" | sed -n '2,$p' | grep -v -e 'libcuda' -e '^nvidia-smi not found' | paste -sd';' -)
[ "$last_rc" = 0 ] || gpu_csv=""
[ -n "$gpu_csv" ] || note "no GPU listed"
glibc=$(ldd --version 2>&1 | head -1)
python_version=$(timeout 20 python3 --version 2>&1 || echo "python3 not usable")
kernel=$(uname -r)
say "gpu: ${gpu_csv:-none}"
say "glibc: $glibc"
say "python3: $python_version"

# Step: cuda-libs.
lib_dirs=()
find_cuda_libs() {
    local site dir
    local sites
    sites=$(timeout 20 python3 -c 'import site, sysconfig
paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
try:
    paths += site.getsitepackages()
except AttributeError:
    pass
print("\n".join(dict.fromkeys(paths)))' 2>&1) || echo "python3 could not name its site-packages: $sites"
    echo "site-packages: $(printf '%s' "$sites" | paste -sd' ' -)"
    timeout 20 python3 -c 'import importlib.metadata as m
for d in sorted({(d.metadata["Name"] or "") + " " + d.version for d in m.distributions()}):
    if d.lower().startswith("nvidia-") or d.lower().startswith("cuda-"):
        print("wheel:", d)' 2>/dev/null
    while IFS= read -r site; do
        [ -d "$site/nvidia/cu13/lib" ] && echo "dir: $site/nvidia/cu13/lib"
    done <<<"$sites"
    while IFS= read -r site; do
        for dir in "$site"/nvidia/*/lib; do
            [ -d "$dir" ] && [ "$dir" != "$site/nvidia/cu13/lib" ] && echo "dir: $dir"
        done
    done <<<"$sites"
    [ -d /usr/local/cuda/lib64 ] && echo "dir: /usr/local/cuda/lib64"
    return 0
}
step cuda-libs 1 40 find_cuda_libs
while IFS= read -r dir; do
    lib_dirs+=("$dir")
done < <(sed -n 's/^dir: //p' "$last_log")
so_list=$work/so.txt
: >"$so_list"
for dir in ${lib_dirs[@]+"${lib_dirs[@]}"}; do
    for so in "$dir"/*.so*; do
        [ -e "$so" ] && printf '%s\n' "$so" >>"$so_list"
    done
done
{
    echo "shared libraries found: $(wc -l <"$so_list")"
    cat "$so_list"
} | tee -a "$last_log" >>"$run_log"
i=$((${#step_name[@]} - 1))
if [ "${#lib_dirs[@]}" = 0 ]; then
    step_status[i]=fail
    note "no CUDA library folder found"
else
    note "${#lib_dirs[@]} folder(s), $(wc -l <"$so_list") .so files"
    for lib in libcublas.so libcusolver.so libnvrtc.so; do
        grep -q "/$lib" "$so_list" || note "no $lib*"
    done
fi
step_tail[i]=$(json_lines "$last_log" 12)
wheels_json=$(grep '^wheel: ' "$last_log" | sed 's/^wheel: //' >"$work/wheels.txt"; json_lines "$work/wheels.txt")

# The environment of the GPU steps.
cuda_lib_dir=${lib_dirs[0]:-}
if [ -n "$cuda_lib_dir" ]; then
    joined=$(printf '%s:' "${lib_dirs[@]}")
    export LD_LIBRARY_PATH="${joined%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TUTTI_CUDA_LIB_DIR=$cuda_lib_dir
fi
if [ "$dry" = 1 ]; then
    unset TUTTI_REQUIRE_GPU TUTTI_REQUIRE_NVRTC
else
    export TUTTI_REQUIRE_GPU=1 TUTTI_REQUIRE_NVRTC=1
fi
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}
say "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
say "TUTTI_CUDA_LIB_DIR=${TUTTI_CUDA_LIB_DIR:-} TUTTI_REQUIRE_GPU=${TUTTI_REQUIRE_GPU:-} TUTTI_REQUIRE_NVRTC=${TUTTI_REQUIRE_NVRTC:-}"

# Steps: test-* (every packed test binary).
tests_needs_gpu=$((1 - dry))
test_count=0
for test_bin in "$bin"/test-*; do
    [ -x "$test_bin" ] || continue
    test_count=$((test_count + 1))
    name=$(basename "$test_bin")
    step "$name" "$tests_needs_gpu" 150 "$test_bin" --test-threads=1 --nocapture
    [ -n "$last_rc" ] || continue
    read -r passed failed ignored < <(awk '/^test result:/ {
            for (i = 2; i <= NF; i++) {
                if ($i ~ /^passed;?$/) p += $(i - 1)
                if ($i ~ /^failed;?$/) f += $(i - 1)
                if ($i ~ /^ignored;?$/) g += $(i - 1)
            }
        } END { print p + 0, f + 0, g + 0 }' "$last_log")
    skipped=$(grep -c 'skipping: ' "$last_log")
    i=$((${#step_name[@]} - 1))
    step_extra[i]="\"tests\": {\"passed\": $passed, \"failed\": $failed, \"ignored\": $ignored, \"skipped\": $skipped}"
    # The counts say more than the last line ("test result: FAILED. ..."); a timeout stays.
    [ "${step_status[$i]}" = fail ] && step_note[i]=""
    note "$passed passed, $failed failed, $skipped skipped"
done
if [ "$test_count" = 0 ]; then
    record tests fail "" 0 1 "no test binaries in the pack"
fi

# Step: sanitizer.
sanitizer=""
if command -v compute-sanitizer >/dev/null 2>&1; then
    sanitizer=$(command -v compute-sanitizer)
elif [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    sanitizer=/usr/local/cuda/bin/compute-sanitizer
fi
backend_test=$bin/test-tutti-backend-cuda
if [ -z "$sanitizer" ]; then
    say "== sanitizer: compute-sanitizer not available"
    record sanitizer unavailable "" 0 1 "compute-sanitizer not available"
elif [ ! -x "$backend_test" ]; then
    say "== sanitizer: no backend cuda test binary in the pack"
    record sanitizer unavailable "" 0 1 "no test-tutti-backend-cuda in the pack"
else
    step sanitizer 1 150 "$sanitizer" --tool memcheck --error-exitcode 9 "$backend_test" \
        --test-threads=1 --nocapture
    [ "$last_rc" = 9 ] && note "memcheck found errors"
    grep -q 'Device not supported' "$last_log" && note "compute-sanitizer: device not supported"
fi

# Steps: tutti-* (the command line, timed).
tutti=$bin/tutti
if [ -x "$tutti" ]; then
    fmm_in=(--positions data/fmm/positions.npy --masses data/fmm/masses.npy --check-direct 1000)
    sweep_in=(--train data/sweep/mpo --train data/sweep/mps --chi 16 --oversample 10 --seed 1)
    step tutti-devices 0 30 "$tutti" devices
    step tutti-devices-gpu 1 30 "$tutti" devices --kind gpu
    step tutti-fmm-gpu 1 60 "$tutti" fmm "${fmm_in[@]}" --kind gpu --devices 1 --out "$work/fmm-gpu"
    step tutti-fmm-gpu-2ranks 1 60 "$tutti" fmm "${fmm_in[@]}" --kind gpu --ordinals 0,0 --out "$work/fmm-gpu2"
    step tutti-fmm-cpu 0 60 "$tutti" fmm "${fmm_in[@]}" --kind cpu --out "$work/fmm-cpu"
    step tutti-sweep-gpu 1 60 "$tutti" sweep "${sweep_in[@]}" --kind gpu --devices 1 --out "$work/sweep-gpu"
    step tutti-sweep-gpu-2ranks 1 60 "$tutti" sweep "${sweep_in[@]}" --kind gpu --ordinals 0,0 --out "$work/sweep-gpu2"
    step tutti-sweep-cpu 0 60 "$tutti" sweep "${sweep_in[@]}" --kind cpu --out "$work/sweep-cpu"
else
    say "== tutti-*: no tutti binary in the pack"
    record tutti fail "" 0 0 "no bin/tutti in the pack"
fi

# Benchmarks write their JSON results beside the summary.
export TUTTI_BENCH_RESULTS=$out

# Step: device-gemm (the GPU's GEMM rate beside the host's, in the same run).
if [ -x "$bin/device_gemm" ]; then
    step device-gemm 1 120 "$bin/device_gemm" 4096
fi

# Step: fmm-gpu (the FMM's kernels on the GPU beside the host code, in the same run), last:
# the longest step; it writes its JSON after every case, so a timeout keeps what it measured.
if [ -x "$bin/fmm_gpu" ]; then
    step fmm-gpu 1 180 "$bin/fmm_gpu" --n 1000000,10000000 --cpu-max-n 1000000
fi

# ---------------------------------------------------------------------------------------------
# The result: PASS when every counted step passed (or, for the sanitizer, is unavailable). A
# dry run counts only the steps that do not need the GPU machine.
result=PASS
n=${#step_name[@]}
for ((i = 0; i < n; i++)); do
    [ "$dry" = 1 ] && [ "${step_gpu[$i]}" = 1 ] && continue
    case ${step_status[$i]} in
    pass) ;;
    unavailable) [ "${step_name[$i]}" = sanitizer ] || result=FAIL ;;
    *) result=FAIL ;;
    esac
done
total_secs=$(($(date +%s) - script_start))

{
    printf '{\n'
    printf '  "result": %s,\n' "$(json_str "$result")"
    printf '  "dry_run": %s,\n' "$([ "$dry" = 1 ] && echo true || echo false)"
    printf '  "started": %s,\n' "$(json_str "$(date -u -d "@$script_start" +%Y-%m-%dT%H:%M:%SZ)")"
    printf '  "seconds": %s,\n' "$total_secs"
    printf '  "budget_seconds": %s,\n' "$budget"
    printf '  "pack": {"revision": %s, "path": %s},\n' "$(json_str "$revision")" "$(json_str "$pack")"
    printf '  "versions": {\n'
    printf '    "host": %s,\n' "$(json_str "$(uname -n)")"
    printf '    "kernel": %s,\n' "$(json_str "$kernel")"
    printf '    "gpus": %s,\n' "$(json_str "$gpu_csv")"
    printf '    "glibc": %s,\n' "$(json_str "$glibc")"
    printf '    "python": %s,\n' "$(json_str "$python_version")"
    printf '    "cuda_wheels": %s\n' "$wheels_json"
    printf '  },\n'
    printf '  "cuda_lib_dirs": %s,\n' "$(printf '%s\n' ${lib_dirs[@]+"${lib_dirs[@]}"} | sed '/^$/d' >"$work/dirs.txt"; json_lines "$work/dirs.txt")"
    printf '  "cuda_libraries": %s,\n' "$(sed 's|.*/||' "$so_list" >"$work/so-names.txt"; json_lines "$work/so-names.txt")"
    printf '  "env": {"LD_LIBRARY_PATH": %s, "TUTTI_CUDA_LIB_DIR": %s, "TUTTI_REQUIRE_GPU": %s, "TUTTI_REQUIRE_NVRTC": %s},\n' \
        "$(json_str "${LD_LIBRARY_PATH:-}")" "$(json_str "${TUTTI_CUDA_LIB_DIR:-}")" \
        "$(json_str "${TUTTI_REQUIRE_GPU:-}")" "$(json_str "${TUTTI_REQUIRE_NVRTC:-}")"
    printf '  "steps": [\n'
    for ((i = 0; i < n; i++)); do
        printf '    {"name": %s, "status": %s, "exit": %s, "seconds": %s, "needs_gpu": %s, "note": %s,' \
            "$(json_str "${step_name[$i]}")" "$(json_str "${step_status[$i]}")" \
            "${step_exit[$i]:-null}" "${step_secs[$i]}" \
            "$([ "${step_gpu[$i]}" = 1 ] && echo true || echo false)" \
            "$(json_str "${step_note[$i]}")"
        [ -n "${step_extra[$i]}" ] && printf ' %s,' "${step_extra[$i]}"
        printf ' "tail": %s}' "${step_tail[$i]}"
        [ "$i" -lt $((n - 1)) ] && printf ','
        printf '\n'
    done
    printf '  ]\n'
    printf '}\n'
} >"$out/summary.json"

{
    printf '\n%-24s %-11s %8s  %s\n' step status seconds note
    for ((i = 0; i < n; i++)); do
        flag=""
        [ "$dry" = 1 ] && [ "${step_gpu[$i]}" = 1 ] && flag=" (needs the GPU machine; not counted in a dry run)"
        printf '%-24s %-11s %8s  %s%s\n' "${step_name[$i]}" "${step_status[$i]^^}" \
            "${step_secs[$i]}" "${step_note[$i]}" "$flag"
    done
    printf '\nresult: %s%s in %ss (%s)\n' "$result" "$([ "$dry" = 1 ] && echo ' (dry run)')" \
        "$total_secs" "${gpu_csv:-no GPU}"
    printf 'summary: %s\n' "$out/summary.json"
} | tee "$out/table.txt" | tee -a "$run_log"

[ "$result" = PASS ]
