"""tutti's SRC against its peers on the inputs of ``sweep_compare``: the reference Python
implementation of the method (PyPI ``src-method``) and quimb's compressed MPO-MPS application.

Run it in a throwaway virtualenv (the peers are installed there, never vendored), with
libtutti built in release:

    cargo build --release -p tutti-capi
    python3 -m venv /tmp/sweep-peers
    /tmp/sweep-peers/bin/pip install numpy src-method quimb threadpoolctl
    export TUTTI_LIB=target/release/libtutti.so
    /tmp/sweep-peers/bin/python benches/peers/sweep_compare.py --threads 1   # one pinned core
    /tmp/sweep-peers/bin/python benches/peers/sweep_compare.py --threads 2   # both cores
    /tmp/sweep-peers/bin/python benches/peers/sweep_compare.py --markdown    # tables from JSON

(``--repeats R``, ``--seeds K``, ``--quick`` for the D_psi = 64 case only, ``--skip a,b`` to
leave out methods whose names contain a or b.)

Inputs: the same trains as ``benches/src/bin/sweep_compare.rs``, rebuilt here bit for bit (its
xorshift stream and scaling, its XXZ MPO with J = 1, Delta = 0.5, h = 0), in tutti's layout
(MPO cores (Dl, d_out, d_in, Dr), MPS cores (Dl, d, Dr)) and converted to the peers' layout
(quimb's default: MPO (l, r, u, d), MPS (l, r, p), boundary cores without the outer bond;
``u`` is the output leg, contracted with the next layer's ``d``). The conversions and every
method's conventions are checked first on a small case against dense numpy products.

Methods, all at the same chi, seed 1, best of ``--repeats`` runs in this one process, the
runs interleaved (round-robin, the starting method rotating) so that every method sees the same
background load; a method slower than 30 s runs once:

- tutti ``src`` through the ctypes bindings, 1 simulated device (its threads: the pinned
  cores) and 2 simulated devices;
- src-method ``src`` (numpy + opt_einsum);
- quimb: the lazily gated stack compressed by ``tensor_network_1d_compress`` with
  ``method="src"`` (quimb's own SRC), ``"zipup"``, ``"fit"`` (10 sweeps, its default) and
  ``"direct"`` (contract, canonicalize, truncate by SVD: what tutti's ``compress_exact`` does,
  the usual "optimal" baseline, though not a global optimum: ``"fit"`` can beat it), and for
  the one-MPO cases ``MatrixProductOperator.apply(psi, compress=True, max_bond=chi)``;
- the same three SRCs oversampled to the paper's sketch width
  ``s = max(ceil(1.5 chi), chi + 10)``, then truncated to chi by SVD (tutti ``oversample = s -
  chi``, src-method ``oversample=None``, quimb ``"src-oversample"`` with
  ``max_bond_oversample = s``).

Cutoffs are 0 everywhere (every method keeps chi). ``--threads N`` pins the process to N
cores (``sched_setaffinity``, inherited by every thread: tutti sizes its device's pool by the
cores available to it) and sets OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS to N
before numpy loads. ``--threads 1`` is the reference comparison: OpenBLAS threads spin while
they wait, so with other processes on the cores the 2-thread numpy runs slow down far more
than tutti's (up to 75x seen), which would flatter tutti. One JSON entry per thread count.

Error: ``||y - X|| / ||X||`` with X the exact product, never formed: ``<y|y> - 2 Re <y|X> +
<X|X>`` by transfer-matrix contractions over the trains, layer by layer (numpy); for the SRCs
also over seeds 1..K, since tutti (ChaCha8 streams) and the peers (numpy's ``default_rng``,
shared by src-method and quimb, whose results coincide) draw different sketches. The script
prints a table and writes ``benches/results/sweep_peers.json`` with a ``_meta`` block.
"""

from __future__ import annotations

import argparse
import os
import sys

# Thread counts must be set before numpy (and its BLAS) loads.
_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
_parser.add_argument("--repeats", type=int, default=3)
_parser.add_argument("--quick", action="store_true", help="the D_psi = 64 XXZ case only")
_parser.add_argument("--seeds", type=int, default=5, help="seeds for the SRC error spread")
_parser.add_argument("--skip", default="", help="comma-separated method names to skip")
_parser.add_argument(
    "--markdown",
    action="store_true",
    help="print the saved results as Markdown tables, run nothing",
)
_ARGS = _parser.parse_args()
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = str(_ARGS.threads)
# Pin the process (and every thread it starts: BLAS, rayon, tutti's devices) to the first
# --threads cores it may use: tutti sizes its pools by the cores available to it.
_CORES = sorted(os.sched_getaffinity(0))[: _ARGS.threads]
os.sched_setaffinity(0, _CORES)

import importlib.metadata  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

import quimb.tensor as qtn  # noqa: E402
import src_method  # noqa: E402
import tutti  # noqa: E402
from quimb.tensor.tn1d.compress import tensor_network_1d_compress  # noqa: E402

SEED = 1
MASK = (1 << 64) - 1


# ----------------------------------------------------------------------------------------
# Inputs, exactly as benches/src/bin/sweep_compare.rs builds them (tutti's layout)


def rust_random_train(n: int, bond: int, operator: bool, seed: int) -> list[np.ndarray]:
    """``random_train`` of the Rust bench: its xorshift stream, uniform [-1, 1) draws scaled
    by sqrt(3 / (Dl * phys)), C order over (Dl, 2, [2,] Dr)."""
    state = ((seed * 0x9E3779B97F4A7C15) & MASK) | 1
    cores = []
    for k in range(n):
        left = 1 if k == 0 else bond
        right = 1 if k + 1 == n else bond
        dims = (left, 2, 2, right) if operator else (left, 2, right)
        size = math.prod(dims)
        raw = np.empty(size, dtype=np.uint64)
        for i in range(size):
            state ^= (state << 13) & MASK
            state ^= state >> 7
            state ^= (state << 17) & MASK
            raw[i] = state >> 11
        scale = math.sqrt(3.0 / (size // right))
        cores.append((scale * (raw.astype(np.float64) / float(1 << 52) - 1.0)).reshape(dims))
    return cores


def heisenberg_xxz(n: int, j: float = 1.0, delta: float = 0.5, h: float = 0.0):
    """tutti's ``heisenberg_xxz``: bond 5, upper-triangular W, H = sum J/2 (S+S- + S-S+) +
    Delta SzSz - h Sz."""
    eye = np.eye(2)
    sz = np.diag([0.5, -0.5])
    sp = np.array([[0.0, 1.0], [0.0, 0.0]])
    sm = sp.T
    w = np.zeros((5, 5, 2, 2))
    w[0, 0], w[0, 1], w[0, 2], w[0, 3], w[0, 4] = eye, sp, sm, sz, -h * sz
    w[1, 4], w[2, 4], w[3, 4], w[4, 4] = j / 2 * sm, j / 2 * sp, delta * sz, eye
    bulk = w.transpose(0, 2, 3, 1)  # (Dl, out, in, Dr)
    return [bulk[:1]] + [bulk.copy() for _ in range(n - 2)] + [bulk[:, :, :, 4:]]


def dense_xxz(n: int, j: float, delta: float, h: float) -> np.ndarray:
    sz = np.diag([0.5, -0.5])
    sp = np.array([[0.0, 1.0], [0.0, 0.0]])
    sm = sp.T

    def site_op(op, k):
        return np.kron(np.kron(np.eye(2**k), op), np.eye(2 ** (n - k - 1)))

    total = np.zeros((2**n, 2**n))
    for k in range(n - 1):
        total += j / 2 * (site_op(sp, k) @ site_op(sm, k + 1) + site_op(sm, k) @ site_op(sp, k + 1))
        total += delta * site_op(sz, k) @ site_op(sz, k + 1)
    for k in range(n):
        total -= h * site_op(sz, k)
    return total


# ----------------------------------------------------------------------------------------
# Layouts


def to_peer(cores: list[np.ndarray]) -> list[np.ndarray]:
    """tutti's layout to quimb's default (also src-method's): MPO (l, r, u, d), MPS (l, r, p),
    without the outer bond at the two ends."""
    n = len(cores)
    out = []
    for k, core in enumerate(cores):
        a = core.transpose(0, 3, 1, 2) if core.ndim == 4 else core.transpose(0, 2, 1)
        if k == 0:
            a = a[0]
        elif k == n - 1:
            a = a[:, 0]
        out.append(np.ascontiguousarray(a))
    return out


def from_peer_mps(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """An MPS in (l, r, p) layout with rank-2 ends back to tutti's (Dl, d, Dr)."""
    n = len(arrays)
    out = []
    for k, a in enumerate(np.asarray(x) for x in arrays):
        if k == 0:
            a = a[None]
        elif k == n - 1:
            a = a[:, None]
        out.append(np.ascontiguousarray(a.transpose(0, 2, 1)))
    return out


def from_quimb_mps(mps) -> list[np.ndarray]:
    """A quimb MPS to tutti's layout, by index names (whatever its array order)."""
    n = mps.L
    tensors = [mps[mps.site_tag(k)] for k in range(n)]
    out = []
    for k, t in enumerate(tensors):
        left = list(qtn.bonds(tensors[k - 1], t)) if k > 0 else []
        right = list(qtn.bonds(t, tensors[k + 1])) if k + 1 < n else []
        assert len(left) <= 1 and len(right) <= 1, "multibond in a compressed MPS"
        inds = left + [mps.site_ind(k)] + right
        a = t.transpose(*inds).data
        if k == 0:
            a = a[None]
        if k == n - 1:
            a = a[..., None]
        out.append(np.ascontiguousarray(a))
    return out


def quimb_stack(layers: list[list[np.ndarray]]):
    """The stack [U_1, ..., U_m, psi] as quimb objects: (list of MPOs, MPS)."""
    mpos = [qtn.MatrixProductOperator(to_peer(c), shape="lrud") for c in layers[:-1]]
    psi = qtn.MatrixProductState(to_peer(layers[-1]), shape="lrp")
    return mpos, psi


def quimb_lazy(mpos, psi):
    """U_1 ... U_m |psi> gated lazily (U_m first)."""
    tn = psi
    for mpo in reversed(mpos):
        tn = tn.gate_with_op_lazy(mpo)
    return tn


# ----------------------------------------------------------------------------------------
# Contractions


def dense_mps(cores):
    vector = np.ones((1, 1))
    for core in cores:
        vector = np.einsum("pa,asb->psb", vector, core).reshape(-1, core.shape[-1])
    return vector[:, 0]


def dense_mpo(cores):
    matrix = np.ones((1, 1, 1))
    for core in cores:
        o, i = core.shape[1], core.shape[2]
        matrix = np.einsum("pqa,aoib->poqib", matrix, core)
        matrix = matrix.reshape(matrix.shape[0] * o, matrix.shape[2] * i, core.shape[-1])
    return matrix[:, :, 0]


def dense_stack(layers):
    vector = dense_mps(layers[-1])
    for mpo in reversed(layers[:-1]):
        vector = dense_mpo(mpo) @ vector
    return vector


def _contract(a, ia, b, ib):
    shared = [x for x in ia if x in ib]
    r = np.tensordot(a, b, axes=([ia.index(x) for x in shared], [ib.index(x) for x in shared]))
    return r, [x for x in ia if x not in shared] + [x for x in ib if x not in shared]


def sandwich(top, bottom) -> complex:
    """sum_x conj(T(x)) B(x) for two stacks [U_1, ..., U_m, psi] (tutti layout), by a
    transfer-matrix sweep contracting one core at a time (no train is fused)."""
    n = len(bottom[0])
    names = [("L", "t", j) for j in range(len(top))] + [("L", "b", j) for j in range(len(bottom))]
    env = np.ones([1] * len(names))

    def legs(side, j, last, core):
        phys = lambda i: "phys" if i == 0 else (side + "u", i)  # noqa: E731
        if j == last:  # the MPS
            return [("L", side, j), phys(j), ("R", side, j)]
        return [("L", side, j), phys(j), phys(j + 1), ("R", side, j)]

    for k in range(n):
        mb, mt = len(bottom) - 1, len(top) - 1
        for j in range(mb, -1, -1):
            env, names = _contract(env, names, bottom[j][k], legs("b", j, mb, bottom[j][k]))
        for j in range(0, mt + 1):
            core = np.conj(top[j][k])
            env, names = _contract(env, names, core, legs("t", j, mt, core))
        names = [("L",) + x[1:] if x[0] == "R" else x for x in names]
    return complex(env.reshape(-1)[0])


def relative_error(y: list[np.ndarray], layers, xx: float) -> float:
    yy = sandwich([y], [y]).real
    yx = sandwich([y], layers).real
    return math.sqrt(max(yy - 2.0 * yx + xx, 0.0) / xx)


# ----------------------------------------------------------------------------------------
# Methods: each takes the prepared inputs and returns an MPS in tutti's layout


def tutti_src(devices, oversample=0):
    def run(prep, chi, seed=SEED):
        out = tutti.src(prep["tutti"], chi, oversample=oversample, seed=seed, devices=devices)
        return out.cores()

    return run


def srcmethod_src(oversample=1.0):
    def run(prep, chi, seed=SEED):
        return from_peer_mps(
            src_method.src(*prep["peer"], chi_out=chi, oversample=oversample, seed=seed)
        )

    return run


def quimb_compress(method, seeded=False, **opts):
    def run(prep, chi, seed=SEED):
        if seeded:
            opts["seed"] = seed
        mpos, psi = prep["quimb"]
        tn = quimb_lazy(mpos, psi)
        out = tensor_network_1d_compress(
            tn, max_bond=chi, cutoff=0.0, method=method, inplace=True, **opts
        )
        return from_quimb_mps(out)

    return run


def quimb_apply(prep, chi, seed=SEED):  # noqa: ARG001 - deterministic
    mpos, psi = prep["quimb"]
    (mpo,) = mpos
    out = mpo.apply(psi, compress=True, max_bond=chi, cutoff=0.0)
    return from_quimb_mps(out)


def sketch_width(chi: int) -> int:
    """The paper's oversampled sketch width (src-method's ``oversample=None``)."""
    return max((3 * chi + 1) // 2, chi + 10)


def methods_for(chi: int, depth: int):
    s = sketch_width(chi)
    rows = [
        ("tutti src (1 device)", "src", tutti_src(1)),
        ("tutti src (2 devices)", "src", tutti_src(2)),
        ("src-method src", "src", srcmethod_src()),
        ("quimb src", "src", quimb_compress("src", seeded=True)),
        ("quimb zipup", "other", quimb_compress("zipup")),
        ("quimb fit", "other", quimb_compress("fit", seeded=True)),
        ("quimb direct (contract + SVD truncation)", "other", quimb_compress("direct")),
    ]
    if depth == 1:
        rows.append(("quimb MPO.apply(compress=True)", "other", quimb_apply))
    rows += [
        (f"tutti src + oversample to {s}", "src-os", tutti_src(1, oversample=s - chi)),
        (f"src-method src, oversample=None ({s})", "src-os", srcmethod_src(oversample=None)),
        (
            f"quimb src-oversample ({s})",
            "src-os",
            quimb_compress(
                "src-oversample", seeded=True, max_bond_oversample=s, cutoff_oversample=0.0
            ),
        ),
    ]
    skip = {x.strip() for x in _ARGS.skip.split(",") if x.strip()}
    return [r for r in rows if not any(sk in r[0] for sk in skip)]


def prepare(layers):
    return {
        "tutti": [tutti.Train(c) for c in layers],
        "peer": [to_peer(c) for c in layers],
        "quimb": quimb_stack(layers),
    }


# ----------------------------------------------------------------------------------------
# Checks on a small case: the layouts and every method's conventions against dense products


def check_conventions() -> None:
    # The XXZ MPO against the dense Hamiltonian.
    for n in (2, 3, 4, 5):
        got = dense_mpo(heisenberg_xxz(n, 1.0, 0.5, 0.0))
        assert np.allclose(got, dense_xxz(n, 1.0, 0.5, 0.0), atol=1e-14), f"XXZ n={n}"
    rng = np.random.default_rng(7)

    def rand(n, bond, phys):
        return [
            rng.standard_normal((1 if k == 0 else bond, *phys, 1 if k == n - 1 else bond))
            for k in range(n)
        ]

    n = 5
    a, b, c = rand(n, 3, (2, 2)), rand(n, 2, (2, 2)), rand(n, 2, (2, 2))
    psi = rand(n, 3, (2,))
    # The layout conversions, through quimb's own dense forms.
    q_mpo = qtn.MatrixProductOperator(to_peer(a), shape="lrud")
    q_psi = qtn.MatrixProductState(to_peer(psi), shape="lrp")
    q_dense = q_mpo.to_dense(q_mpo.upper_inds, q_mpo.lower_inds)
    assert np.allclose(q_dense, dense_mpo(a), atol=1e-12), "MPO layout (u = output rows)"
    assert np.allclose(q_psi.to_dense().ravel(), dense_mps(psi), atol=1e-12), "MPS layout"
    assert np.allclose(dense_mps(from_peer_mps(to_peer(psi))), dense_mps(psi)), "round trip"
    assert np.allclose(dense_mps(from_quimb_mps(q_psi)), dense_mps(psi)), "quimb round trip"
    # The contraction used for the errors.
    for stack in ([a, psi], [a, b, c, psi]):
        x = dense_stack(stack)
        assert abs(sandwich(stack, stack) - x @ x) <= 1e-10 * (x @ x), "sandwich <X|X>"
        assert abs(sandwich([psi], stack) - dense_mps(psi) @ x) <= 1e-10 * (x @ x), "<psi|X>"
    # Every method with chi above every exact bond reproduces the dense product (the stack
    # order, the legs each peer contracts, the output conversion); a small chi truncates.
    for stack in ([a, psi], [a, b, c, psi]):
        x = dense_stack(stack)
        prep = prepare(stack)
        for name, _, run in methods_for(64, len(stack) - 1):
            if "oversample" in name:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                y = run(prep, 64)
            err = np.linalg.norm(dense_mps(y) - x) / np.linalg.norm(x)
            assert err < 1e-10, f"{name} on depth {len(stack) - 1}: dense error {err:.2e}"
            y = run(prep, 2)
            assert max(core.shape[-1] for core in y) <= 2, f"{name}: bond above chi"
            err_contracted = relative_error(y, stack, float(x @ x))
            err_dense = np.linalg.norm(dense_mps(y) - x) / np.linalg.norm(x)
            assert abs(err_contracted - err_dense) < 1e-8, f"{name}: error by contraction"
        for t in prep["tutti"]:
            t.close()
    print("conventions: XXZ MPO, layouts, <.|.> contraction, every method exact at large chi: ok")


# ----------------------------------------------------------------------------------------


def cases():
    n = 32
    h = heisenberg_xxz(n, 1.0, 0.5, 0.0)
    out = []
    for d_psi in (64, 128):
        out.append(
            (
                f"Heisenberg XXZ (n = {n}) x random MPS, D_psi = {d_psi}",
                [h, rust_random_train(n, d_psi, False, d_psi)],
                d_psi,
            )
        )
    if _ARGS.quick:
        return out[:1]
    out.append(
        (
            "depth-3 stack: three random MPOs (D = 3) x random MPS (D = 16), n = 16",
            [
                rust_random_train(16, 3, True, 11),
                rust_random_train(16, 3, True, 12),
                rust_random_train(16, 3, True, 13),
                rust_random_train(16, 16, False, 14),
            ],
            64,
        )
    )
    out.append(
        (
            f"random MPO (D_H = 8) x random MPS (D_psi = 64), n = {n}",
            [rust_random_train(n, 8, True, 21), rust_random_train(n, 64, False, 22)],
            64,
        )
    )
    return out


def markdown() -> None:
    """The saved results as Markdown tables, one per thread count."""
    document = json.loads((REPO / "benches" / "results" / "sweep_peers.json").read_text())
    for threads, run in document["by_threads"].items():
        meta = run["_meta"]
        load = ", ".join(f"{x:.1f}" for x in meta["load_average_end"])
        print(
            f"\n{threads} core(s) pinned, BLAS threads {meta['blas_threads']}, tutti device "
            f"threads {meta['tutti_device_threads']}, best of {meta['repeats']} interleaved runs, "
            f"load average at the end {load} ({meta['cores']} cores); src-method "
            f"{meta['src_method']}, quimb {meta['quimb']}, numpy {meta['numpy']} "
            f"({meta['blas']}), commit {meta['git_commit'][:10]}"
            f"{' + local changes' if meta['git_dirty'] else ''}.\n"
        )
        print(
            "| case | method | time (s) | time / tutti | error (seed 1) | error / SVD truncation "
            f"| mean error, seeds {SEED}-{SEED + meta.get('seeds', 5) - 1} |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for row in run["cases"]:
            short = (
                row["case"]
                .split(":")[0]
                .split(", n =")[0]
                .replace("Heisenberg ", "")
                .replace(" (n = 32)", "")
            )
            for r in row["methods"]:
                ratio = r.get("error_over_svd_truncation")
                mean = r.get("error_seed_mean")
                print(
                    f"| {short} | {r['method']} | {r['seconds']:.3f} | "
                    f"{r['time_over_tutti']:.2f} | {r['error']:.4f} | "
                    f"{'' if ratio is None else f'{ratio:.3f}'} | "
                    f"{'' if mean is None else f'{mean:.4f}'} |"
                )


def main() -> None:
    if _ARGS.markdown:
        markdown()
        return
    lib = tutti.library_path()
    print(
        f"sweep_peers: tutti {tutti.version()} ({lib}), src-method "
        f"{src_method.__version__}, quimb {importlib.metadata.version('quimb')}, numpy "
        f"{np.__version__}; pinned to cores {_CORES}, BLAS threads {_ARGS.threads}, tutti device "
        f"threads {tutti.device_info(tutti.Kind.CPU, 1, 0).threads}, load {os.getloadavg()}"
    )
    check_conventions()
    rust = {}
    rust_path = REPO / "benches" / "results" / "sweep_compare.json"
    if rust_path.is_file():
        rust = {c["case"]: c for c in json.loads(rust_path.read_text())["cases"]}
    rows = []
    for name, layers, chi in cases():
        xx = sandwich(layers, layers).real
        prep = prepare(layers)
        print(f"\n{name}: chi {chi}, ||X|| = {math.sqrt(xx):.6e}, load {os.getloadavg()[0]:.2f}")
        methods = methods_for(chi, len(layers) - 1)
        times = {m[0]: [] for m in methods}
        outputs, loads = {}, {m[0]: [] for m in methods}
        # Interleaved rounds (the starting method rotating), so that every method sees the
        # same background load; a method slower than 30 s runs once.
        for round_ in range(_ARGS.repeats):
            shift = round_ % len(methods)
            for method, _, run in methods[shift:] + methods[:shift]:
                if times[method] and min(times[method]) > 30.0:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    started = time.perf_counter()
                    y = run(prep, chi)
                    times[method].append(time.perf_counter() - started)
                loads[method].append(os.getloadavg()[0])
                outputs.setdefault(method, y)
        results = []
        for method, group, _ in methods:
            y = outputs[method]
            error = relative_error(y, layers, xx)
            results.append(
                {
                    "method": method,
                    "group": group,
                    "seconds": min(times[method]),
                    "runs": [round(t, 4) for t in times[method]],
                    "error": error,
                    "max_bond": max(core.shape[-1] for core in y),
                    "load_1min": [round(x, 2) for x in loads[method]],
                }
            )
            r = results[-1]
            print(
                f"  {method:<44} {r['seconds']:9.3f} s (runs {len(r['runs'])}, median "
                f"{float(np.median(r['runs'])):.3f})  error {error:.4e}  bond {r['max_bond']}"
            )
        # The SRC errors over seeds 1..--seeds (the sketches differ between tutti, which
        # draws from ChaCha8 streams, and the peers, which share numpy's default_rng: one
        # seed's error says little, the spread does).
        for (method, group, run), r in zip(methods, results, strict=True):
            if group == "other" or "2 devices" in method:
                continue
            errors = [r["error"]]
            for seed in range(SEED + 1, SEED + _ARGS.seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    errors.append(relative_error(run(prep, chi, seed), layers, xx))
            r["error_seeds"] = errors
            r["error_seed_mean"] = float(np.mean(errors))
            print(
                f"  {method:<44} error over seeds {SEED}..{SEED + len(errors) - 1}: mean "
                f"{np.mean(errors):.4e}, range {min(errors):.4e} .. {max(errors):.4e}"
            )
        base = next(r for r in results if r["method"] == "tutti src (1 device)")
        base_os = next(
            (r for r in results if r["method"].startswith("tutti src + oversample")), None
        )
        svd = next((r for r in results if r["method"].startswith("quimb direct")), None)
        for r in results:
            ref = base_os if r["group"] == "src-os" and base_os else base
            r["time_over_tutti"] = r["seconds"] / ref["seconds"]
            r["tutti_reference"] = ref["method"]
            if svd:
                r["error_over_svd_truncation"] = r["error"] / svd["error"]
        row = {"case": name, "chi": chi, "norm": math.sqrt(xx), "methods": results}
        if name in rust:
            row["rust_bench"] = {
                k: rust[name].get(k)
                for k in ("src_error", "optimal_error", "src_seconds", "exact_seconds")
            }
            same = rust[name].get("src_error")
            if same is not None:
                diff = abs(base["error"] - same) / same
                row["rust_bench"]["tutti_error_difference"] = diff
                print(f"  tutti error vs the Rust bench (same inputs): rel. difference {diff:.1e}")
        rows.append(row)
        for t in prep["tutti"]:
            t.close()

    print("\ncase | method | time s | error | error / SVD truncation | time / tutti")
    for row in rows:
        for r in row["methods"]:
            print(
                f"{row['case'][:40]:<40} | {r['method']:<44} | {r['seconds']:8.3f} | "
                f"{r['error']:.4f} | {r.get('error_over_svd_truncation', float('nan')):.3f} | "
                f"{r['time_over_tutti']:7.2f}"
            )
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.strip()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    blas = np.__config__.CONFIG.get("Build Dependencies", {}).get("blas", {})
    try:  # the thread pools numpy and scipy actually run with, when threadpoolctl is there
        import threadpoolctl

        pools = [
            f"{p['internal_api']} {p['version']} ({p['prefix']}): {p['num_threads']} threads"
            for p in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        pools = None
    meta = {
        "bench": "sweep_peers",
        "git_commit": commit,
        "git_dirty": bool(dirty),
        "host": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_end": os.getloadavg(),
        "blas": f"{blas.get('name')} {blas.get('version')}",
        "blas_threads": _ARGS.threads,
        "thread_pools": pools,
        "pinned_cores": _CORES,
        "tutti_device_threads": tutti.device_info(tutti.Kind.CPU, 1, 0).threads,
        "tutti_devices": "1 simulated CPU device (all pinned cores) and 2",
        "repeats": _ARGS.repeats,
        "quick": _ARGS.quick,
        "seed": SEED,
        "seeds": _ARGS.seeds,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "quimb": importlib.metadata.version("quimb"),
        "src_method": src_method.__version__,
        "opt_einsum": importlib.metadata.version("opt_einsum"),
        "cotengra": importlib.metadata.version("cotengra"),
        "tutti_version": ".".join(map(str, tutti.version())),
        "tutti_library": str(lib),
        "tutti_library_mtime": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(Path(lib).stat().st_mtime)
        ),
        "unix_time": int(time.time()),
    }
    # One entry per thread count, so that the pinned 1-core run and the all-core run sit side
    # by side; a run replaces only its own entry.
    path = REPO / "benches" / "results" / "sweep_peers.json"
    runs = {}
    if path.is_file():
        try:
            runs = json.loads(path.read_text()).get("by_threads", {})
        except (json.JSONDecodeError, AttributeError):
            runs = {}
    runs[str(_ARGS.threads)] = {"cases": rows, "_meta": meta}
    document = {"by_threads": dict(sorted(runs.items())), "_meta": meta}
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
