"""The 2-D Brusselator integrated to t = 11.5 at rtol 1e-6: ``tutti ode brusselator`` beside
scipy's ``solve_ivp(method="BDF")`` (the same numerical differentiation formulas, with
SuperLU's ``splu`` on its sparse Newton matrix) on the same problem.

Run it in a throwaway virtualenv, with the CLI built in release:

    cargo build --release -p tutti-cli
    python3 -m venv /tmp/ode-peers && /tmp/ode-peers/bin/pip install numpy scipy
    /tmp/ode-peers/bin/python benches/peers/brusselator_compare.py          # N = 32, 64, 128
    /tmp/ode-peers/bin/python benches/peers/brusselator_compare.py --quick  # N = 32, 64

(``--tutti PATH`` for another binary, ``--rtol``, ``--atol``.) The problem, transcribed here
from DifferentialEquations.jl's tutorial "Solving Large Stiff Equations" (see
``crates/tutti-fit/src/brusselator.rs``): u_t = 1 + u^2 v - 4.4 u + alpha Lap u + f,
v_t = 3.4 u - u^2 v + alpha Lap v on linspace(0, 1, N)^2, periodic, alpha = 10 / dx^2,
f = 5 on the disc of radius 0.1 at (0.3, 0.6) for t >= 1.1. scipy gets the analytic
Jacobian as a sparse CSC matrix (so it never differences), the state interleaved (u, v) per
point as tutti has it. Both report steps, evaluations of f, Jacobians and factorizations;
the two final states must agree to 1e-3 relative (both are accurate to about rtol times a
global error growth; the script stops otherwise). Each solver runs once per N (a run of
several seconds is not noise-bound on this scale; the ratio is what to read). For context,
the tutorial reports about 0.5 s for CVODE_BDF with KLU at N = 32 on its machine.

Prints a table and writes ``benches/results/brusselator_compare.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp
from scipy.integrate import solve_ivp

ROOT = Path(__file__).resolve().parents[2]


def brusselator(n: int):
    """f, its sparse Jacobian and the initial state of the N x N problem, interleaved."""
    xs = np.linspace(0, 1, n)
    x, y = np.meshgrid(xs, xs, indexing="xy")
    disc = (((x - 0.3) ** 2 + (y - 0.6) ** 2) <= 0.1**2).ravel()
    a = 10.0 * (n - 1) ** 2
    points = n * n
    index = np.arange(points).reshape(n, n)  # index[j, i] = i + n j
    neighbours = [np.roll(index, s, axis).ravel() for axis in (0, 1) for s in (1, -1)]

    def lap(w):
        return sum(w[q] for q in neighbours) - 4 * w

    def f(t, state):
        u, v = state[0::2], state[1::2]
        uuv = u * u * v
        out = np.empty_like(state)
        out[0::2] = 1.0 + uuv - 4.4 * u + a * lap(u) + (5.0 * disc if t >= 1.1 else 0.0)
        out[1::2] = 3.4 * u - uuv + a * lap(v)
        return out

    p = np.arange(points)
    diffusion_rows, diffusion_cols = [], []
    for s in (0, 1):
        for q in neighbours:
            diffusion_rows.append(2 * p + s)
            diffusion_cols.append(2 * q + s)
    diffusion_rows = np.concatenate(diffusion_rows)
    diffusion_cols = np.concatenate(diffusion_cols)

    def jac(t, state):
        u, v = state[0::2], state[1::2]
        rows = np.concatenate([2 * p, 2 * p, 2 * p + 1, 2 * p + 1, diffusion_rows])
        cols = np.concatenate([2 * p, 2 * p + 1, 2 * p, 2 * p + 1, diffusion_cols])
        vals = np.concatenate([
            2 * u * v - 4.4 - 4 * a, u * u, 3.4 - 2 * u * v, -u * u - 4 * a,
            np.full(diffusion_rows.size, a),
        ])
        return sp.csc_matrix((vals, (rows, cols)), shape=(2 * points, 2 * points))

    state = np.empty(2 * points)
    state[0::2] = (22 * (y * (1 - y)) ** 1.5).ravel()
    state[1::2] = (27 * (x * (1 - x)) ** 1.5).ravel()
    return f, jac, state


def run_scipy(n: int, rtol: float, atol: float) -> dict:
    f, jac, y0 = brusselator(n)
    started = time.perf_counter()
    solution = solve_ivp(f, (0, 11.5), y0, method="BDF", rtol=rtol, atol=atol, jac=jac)
    seconds = time.perf_counter() - started
    assert solution.success, solution.message
    final = solution.y[:, -1]
    return {
        "seconds": seconds,
        "steps": int(solution.t.size - 1),
        "rhs_evaluations": int(solution.nfev),
        "jacobians": int(solution.njev),
        "factorizations": int(solution.nlu),
        "u": final[0::2],
        "v": final[1::2],
    }


def run_tutti(binary: Path, n: int, rtol: float, atol: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        result = subprocess.run(
            [str(binary), "ode", "brusselator", "--n", str(n), "--rtol", str(rtol),
             "--atol", str(atol), "--out", out, "--json", "-q"],
            check=True, capture_output=True, text=True,
        )
        wall = time.perf_counter() - started
        report = json.loads(result.stdout)
        u = np.load(Path(out) / "u.npy").ravel()
        v = np.load(Path(out) / "v.npy").ravel()
    stats = report["statistics"]
    return {
        "seconds": report["integration_seconds"],
        "process_seconds": wall,
        "steps": stats["steps"],
        "rhs_evaluations": stats["rhs_evaluations"],
        "jacobians": stats["jacobians"],
        "factorizations": stats["factorizations"],
        "u": u,
        "v": v,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tutti", type=Path, default=ROOT / "target" / "release" / "tutti")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-9)
    args = parser.parse_args()
    sizes = [32, 64] if args.quick else [32, 64, 128]
    rows = []
    print(f"{'N':>4} {'solver':<8} {'seconds':>9} {'steps':>6} {'f evals':>8} {'Jacobians':>9} "
          f"{'LUs':>5}  scipy/tutti")
    for n in sizes:
        ours = run_tutti(args.tutti, n, args.rtol, args.atol)
        theirs = run_scipy(n, args.rtol, args.atol)
        difference = max(
            np.max(np.abs(ours[s] - theirs[s])) / np.max(np.abs(theirs[s])) for s in ("u", "v")
        )
        if difference > 1e-3:
            raise SystemExit(f"N = {n}: the final states differ by {difference:.2e} relative")
        ratio = theirs["seconds"] / ours["seconds"]
        for name, r in (("tutti", ours), ("scipy", theirs)):
            print(f"{n:>4} {name:<8} {r['seconds']:>9.3f} {r['steps']:>6} "
                  f"{r['rhs_evaluations']:>8} {r['jacobians']:>9} {r['factorizations']:>5}"
                  + (f"  {ratio:.2f}x" if name == "scipy" else ""))
        rows.append({
            "n": n,
            "unknowns": 2 * n * n,
            "final_state_relative_difference": float(difference),
            "scipy_over_tutti": ratio,
            "tutti": {k: v for k, v in ours.items() if k not in ("u", "v")},
            "scipy": {k: v for k, v in theirs.items() if k not in ("u", "v")},
        })
    results = {
        "_meta": {
            "script": "benches/peers/brusselator_compare.py",
            "scipy": scipy.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "rtol": args.rtol,
            "atol": args.atol,
            "t_end": 11.5,
        },
        "cases": rows,
    }
    path = ROOT / "benches" / "results" / "brusselator_compare.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
