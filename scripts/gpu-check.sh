#!/usr/bin/env bash
# GPU check of the CUDA backend: builds and runs `cargo test -p tutti-backend --features cuda`
# on a machine with an NVIDIA GPU and prints a summary.
#
#   scripts/gpu-check.sh            # from anywhere inside the repository
#   GPU_CHECK_TIMEOUT=300 scripts/gpu-check.sh
#
# It never touches the network: cargo runs with --offline. The dependencies must therefore
# already be on the machine, either
#   - pre-fetched into the cargo home (`cargo fetch` on a machine with network, then copy
#     ~/.cargo/registry along, or share CARGO_HOME), or
#   - vendored (`cargo vendor` plus the `[source]` replacement it prints, in .cargo/config.toml).
# A Rust toolchain (cargo, rustc >= the workspace's rust-version) must be installed; the CUDA
# toolkit is not needed, only the driver (libcuda.so.1), which cudarc loads at run time.
#
# Environment:
#   GPU_CHECK_TIMEOUT   seconds for the test run (default 420); the build gets its own
#                       GPU_CHECK_BUILD_TIMEOUT (default 600).
#   OUT                 if set (e.g. on a lent device machine), the full log is copied there.
#
# Exit status: 0 when every test passed and no GPU test skipped on a machine that has a GPU;
# 1 on a failure, 2 when the machine is unusable (no cargo), 124 on a timeout.
set -u -o pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 2

build_timeout=${GPU_CHECK_BUILD_TIMEOUT:-600}
test_timeout=${GPU_CHECK_TIMEOUT:-420}
log_dir=${CARGO_TARGET_DIR:-$repo_root/target}
mkdir -p "$log_dir"
log="$log_dir/gpu-check.log"
: >"$log"

say() { printf '%s\n' "$*" | tee -a "$log"; }

say "== gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) in $repo_root"
if ! command -v cargo >/dev/null 2>&1; then
    say "FAIL: cargo not found; install a Rust toolchain first"
    exit 2
fi
say "toolchain: $(cargo --version 2>&1) / $(rustc --version 2>&1)"

gpus_seen=0
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L 2>&1 | tee -a "$log"
    gpus_seen=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1 |
        tee -a "$log"
else
    say "nvidia-smi not found: the GPU tests will most likely skip"
fi
say "libcuda: $( (ldconfig -p 2>/dev/null | grep -m1 'libcuda.so.1') || echo 'not in the ldconfig cache')"

export CARGO_NET_OFFLINE=true
export RUST_BACKTRACE=${RUST_BACKTRACE:-1}

say "== build (timeout ${build_timeout}s)"
timeout --kill-after=10 "$build_timeout" \
    cargo test --offline -p tutti-backend --features cuda --no-run 2>&1 | tee -a "$log"
build_status=${PIPESTATUS[0]}
if [ "$build_status" -ne 0 ]; then
    if [ "$build_status" -eq 124 ] || [ "$build_status" -eq 137 ]; then
        say "FAIL: the build timed out after ${build_timeout}s"
        status=124
    else
        say "FAIL: the build failed (status $build_status); missing crates mean the" \
            "workspace was not pre-fetched or vendored (see the top of this script)"
        status=1
    fi
    [ -n "${OUT:-}" ] && cp "$log" "$OUT/" 2>/dev/null
    exit "$status"
fi

say "== test (timeout ${test_timeout}s)"
start=$(date +%s)
timeout --kill-after=10 "$test_timeout" \
    cargo test --offline -p tutti-backend --features cuda -- --nocapture 2>&1 | tee -a "$log"
test_status=${PIPESTATUS[0]}
elapsed=$(($(date +%s) - start))

# Totals over every test binary (unit tests, tests/cuda.rs, doc tests).
read -r passed failed < <(awk '/^test result:/ {
        for (i = 2; i <= NF; i++) {
            if ($i ~ /^passed;?$/) p += $(i - 1)
            if ($i ~ /^failed;?$/) f += $(i - 1)
        }
    } END { print p + 0, f + 0 }' "$log")
# Skips that mean "no usable GPU" (the GPU tests print these; the no-GPU tests print others).
gpu_skips=$(grep -cE 'skipping: (CUDA error|the CUDA driver reports no device|the test needs GPU)' "$log" || true)

say ""
say "== summary"
say "GPUs listed by nvidia-smi: $gpus_seen"
say "tests passed: $passed, failed: $failed, GPU tests skipped: $gpu_skips, ${elapsed}s"
failures=$(grep -E '^test .* FAILED$' "$log" | sort -u)
[ -n "$failures" ] && say "failed tests:" && say "$failures"
# What the GPU tests reported about the hardware.
grep -E '^gpu:[0-9]+: |^peer access:' "$log" | sort -u | sed 's/^/  /'

status=0
if [ "$test_status" -eq 124 ] || [ "$test_status" -eq 137 ]; then
    say "FAIL: the tests timed out after ${test_timeout}s"
    status=124
elif [ "$test_status" -ne 0 ]; then
    say "FAIL: cargo test exited with status $test_status"
    status=1
elif [ "$gpu_skips" -gt 0 ] && [ "$gpus_seen" -gt 0 ]; then
    say "FAIL: nvidia-smi lists $gpus_seen GPU(s) but GPU tests skipped; first reason:"
    grep -m1 -E 'skipping: ' "$log" | sed 's/^/  /' | tee -a "$log"
    status=1
elif [ "$gpu_skips" -gt 0 ]; then
    say "SKIPPED: no usable GPU on this machine; the GPU tests did not run"
else
    say "OK: all tests passed on the GPU"
fi
say "full log: $log"
[ -n "${OUT:-}" ] && cp "$log" "$OUT/" 2>/dev/null
exit "$status"
