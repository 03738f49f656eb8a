"""tutti's FMM against FMM3D (Flatiron Institute) on the same points, cores and accuracy.

Run it in a throwaway virtualenv, with libtutti built in release:

    cargo build --release -p tutti-capi -p tutti-benches
    ./target/release/fmm_scaling --max-n 100000 --write-points /tmp/fmm_points
    python3 -m venv /tmp/fmm3d-venv && /tmp/fmm3d-venv/bin/pip install fmm3dpy numpy
    TUTTI_LIB=target/release/libtutti.so OMP_NUM_THREADS=$(nproc) \\
        /tmp/fmm3d-venv/bin/python benches/peers/fmm3d_compare.py /tmp/fmm_points

For every case directory (``positions.npy``, ``masses.npy``, as written by ``fmm_scaling
--write-points``) it times tutti (through the ctypes bindings, one device with all cores) at
orders 7 (the default) and 10, and FMM3D's ``lfmm3d`` at eps = 1e-3 ... 1e-9 (OpenMP on
``OMP_NUM_THREADS`` cores), measures every relative L2 error of the accelerations on the
same 1000 evenly spaced targets against a numpy direct sum, and reports, for each tutti
run, the fastest FMM3D run at least as accurate, and the time ratio. FMM3D's Laplace kernel
is 1/(4 pi r): its potential is scaled by -4 pi and its gradient by 4 pi to give tutti's
phi = -sum m / r and a = -grad phi. Results: ``benches/results/fmm3d_compare.json``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import fmm3dpy  # noqa: E402
import tutti  # noqa: E402

SAMPLES = 1000


def direct_on(positions: np.ndarray, masses: np.ndarray, targets: np.ndarray):
    """phi and a on the targets by the direct sum (numpy, in blocks)."""
    phi = np.empty(len(targets))
    acc = np.empty((len(targets), 3))
    for start in range(0, len(targets), 8):
        block = targets[start : start + 8]
        d = positions[block, None, :] - positions[None, :, :]
        r2 = np.einsum("ijk,ijk->ij", d, d)
        r2[np.arange(len(block)), block] = np.inf
        inv = 1.0 / np.sqrt(r2)
        phi[start : start + 8] = -(inv @ masses)
        acc[start : start + 8] = -np.einsum("ij,ijk->ik", masses * inv**3, d)
    return phi, acc


def rel(approx: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(approx - exact) / np.linalg.norm(exact))


def best_of(runs: int, work):
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    points = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fmm_points")
    cases = sorted(p for p in points.iterdir() if (p / "positions.npy").is_file())
    threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
    print(f"fmm3d_compare: tutti {tutti.version()} vs fmm3dpy, OMP_NUM_THREADS={threads}")
    rows = []
    for case in cases:
        positions = np.load(case / "positions.npy")
        masses = np.load(case / "masses.npy")
        n = len(masses)
        targets = np.arange(SAMPLES) * n // SAMPLES if n > SAMPLES else np.arange(n)
        _, exact = direct_on(positions, masses, targets)
        runs = 2 if n <= 100_000 else 1
        ours = []
        for order in (7, 10):
            seconds, (_, acc) = best_of(runs, lambda: tutti.fmm(positions, masses, order=order))
            ours.append({"order": order, "seconds": seconds, "accel_error": rel(acc[targets], exact)})
        theirs = []
        sources = np.ascontiguousarray(positions.T)
        for eps in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9):
            seconds, out = best_of(
                runs, lambda: fmm3dpy.lfmm3d(eps=eps, sources=sources, charges=masses, pg=2)
            )
            acc = 4.0 * np.pi * out.grad.T
            theirs.append({"eps": eps, "seconds": seconds, "accel_error": rel(acc[targets], exact)})
        for run in ours:
            matched = [t for t in theirs if t["accel_error"] <= run["accel_error"]]
            peer = min(matched, key=lambda t: t["seconds"]) if matched else None
            ratio = peer["seconds"] / run["seconds"] if peer else None
            print(
                f"  {case.name:<14} tutti p={run['order']:>2}: {run['seconds']:8.3f} s, error "
                f"{run['accel_error']:.2e} | FMM3D "
                + (
                    f"eps={peer['eps']:.0e}: {peer['seconds']:8.3f} s, error {peer['accel_error']:.2e}"
                    f" | FMM3D time / tutti time = {ratio:.2f}"
                    if peer
                    else "never as accurate"
                )
            )
            rows.append({"case": case.name, "n": n, "tutti": run, "fmm3d": peer, "fmm3d_over_tutti": ratio})
        for t in theirs:
            print(f"    FMM3D eps={t['eps']:.0e}: {t['seconds']:8.3f} s, error {t['accel_error']:.2e}")
        rows.append({"case": case.name, "n": n, "fmm3d_all": theirs, "tutti_all": ours})
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    meta = {
        "bench": "fmm3d_compare",
        "git_commit": commit,
        "host": platform.platform(),
        "cores": os.cpu_count(),
        "omp_num_threads": threads,
        "fmm3dpy": importlib.metadata.version("fmm3dpy"),
        "numpy": np.__version__,
        "unix_time": int(time.time()),
    }
    path = REPO / "benches" / "results" / "fmm3d_compare.json"
    path.write_text(json.dumps({"rows": rows, "_meta": meta}, indent=2) + "\n")
    print(f"results: {path}")


if __name__ == "__main__":
    main()
