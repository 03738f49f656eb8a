"""The 2-D Brusselator integrated to t = 11.5 at rtol 1e-6: ``tutti ode brusselator`` on one
device, the same on two devices together (the model axis, ``--model-devices 2``: each
Newton matrix factored and solved split among them) and scipy's
``solve_ivp(method="BDF")`` (the same numerical differentiation formulas, with SuperLU's
``splu`` on its sparse Newton matrix) on the same problem.

Run it in a throwaway virtualenv, with the CLI built in release:

    cargo build --release -p tutti-cli
    python3 -m venv /tmp/ode-peers && /tmp/ode-peers/bin/pip install numpy scipy
    /tmp/ode-peers/bin/python benches/peers/brusselator_compare.py          # N = 32, 64, 128
    /tmp/ode-peers/bin/python benches/peers/brusselator_compare.py --quick  # N = 32, 64

(``--tutti PATH`` for another binary, ``--rtol``, ``--atol``, ``--sizes 32,64`` for others.)
The problem, transcribed here from DifferentialEquations.jl's tutorial "Solving Large Stiff
Equations" (see ``crates/tutti-fit/src/brusselator.rs``): u_t = 1 + u^2 v - 4.4 u + alpha
Lap u + f, v_t = 3.4 u - u^2 v + alpha Lap v on linspace(0, 1, N)^2, periodic, alpha = 10 /
dx^2, f = 5 on the disc of radius 0.1 at (0.3, 0.6) for t >= 1.1. scipy gets the analytic
Jacobian as a sparse CSC matrix (so it never differences), the state interleaved (u, v) per
point as tutti has it. tutti runs on simulated devices (``--kind cpu``): ``-d 1``, then
``-d 2 --model-devices 2``, whose final state must be bitwise that of one device. Each
solver reports steps, Newton iterations (scipy's counted by wrapping its
``solve_bdf_system``), evaluations of f, Jacobians and factorizations; the final states must
agree with scipy's to 1e-3 relative (both are accurate to about rtol times a global error
growth; the script stops otherwise). Each solver runs once per N (a run of seconds to
minutes is not noise-bound on this scale; the ratios are what to read), after the CPUs have
been idle for 2 s (``--no-wait-idle`` not to wait): on a shared machine another job's load
slows the model axis's two threads most. The table gives each time beside tutti's on one
device as a ratio, with the CPU seconds of the run and those the rest of the machine used
meanwhile (``others``: a run with many is suspect). For context, the tutorial reports about
0.5 s for CVODE_BDF with KLU at N = 32 on its machine.

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
from scipy.integrate._ivp import bdf as scipy_bdf

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


def busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy so far (Linux's /proc/stat), or None."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
    except OSError:
        return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def wait_idle(limit: float = 600.0) -> None:
    """Waits (at most ``limit`` seconds) until the CPUs have been idle for 2 s: on a shared
    machine another job's load slows the model axis's two threads most."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit:
        before = busy_seconds()
        time.sleep(2)
        after = busy_seconds()
        if before is None or after is None or after - before < 0.1 * (os.cpu_count() or 1):
            return


def measured(run) -> dict:
    """``run()``'s result with ``cpu_seconds`` (its own, this process's and its children's)
    and ``others_cpu_seconds`` (what the rest of the machine used meanwhile, None off Linux)."""
    own = sum(os.times()[:4])
    busy = busy_seconds()
    result = run()
    own = sum(os.times()[:4]) - own
    after = busy_seconds()
    # Both in the clock ticks of os.times and /proc/stat (10 ms).
    result["cpu_seconds"] = round(own, 2)
    result["others_cpu_seconds"] = (
        None if busy is None or after is None else round(max(after - busy - own, 0.0), 2)
    )
    return result


def run_scipy(n: int, rtol: float, atol: float) -> dict:
    f, jac, y0 = brusselator(n)
    # scipy does not report its Newton iterations: count them where its BDF solves the
    # implicit formula (each call returns the iterations it took).
    newton = {"iterations": 0}
    solve_bdf_system = scipy_bdf.solve_bdf_system

    def counted(*args, **kwargs):
        converged, iterations, y, d = solve_bdf_system(*args, **kwargs)
        newton["iterations"] += iterations
        return converged, iterations, y, d

    scipy_bdf.solve_bdf_system = counted
    try:
        started = time.perf_counter()
        solution = solve_ivp(f, (0, 11.5), y0, method="BDF", rtol=rtol, atol=atol, jac=jac)
        seconds = time.perf_counter() - started
    finally:
        scipy_bdf.solve_bdf_system = solve_bdf_system
    assert solution.success, solution.message
    final = solution.y[:, -1]
    return {
        "seconds": seconds,
        "steps": int(solution.t.size - 1),
        "newton_iterations": newton["iterations"],
        "rhs_evaluations": int(solution.nfev),
        "jacobians": int(solution.njev),
        "factorizations": int(solution.nlu),
        "u": final[0::2],
        "v": final[1::2],
    }


def run_tutti(binary: Path, n: int, rtol: float, atol: float, devices: int) -> dict:
    """``tutti ode brusselator`` on ``devices`` simulated devices (the model axis when 2+)."""
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        result = subprocess.run(
            [str(binary), "ode", "brusselator", "--n", str(n), "--rtol", str(rtol),
             "--atol", str(atol), "--kind", "cpu", "-d", str(devices),
             "--model-devices", str(devices), "--out", out, "--json", "-q"],
            check=True, capture_output=True, text=True,
        )
        wall = time.perf_counter() - started
        report = json.loads(result.stdout)
        u = np.load(Path(out) / "u.npy").ravel()
        v = np.load(Path(out) / "v.npy").ravel()
    stats = report["statistics"]
    assert report["model_devices"] == devices, report
    return {
        "seconds": report["integration_seconds"],
        "process_seconds": wall,
        "steps": stats["steps"],
        "newton_iterations": stats["newton_iterations"],
        "rhs_evaluations": stats["rhs_evaluations"],
        "jacobians": stats["jacobians"],
        "factorizations": stats["factorizations"],
        "u": u,
        "v": v,
    }


SOLVERS = (("tutti", "tutti x1"), ("model_axis", "tutti x2"), ("scipy", "scipy"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", type=lambda text: [int(n) for n in text.split(",")])
    parser.add_argument("--tutti", type=Path, default=ROOT / "target" / "release" / "tutti")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-9)
    parser.add_argument("--no-wait-idle", action="store_true",
                        help="start each run at once, not after the CPUs have been idle for 2 s")
    args = parser.parse_args()
    sizes = args.sizes or ([32, 64] if args.quick else [32, 64, 128])
    rows = []
    print(f"{'N':>4} {'solver':<9} {'seconds':>9} {'vs x1':>6} {'steps':>6} {'Newton':>7} "
          f"{'f evals':>8} {'Jacobians':>9} {'LUs':>5} {'CPU s':>7} {'others':>7}")
    for n in sizes:
        runs = {}
        loads = {}
        for key, _ in SOLVERS:
            if not args.no_wait_idle:
                wait_idle()
            loads[key] = os.getloadavg()[0]
            if key == "scipy":
                runs[key] = measured(lambda: run_scipy(n, args.rtol, args.atol))
            else:
                devices = 2 if key == "model_axis" else 1
                runs[key] = measured(
                    lambda: run_tutti(args.tutti, n, args.rtol, args.atol, devices)
                )
        ours, split, theirs = runs["tutti"], runs["model_axis"], runs["scipy"]
        for species in ("u", "v"):
            if not np.array_equal(ours[species], split[species]):
                raise SystemExit(f"N = {n}: the model axis's {species} is not that of one device")
        difference = max(
            np.max(np.abs(ours[species] - theirs[species])) / np.max(np.abs(theirs[species]))
            for species in ("u", "v")
        )
        if difference > 1e-3:
            raise SystemExit(f"N = {n}: the final states differ by {difference:.2e} relative")
        for key, name in SOLVERS:
            r = runs[key]
            ratio = r["seconds"] / ours["seconds"]
            print(f"{n:>4} {name:<9} {r['seconds']:>9.3f} {ratio:>5.2f}x {r['steps']:>6} "
                  f"{r['newton_iterations']:>7} {r['rhs_evaluations']:>8} {r['jacobians']:>9} "
                  f"{r['factorizations']:>5} {r['cpu_seconds']:>7.2f} "
                  f"{r['others_cpu_seconds'] or 0.0:>7.2f}", flush=True)
        rows.append({
            "n": n,
            "unknowns": 2 * n * n,
            "final_state_relative_difference": float(difference),
            "scipy_over_tutti": theirs["seconds"] / ours["seconds"],
            "model_axis_over_tutti": split["seconds"] / ours["seconds"],
            "load_average_before": loads,
            **{key: {k: v for k, v in runs[key].items() if k not in ("u", "v")}
               for key, _ in SOLVERS},
        })
    results = {
        "_meta": {
            "script": "benches/peers/brusselator_compare.py",
            "scipy": scipy.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "tutti_devices": "simulated (--kind cpu): -d 1; -d 2 --model-devices 2",
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
