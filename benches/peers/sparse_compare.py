"""tutti's multifrontal sparse LU (``tutti sparse solve``) against scipy's ``splu`` (SuperLU)
and MUMPS (through python-mumps) on the matrices of ``benches/src/bin/sparse_compare.rs``.

Run it in a throwaway virtualenv (the peers are installed there, never vendored), with the CLI
built in release:

    cargo build --release -p tutti-cli
    python3 -m venv /tmp/sparse-peers
    /tmp/sparse-peers/bin/pip install numpy scipy threadpoolctl
    # MUMPS, optional: python-mumps (import name ``mumps``; PyPI has no ``mumps`` distribution)
    # builds against the sequential MUMPS of Debian, whose reference BLAS would handicap it:
    apt-get install libmumps-seq-dev libopenblas0-serial   # libblas.so.3 -> OpenBLAS (serial)
    /tmp/sparse-peers/bin/pip install python-mumps
    /tmp/sparse-peers/bin/python benches/peers/sparse_compare.py            # ~1.5 min on 2 cores
    /tmp/sparse-peers/bin/python benches/peers/sparse_compare.py --quick    # k = 24, N = 128
    /tmp/sparse-peers/bin/python benches/peers/sparse_compare.py --markdown # tables from JSON

(``--repeats R``, ``--tutti PATH`` for another binary, ``--skip a,b`` to leave out solvers
whose names contain a or b.) Without python-mumps the MUMPS rows are skipped with a note.

Matrices, built with scipy exactly as ``tutti_sparse::models`` builds them (points numbered
``x + nx (y + ny z)``, x fastest, unknown ``point * b + species``):

- the 3-D Laplacian ``laplacian(&[k, k, k])``, k = 24 and 32: 6 on the diagonal, -1 to each
  of the 6 grid neighbours, Dirichlet (neighbours across the boundary dropped);
- the 2-D reaction-diffusion ``reaction_diffusion(&[N, N], 2, 1.0)``, N = 128 and 256 (what
  ``tutti sparse solve --model reaction-diffusion`` builds with its defaults, species 2 and
  shift 1): ``shift + 1 + 2 d (1 + s)`` on the diagonal, ``-c_st`` between the species of a
  point (``c_01 = -0.25``, ``c_10 = 0.25``), ``-(1 + s)`` to species s at the 4 neighbours.

The consistency check, per case: the scipy matrix is written to a Matrix Market file
(coordinate real general, values by ``repr``, read back by scipy to the bit), and tutti
solves both the file and its own model (``--ordering nd`` on both, the file with ``--block``
the species count as the model gets by default; b = A 1 on both): identical matrices give
identical analyses and factors, so the two runs must report the same unknowns, nnz, fronts,
nnz(L+U) (``factor_nnz``), flops, and the same backward error, residual and ``max |x - 1|``
to the bit. The script stops at the first difference.

Solvers, each on the same CSC/COO matrix and b = A 1, best of ``--repeats`` runs, the runs
interleaved (round-robin, the starting solver rotating) so that every solver sees the same
background load; a solver slower than 30 s runs once:

- ``tutti sparse solve --matrix A.mtx --ordering nd --block b -d 1 --kind cpu --json`` and the
  same with ``-d 2`` (two simulated devices on the host's cores): its own ``timings``,
  ordering + symbolic + factor as "analyse + factor" (the matrix read excluded, nothing
  subtracted), ``solve`` as the solve (it includes tutti's iterative refinement: one step on
  the Laplacians, none on reaction-diffusion), ``relative_residual`` as the residual;
- ``scipy.sparse.linalg.splu(A_csc, permc_spec=...)`` with its default ``COLAMD``, with
  ``MMD_AT_PLUS_A`` (minimum degree on A^T + A, for symmetric patterns), and with
  ``MMD_AT_PLUS_A`` in SuperLU's symmetric mode (``options={"SymmetricMode": True}``,
  ``diag_pivot_thresh=0``: the diagonal pivots kept, SuperLU's advice for symmetric patterns
  with a large diagonal, as all of these are): the call's wall time is analyse + factor,
  ``lu.solve(b)`` the solve;
- MUMPS (python-mumps, sequential MUMPS, unsymmetric LU, ``ordering="auto"``, its default
  pivot threshold 0.01): ``analyze`` + ``factor(reuse_analysis=True)`` timed, the matrix handed
  over before the clock starts, ``solve(b)`` the solve.

Threads: the BLAS of numpy, scipy and MUMPS is pinned to one thread (OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS / MKL_NUM_THREADS = 1 before numpy loads, and threadpoolctl's limit when
it is installed), since tutti factors the fronts of a device sequentially; SuperLU itself is
sequential. The process is not pinned to a core: tutti's ``-d 2`` uses both.

Residual: ``||A x - b||_inf / (||A||_inf ||x||_inf)`` for every solver (tutti's reported
``relative_residual`` is the same quantity). nnz(L+U): tutti's ``factor_nnz`` (L's unit
diagonal not counted), splu's ``lu.L.nnz + lu.U.nnz`` (scipy's L stores its unit diagonal, so
this counts n more than tutti's convention would: 0.3-1.4% on these cases), MUMPS's INFOG(29)
(the entries of its factors as it counts them). The script prints a table and writes
``benches/results/sparse_peers.json`` with a ``_meta`` block.
"""

from __future__ import annotations

import argparse
import os
import sys

# Thread counts must be set before numpy (and its BLAS) loads.
_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_parser.add_argument("--repeats", type=int, default=3)
_parser.add_argument("--quick", action="store_true", help="k = 24 and N = 128 only")
_parser.add_argument("--tutti", default=None, help="the tutti binary (target/release/tutti)")
_parser.add_argument("--skip", default="", help="comma-separated solver names to skip")
_parser.add_argument(
    "--markdown",
    action="store_true",
    help="print the saved results as Markdown tables, run nothing",
)
_ARGS = _parser.parse_args()
BLAS_THREADS = 1
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(BLAS_THREADS)

import hashlib  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy  # noqa: E402
import scipy.io  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy.sparse.linalg import splu  # noqa: E402

try:
    import threadpoolctl  # noqa: E402

    _LIMITS = threadpoolctl.threadpool_limits(limits=BLAS_THREADS)
except ImportError:
    threadpoolctl = None

try:
    import mumps  # noqa: E402

    MUMPS_ERROR = None
except Exception as err:  # noqa: BLE001 - any failure to load it means: skip MUMPS
    mumps = None
    MUMPS_ERROR = f"{type(err).__name__}: {err}"

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benches" / "results" / "sparse_peers.json"
SLOW = 30.0  # seconds: a solver slower than this runs once per case


# ----------------------------------------------------------------------------------------
# The model matrices, as tutti_sparse::models builds them


def path_adjacency(n: int) -> sp.csr_matrix:
    """The 0/1 adjacency of a path of n points (Dirichlet: no wrap)."""
    ones = np.ones(max(n - 1, 0))
    return sp.diags_array([ones, ones], offsets=[-1, 1], shape=(n, n), format="csr")


def grid_adjacency(dims: list[int]) -> sp.csr_matrix:
    """The 0/1 adjacency of the grid points numbered x + nx (y + ny z), x fastest: the last
    Kronecker factor is x."""
    total = None
    for axis in range(len(dims)):
        term = None
        for other in reversed(range(len(dims))):  # z, y, x: x is the fastest index
            factor = path_adjacency(dims[other]) if other == axis else sp.identity(dims[other])
            term = factor if term is None else sp.kron(term, factor, format="csr")
        total = term if total is None else total + term
    return sp.csr_matrix(total)


def laplacian(dims: list[int]) -> sp.csr_matrix:
    """``models::laplacian``: 2 d on the diagonal, -1 to each grid neighbour."""
    n = int(np.prod(dims))
    a = sp.identity(n, format="csr") * (2.0 * len(dims)) - grid_adjacency(dims)
    return sp.csr_matrix(a)


def reaction_coupling(s: int, t: int) -> float:
    """``c_st`` of ``models::reaction_diffusion`` (s != t)."""
    magnitude = 0.5 / (1.0 + abs(s - t))
    alternating = 1.0 if s % 2 == t % 2 else -1.0
    direction = 1.0 if t > s else -1.0
    return direction * alternating * magnitude


def reaction_diffusion(dims: list[int], species: int, shift: float) -> sp.csr_matrix:
    """``models::reaction_diffusion``: ``I_N (x) B - Adj (x) D`` with the dense reaction block
    B (``shift + 1 + 2 d (1 + s)`` on its diagonal, ``-c_st`` off it) and D = diag(1 + s);
    unknown ``point * species + s``."""
    d = len(dims)
    n = int(np.prod(dims))
    block = np.array(
        [
            [
                shift + 1.0 + 2.0 * d * (1.0 + s) if s == t else -reaction_coupling(s, t)
                for t in range(species)
            ]
            for s in range(species)
        ]
    )
    diffusion = sp.diags_array(1.0 + np.arange(species, dtype=np.float64), format="csr")
    a = sp.kron(sp.identity(n, format="csr"), sp.csr_matrix(block), format="csr") - sp.kron(
        grid_adjacency(dims), diffusion, format="csr"
    )
    return sp.csr_matrix(a)


def check_model(a: sp.csr_matrix, dims: list[int], species: int) -> None:
    """What the models promise, checked on the scipy matrix: its entry count ``N b^2 + 2 E b``
    (no entry lost to a cancellation), a symmetric pattern, and for the Laplacian the row
    sums (the neighbours a row lacks)."""
    points = int(np.prod(dims))
    edges = sum(points // n * (n - 1) for n in dims)
    a.sort_indices()
    assert a.has_canonical_format
    assert a.nnz == points * species**2 + 2 * edges * species, "model entries"
    assert np.all(a.data != 0.0), "an explicit zero"
    pattern = (a != 0).astype(np.int8)
    assert (pattern != pattern.T).nnz == 0, "pattern not symmetric"
    if species == 1:
        lacking = 2 * len(dims) - np.asarray(grid_adjacency(dims).sum(axis=1)).ravel()
        assert np.array_equal(np.asarray(a.sum(axis=1)).ravel(), lacking), "row sums"


def write_mtx(path: Path, a: sp.csr_matrix) -> None:
    """Coordinate real general, 1-based, values by ``repr`` (round-trip exact), row-major."""
    coo = a.tocoo()
    order = np.lexsort((coo.col, coo.row))
    rows, cols, vals = coo.row[order] + 1, coo.col[order] + 1, coo.data[order]
    lines = [
        "%%MatrixMarket matrix coordinate real general",
        "% written by benches/peers/sparse_compare.py",
        f"{a.shape[0]} {a.shape[1]} {a.nnz}",
    ]
    lines += [
        f"{r} {c} {v!r}"
        for r, c, v in zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")
    back = sp.csr_matrix(scipy.io.mmread(str(path)))
    back.sort_indices()
    assert back.shape == a.shape and (back != a).nnz == 0, f"{path}: not read back to the bit"


def cases() -> list[dict]:
    out = [
        {"name": "3-D Laplacian 24^3", "model": "laplacian", "dims": [24, 24, 24], "species": 1},
        {"name": "3-D Laplacian 32^3", "model": "laplacian", "dims": [32, 32, 32], "species": 1},
        {
            "name": "2-D reaction-diffusion 128^2, b = 2",
            "model": "reaction-diffusion",
            "dims": [128, 128],
            "species": 2,
        },
        {
            "name": "2-D reaction-diffusion 256^2, b = 2",
            "model": "reaction-diffusion",
            "dims": [256, 256],
            "species": 2,
        },
    ]
    if _ARGS.quick:
        out = [c for c in out if c["dims"][0] in (24, 128)]
    return out


def build(case: dict) -> sp.csr_matrix:
    if case["model"] == "laplacian":
        return laplacian(case["dims"])
    return reaction_diffusion(case["dims"], case["species"], 1.0)


# ----------------------------------------------------------------------------------------
# Solvers


def relative_residual(a: sp.csr_matrix, x: np.ndarray, b: np.ndarray) -> float:
    norm_a = float(np.max(np.asarray(abs(a).sum(axis=1)).ravel()))
    return float(np.max(np.abs(a @ x - b)) / (norm_a * np.max(np.abs(x))))


def tutti_binary() -> Path:
    path = Path(_ARGS.tutti) if _ARGS.tutti else REPO / "target" / "release" / "tutti"
    if not path.is_file():
        sys.exit(f"{path}: not built (cargo build --release -p tutti-cli)")
    return path


def tutti_run(args: list[str]) -> dict:
    """``tutti sparse solve ARGS --json``: its JSON object (the progress lines go to stderr)."""
    command = [str(tutti_binary()), "sparse", "solve", *args, "--json"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr}")
    return json.loads(done.stdout)


ANALYSIS = ("unknowns", "nnz", "fronts", "largest_front", "factor_nnz", "factor_flops")
ANALYSIS += ("solve_flops",)
NUMBERS = ("backward_error", "relative_residual", "max_error", "perturbed_pivots")


def consistency(case: dict, mtx: Path) -> dict:
    """tutti's own model against the scipy matrix through the file: the same analysis and the
    same numbers to the bit, or the script stops."""
    dims = ",".join(map(str, case["dims"]))
    model = ["--model", case["model"], "--dims", dims, "--ordering", "nd", "-d", "1"]
    if case["model"] == "reaction-diffusion":
        model += ["--species", str(case["species"]), "--shift", "1"]
    from_model = tutti_run(model + ["--kind", "cpu"])
    from_file = tutti_run(
        ["--matrix", str(mtx), "--ordering", "nd", "--block", str(case["species"])]
        + ["-d", "1", "--kind", "cpu"]
    )
    for key in ANALYSIS + NUMBERS:
        assert from_model[key] == from_file[key], (
            f"{case['name']}: tutti's model and the scipy matrix differ in {key}: "
            f"{from_model[key]} (model) against {from_file[key]} (file)"
        )
    assert from_model["max_error"] < 1e-10, f"{case['name']}: x != 1"
    return {key: from_file[key] for key in ANALYSIS + NUMBERS}


def tutti_solver(devices: int, mtx: Path, species: int):
    def run(_prep):
        out = tutti_run(
            ["--matrix", str(mtx), "--ordering", "nd", "--block", str(species)]
            + ["-d", str(devices), "--kind", "cpu"]
        )
        t = out["timings"]
        return {
            "analyse_factor": t["ordering"] + t["symbolic"] + t["factor"],
            "ordering": t["ordering"],
            "symbolic": t["symbolic"],
            "factor": t["factor"],
            "solve": t["solve"],
            "residual": out["relative_residual"],
            "factor_nnz": out["factor_nnz"],
            "flops": out["factor_flops"],
            "ordering_used": f"nd (block {species})",
            "bits": [out["relative_residual"], out["backward_error"], out["max_error"]],
            "refinements": out["refinements"],
        }

    return run


def splu_solver(permc_spec: str, symmetric_mode: bool = False):
    def run(prep):
        a, b = prep["csc"], prep["b"]
        kwargs = {"permc_spec": permc_spec}
        if symmetric_mode:
            kwargs.update(diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        started = time.perf_counter()
        lu = splu(a, **kwargs)
        factored = time.perf_counter()
        x = lu.solve(b)
        solved = time.perf_counter()
        return {
            "analyse_factor": factored - started,
            "solve": solved - factored,
            "residual": relative_residual(prep["csr"], x, b),
            "max_error": float(np.max(np.abs(x - 1.0))),
            "factor_nnz": int(lu.L.nnz + lu.U.nnz),
            "flops": None,
            "ordering_used": permc_spec + (", SymmetricMode" if symmetric_mode else ""),
        }

    return run


def mumps_solver(prep):
    # Not python-mumps 0.0.4's context manager: its __exit__ sets ``job`` on the wrapper, not
    # on the MUMPS instance, and repeats the last job; the instance frees MUMPS's factors
    # itself when collected (calling job -2 by hand then aborts: "Instance Error 1").
    b = prep["b"]
    ctx = mumps.Context()
    ctx.set_matrix(prep["coo"])
    started = time.perf_counter()
    ctx.analyze(ordering="auto")
    ctx.factor(reuse_analysis=True)
    factored = time.perf_counter()
    x = ctx.solve(b)
    solved = time.perf_counter()
    result = {
        "analyse_factor": factored - started,
        "analyse": ctx.analysis_stats.time,
        "factor": ctx.factor_stats.time,
        "solve": solved - factored,
        "residual": relative_residual(prep["csr"], x, b),
        "max_error": float(np.max(np.abs(x - 1.0))),
        "factor_nnz": int(ctx.factor_stats.nonzeros),
        "flops": float(ctx.factor_stats.flops),
        "ordering_used": ctx.analysis_stats.ordering,
    }
    return result


def solvers_for(mtx: Path, species: int):
    rows = [
        ("tutti (1 device)", tutti_solver(1, mtx, species)),
        ("tutti (2 devices)", tutti_solver(2, mtx, species)),
        ("splu COLAMD", splu_solver("COLAMD")),
        ("splu MMD_AT_PLUS_A", splu_solver("MMD_AT_PLUS_A")),
        ("splu MMD_AT_PLUS_A, symmetric mode", splu_solver("MMD_AT_PLUS_A", True)),
    ]
    if mumps is not None:
        rows.append(("MUMPS", mumps_solver))
    skip = {x.strip() for x in _ARGS.skip.split(",") if x.strip()}
    return [r for r in rows if not any(s in r[0] for s in skip)]


# ----------------------------------------------------------------------------------------
# Reports


def milliseconds(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.1f} ms"


def markdown() -> None:
    """The saved results as Markdown: one row per case (analyse + factor, nnz(L+U) in
    parentheses, for every solver), then one row per case and solver."""
    document = json.loads(RESULTS.read_text())
    meta = document["_meta"]
    load = ", ".join(f"{x:.2f}" for x in meta["load_average_end"])
    mumps_note = (
        f"MUMPS {meta['mumps_library']} through python-mumps {meta['python_mumps']} "
        f"(BLAS {meta['mumps_blas']})"
        if meta.get("python_mumps")
        else f"MUMPS skipped ({meta.get('mumps_skipped')})"
    )
    print(
        f"Best of {meta['repeats']} interleaved runs on {meta['cpu']} ({meta['cores']} cores, "
        f"load average at the end {load}); scipy {meta['scipy']} (SuperLU), {mumps_note}, "
        f"BLAS threads {meta['blas_threads']}; {meta['tutti_version']} at commit "
        f"{str(meta['git_commit'])[:10]}.\n"
    )
    solvers = [r["solver"] for r in document["cases"][0]["solvers"]]
    print("analyse + factor (nnz(L+U)):\n")
    print("| case | unknowns | " + " | ".join(solvers) + " |")
    print("| --- | --- |" + " --- |" * len(solvers))
    for case in document["cases"]:
        by_name = {r["solver"]: r for r in case["solvers"]}
        cells = [
            f"{milliseconds(by_name[n]['analyse_factor'])} ({by_name[n]['factor_nnz'] / 1e6:.2f} M)"
            if n in by_name
            else ""
            for n in solvers
        ]
        print(f"| {case['case']} | {case['unknowns']:,} | " + " | ".join(cells) + " |")
    print(
        "\n| case | solver | ordering | nnz(L+U) | analyse + factor | solve "
        "| / tutti 1 device | residual |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in document["cases"]:
        for r in case["solvers"]:
            print(
                f"| {case['case']} | {r['solver']} | {r['ordering_used']} | "
                f"{r['factor_nnz'] / 1e6:.2f} M | {milliseconds(r['analyse_factor'])} | "
                f"{milliseconds(r['solve'])} | {r['over_tutti_1_device']:.2f} | "
                f"{r['residual']:.1e} |"
            )


def git_commit() -> str | None:
    """HEAD's commit, read from .git without running git."""
    git = REPO / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(":", 1)[1].strip()
        if (git / "commondir").is_file():  # a worktree's branches live in the main .git
            git = (git / (git / "commondir").read_text().strip()).resolve()
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return None


def loaded_libraries(pattern: str) -> list[str]:
    """The shared libraries of this process whose paths match ``pattern``."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in maps if re.search(pattern, line.split()[-1])})


def mumps_version(libraries: list[str]) -> str | None:
    """The MUMPS that python-mumps loaded: the Debian package's version where dpkg knows the
    library, else the soname's."""
    for lib in libraries:
        if "libdmumps_seq" not in lib:
            continue
        try:
            owner = subprocess.run(
                ["dpkg-query", "-S", lib], capture_output=True, text=True
            ).stdout.split(":")[0]
            version = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Version}", owner], capture_output=True, text=True
            ).stdout.strip()
            if owner and version:
                return f"{version} (Debian {owner})"
        except OSError:
            pass
        found = re.search(r"libdmumps_seq-([\d.]+)\.so", lib)
        return found.group(1) if found else lib
    return None


def meta_block() -> dict:
    binary = tutti_binary()
    version = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True
    ).stdout.strip()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    pools = (
        [
            f"{p['internal_api']} {p['version']} ({p['filepath']}): {p['num_threads']} threads"
            for p in threadpoolctl.threadpool_info()
            if p.get("user_api") in ("blas", "openmp")
        ]
        if threadpoolctl
        else None
    )
    mumps_libs = loaded_libraries(r"mumps_seq|mumps_common")
    meta = {
        "bench": "sparse_peers",
        "git_commit": git_commit(),
        "host": platform.platform(),
        "hostname": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_end": os.getloadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "threadpoolctl": importlib.metadata.version("threadpoolctl") if threadpoolctl else None,
        "blas_threads": BLAS_THREADS,
        "thread_pools": pools,
        "tutti_version": version,
        "tutti_binary": str(binary),
        "tutti_binary_mtime": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(binary.stat().st_mtime)
        ),
        "tutti_binary_sha256": hashlib.sha256(binary.read_bytes()).hexdigest(),
        "tutti_devices": "simulated CPU devices (--kind cpu), 1 and 2; fronts sequential",
        "repeats": _ARGS.repeats,
        "quick": _ARGS.quick,
        "unix_time": int(time.time()),
    }
    if mumps is not None:
        meta["python_mumps"] = importlib.metadata.version("python-mumps")
        meta["mumps_library"] = mumps_version(mumps_libs)
        meta["mumps_libraries"] = mumps_libs
        blas = loaded_libraries(r"^/usr/.*(blas|lapack)")
        meta["mumps_blas"] = ", ".join(Path(p).name for p in blas) or "unknown"
        meta["mumps_blas_libraries"] = blas
    else:
        meta["mumps_skipped"] = MUMPS_ERROR
    return meta


# ----------------------------------------------------------------------------------------


def main() -> None:
    if _ARGS.markdown:
        markdown()
        return
    binary = tutti_binary()
    print(
        f"sparse_peers: {binary}, numpy {np.__version__}, scipy {scipy.__version__}, "
        + (
            f"python-mumps {importlib.metadata.version('python-mumps')}"
            if mumps is not None
            else f"MUMPS skipped ({MUMPS_ERROR})"
        )
        + f"; BLAS threads {BLAS_THREADS}, load {os.getloadavg()}"
    )
    workdir = Path(tempfile.mkdtemp(prefix="sparse-peers-"))
    rows = []
    try:
        for case in cases():
            a = build(case)
            check_model(a, case["dims"], case["species"])
            mtx = workdir / f"{case['model']}-{'x'.join(map(str, case['dims']))}.mtx"
            write_mtx(mtx, a)
            checked = consistency(case, mtx)
            print(
                f"\n{case['name']}: {a.shape[0]:,} unknowns, {a.nnz:,} entries; tutti's model "
                f"and the scipy matrix agree (nnz(L+U) {checked['factor_nnz']:,}, "
                f"{checked['factor_flops'] / 1e9:.2f} Gflop, residual "
                f"{checked['relative_residual']:.1e}, same bits); load {os.getloadavg()[0]:.2f}"
            )
            b = a @ np.ones(a.shape[0])
            prep = {"csr": a, "csc": a.tocsc(), "coo": a.tocoo(), "b": b}
            solvers = solvers_for(mtx, case["species"])
            runs = {name: [] for name, _ in solvers}
            loads = {name: [] for name, _ in solvers}
            # Interleaved rounds, the starting solver rotating, so that every solver sees the
            # same background load; a solver slower than SLOW seconds runs once.
            for round_ in range(_ARGS.repeats):
                shift = round_ % len(solvers)
                for name, run in solvers[shift:] + solvers[:shift]:
                    if runs[name] and min(r["analyse_factor"] for r in runs[name]) > SLOW:
                        continue
                    runs[name].append(run(prep))
                    loads[name].append(round(os.getloadavg()[0], 2))
            results = []
            for name, _ in solvers:
                best = min(runs[name], key=lambda r: r["analyse_factor"])
                entry = {"solver": name, **{k: v for k, v in best.items() if k != "bits"}}
                entry["solve"] = min(r["solve"] for r in runs[name])
                entry["analyse_factor_runs"] = [round(r["analyse_factor"], 4) for r in runs[name]]
                entry["solve_runs"] = [round(r["solve"], 5) for r in runs[name]]
                entry["residual"] = max(r["residual"] for r in runs[name])
                entry["load_1min"] = loads[name]
                if "bits" in best:  # tutti: the same bits in every run and on 1 and 2 devices
                    entry["same_bits_every_run"] = all(
                        r["bits"] == runs["tutti (1 device)"][0]["bits"] for r in runs[name]
                    )
                results.append(entry)
            base = next(r for r in results if r["solver"] == "tutti (1 device)")
            for r in results:
                r["over_tutti_1_device"] = r["analyse_factor"] / base["analyse_factor"]
                r["solve_over_tutti_1_device"] = r["solve"] / base["solve"]
                print(
                    f"  {r['solver']:<36} {r['ordering_used']:<27} nnz(L+U) "
                    f"{r['factor_nnz'] / 1e6:6.2f} M  analyse + factor "
                    f"{milliseconds(r['analyse_factor']):>10} ({r['over_tutti_1_device']:5.2f}x "
                    f"tutti)  solve {milliseconds(r['solve']):>8}  residual {r['residual']:.1e}"
                )
            rows.append(
                {
                    "case": case["name"],
                    "model": case["model"],
                    "dims": case["dims"],
                    "species": case["species"],
                    "unknowns": a.shape[0],
                    "nnz": a.nnz,
                    "consistency": checked,
                    "solvers": results,
                }
            )
            mtx.unlink()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print("\ncase | solver | nnz(L+U) | analyse + factor | / tutti 1 device | solve | residual")
    for row in rows:
        for r in row["solvers"]:
            print(
                f"{row['case'][:36]:<36} | {r['solver']:<36} | {r['factor_nnz'] / 1e6:6.2f} M | "
                f"{milliseconds(r['analyse_factor']):>10} | {r['over_tutti_1_device']:6.2f} | "
                f"{milliseconds(r['solve']):>8} | {r['residual']:.1e}"
            )
    document = {"cases": rows, "_meta": meta_block()}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {RESULTS}")


if __name__ == "__main__":
    main()
