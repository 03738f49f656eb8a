#!/usr/bin/env bash
# GPU check of tutti: a thin wrapper around the GPU pack (docs/gpu.md, "Running on a GPU
# machine"). The GPU machine needs no Rust toolchain and no network:
#
#   cargo xtask gpu-pack      # here, with Rust: builds .gpu/ (test binaries, tutti, run.sh)
#   bash .gpu/run.sh          # there, with the pack carried along: logs and summary.json in $OUT
#
# Run on a machine that has the pack, this script runs it (arguments and environment are passed
# on, e.g. TUTTI_GPU_RUN_DRY=1); without one it prints the commands above and exits 2.
set -u

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 2
if [ -f "$repo_root/.gpu/run.sh" ]; then
    exec bash "$repo_root/.gpu/run.sh" "$@"
fi
cat >&2 <<'EOF'
gpu-check: no GPU pack in .gpu/. Build it where Rust is installed, then run it on the GPU machine:
    cargo xtask gpu-pack
    bash .gpu/run.sh
(scripts/gpu-check.sh runs .gpu/run.sh once the pack is there.)
EOF
exit 2
