"""Python bindings to tutti's C ABI (``include/tutti.h``) through ctypes.

The library is found, in order, at the path in the ``TUTTI_LIB`` environment variable, else at
the newer of ``target/release/libtutti.so`` and ``target/debug/libtutti.so`` in the repository
holding this package (build it with ``cargo build -p tutti-capi``).

Every failing call raises :class:`TuttiError`, carrying the C status and the library's message::

    >>> import tutti
    >>> major, minor, patch = tutti.version()
    >>> tutti.device_info(tutti.Kind.CPU, count=2, index=1).index
    1
    >>> tutti.device_info(tutti.Kind.CPU, count=2, index=2)
    Traceback (most recent call last):
    tutti.TuttiError: tutti_device_info: argument `index` is 2, out of range: ...
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import os
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Kind",
    "Status",
    "TuttiError",
    "DeviceInfo",
    "MAX_SIMULATED_DEVICES",
    "library_path",
    "version",
    "device_count",
    "device_info",
    "FitResult",
    "fit",
    "RhfEnergy",
    "rhf_energy",
    "ShellGradient",
    "RhfGradient",
    "rhf_gradient",
    "fmm",
    "direct_sum",
    "TrainKind",
    "Dtype",
    "Train",
    "src",
]

#: The most simulated (CPU) devices one selection may open (TUTTI_MAX_SIMULATED_DEVICES).
MAX_SIMULATED_DEVICES = 256


class Status(enum.IntEnum):
    """TuttiStatus: what every C function returns. Negative values are errors."""

    OK = 0
    ERROR_INVALID_ARGUMENT = -1
    ERROR_NULL_POINTER = -2
    ERROR_UNSUPPORTED = -3
    ERROR_DEVICE = -4
    ERROR_OUT_OF_MEMORY = -5
    ERROR_IO = -6
    ERROR_PANIC = -7
    ERROR_CALLBACK = -8
    ERROR_NOT_CONVERGED = -9


class Kind(enum.IntEnum):
    """TuttiKind: which kind of device a call uses."""

    CPU = 0
    GPU = 1
    AUTO = 2


class TrainKind(enum.IntEnum):
    """TuttiTrainKind: a state (cores (Dl, d, Dr)) or an operator (cores (Dl, d_out, d_in, Dr))."""

    MPS = 0
    MPO = 1


class Dtype(enum.IntEnum):
    """TuttiDtype: the element type of a train."""

    FLOAT64 = 0
    COMPLEX128 = 1


class TuttiError(Exception):
    """A tutti call failed.

    ``status`` is the C status (a :class:`Status` when this version knows it, else the raw
    int), ``message`` the library's ``tutti_last_error()`` for the call.
    """

    def __init__(self, status: int, message: str):
        try:
            status = Status(status)
            name = f"TUTTI_{status.name}"
        except ValueError:
            name = "TUTTI_ERROR_UNKNOWN"
        super().__init__(f"{message} ({name}, status {int(status)})")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class DeviceInfo:
    """One device of a selection (TuttiDeviceInfo, with the name copied and released)."""

    kind: Kind
    ordinal: int
    index: int
    threads: int
    free_bytes: int
    total_bytes: int
    name: str


class _CDeviceInfo(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("ordinal", ctypes.c_int),
        ("index", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("free_bytes", ctypes.c_uint64),
        ("total_bytes", ctypes.c_uint64),
        # c_void_p rather than c_char_p: ctypes would copy a c_char_p and lose the pointer
        # that tutti_free_c must release.
        ("name", ctypes.c_void_p),
    ]


class _CFitOptions(ctypes.Structure):
    _fields_ = [
        ("devices", ctypes.c_int),
        ("max_iterations", ctypes.c_int),
        ("gradient_tolerance", ctypes.c_double),
        ("step_tolerance", ctypes.c_double),
        ("cost_tolerance", ctypes.c_double),
    ]


class _CFitResult(ctypes.Structure):
    _fields_ = [
        ("cost", ctypes.c_double),
        ("iterations", ctypes.c_int),
        ("evaluations", ctypes.c_int),
        ("converged", ctypes.c_int),
    ]


class _CSrcOptions(ctypes.Structure):
    _fields_ = [
        ("chi_out", ctypes.c_int),
        ("oversample", ctypes.c_int),
        ("cutoff", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("devices", ctypes.c_int),
    ]


class _CFmmOptions(ctypes.Structure):
    _fields_ = [
        ("order", ctypes.c_int),
        ("theta", ctypes.c_double),
        ("leaf_size", ctypes.c_int),
        ("softening", ctypes.c_double),
        ("devices", ctypes.c_int),
        ("f32_far_field", ctypes.c_int),
    ]


_RESIDUAL_FN = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_double),
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_double),
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_double),
)


@dataclass(frozen=True)
class FitResult:
    """The outcome of :func:`fit`."""

    parameters: list[float]
    covariance: list[list[float]]
    cost: float
    iterations: int
    evaluations: int
    converged: bool


class _CRhfOptions(ctypes.Structure):
    _fields_ = [
        ("threads", ctypes.c_int),
        ("charge", ctypes.c_int),
        ("cartesian", ctypes.c_int),
        ("max_iterations", ctypes.c_int),
        ("energy_tolerance", ctypes.c_double),
        ("density_tolerance", ctypes.c_double),
    ]


class _CRhfResult(ctypes.Structure):
    _fields_ = [
        ("energy", ctypes.c_double),
        ("electronic_energy", ctypes.c_double),
        ("nuclear_repulsion", ctypes.c_double),
        ("delta_energy", ctypes.c_double),
        ("delta_density", ctypes.c_double),
        ("scf_seconds", ctypes.c_double),
        ("nao", ctypes.c_int),
        ("electrons", ctypes.c_int),
        ("iterations", ctypes.c_int),
        ("converged", ctypes.c_int),
    ]


@dataclass(frozen=True)
class RhfEnergy:
    """The outcome of :func:`rhf_energy`: energies in hartree, and the library's JSON summary
    (``summary``: energy, nao, shells, atoms, electrons, basis, angular, threads,
    iterations, delta_energy, delta_density, homo, lumo, timings in seconds)."""

    energy: float
    electronic_energy: float
    nuclear_repulsion: float
    nao: int
    electrons: int
    iterations: int
    converged: bool
    summary: dict


class _CGradientOptions(ctypes.Structure):
    _fields_ = [("rhf", _CRhfOptions), ("serial", ctypes.c_int)]


class _CGradientShell(ctypes.Structure):
    _fields_ = [
        ("atom", ctypes.c_int),
        ("l", ctypes.c_int),
        ("primitives", ctypes.c_int),
        ("offset", ctypes.c_int),
    ]


class _CGradientTimings(ctypes.Structure):
    _fields_ = [
        ("scf", ctypes.c_double),
        ("overlap", ctypes.c_double),
        ("core_hamiltonian", ctypes.c_double),
        ("two_electron", ctypes.c_double),
        ("fock", ctypes.c_double),
        ("total", ctypes.c_double),
    ]


class _CRhfGradient(ctypes.Structure):
    _fields_ = [
        ("energy", ctypes.c_double),
        ("iterations", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("n_shells", ctypes.c_int),
        ("n_primitives", ctypes.c_int),
        ("shells", ctypes.POINTER(_CGradientShell)),
        ("exponents", ctypes.POINTER(ctypes.c_double)),
        ("coefficients", ctypes.POINTER(ctypes.c_double)),
        ("grad_exponents", ctypes.POINTER(ctypes.c_double)),
        ("grad_coefficients", ctypes.POINTER(ctypes.c_double)),
        ("timings", _CGradientTimings),
    ]


@dataclass(frozen=True)
class ShellGradient:
    """One shell of the basis placed on an atom (:func:`rhf_gradient`): its parameters as in
    the basis set and dE/dparameter, numpy arrays over the shell's primitives. ``atom`` is
    the atom's index in the XYZ order, ``l`` the angular momentum."""

    atom: int
    l: int
    exponents: "numpy.ndarray"
    coefficients: "numpy.ndarray"
    grad_exponents: "numpy.ndarray"
    grad_coefficients: "numpy.ndarray"


@dataclass(frozen=True)
class RhfGradient:
    """The outcome of :func:`rhf_gradient`: the RHF energy (hartree), one
    :class:`ShellGradient` per shell in basis order (atoms in XYZ order, each atom's shells
    sorted by l, an SP shell split into s and p), SCF iterations, the thread count asked
    for, ``timings`` in seconds (scf, overlap, core_hamiltonian, two_electron, fock, total)
    and ``summary``, the library's JSON document parsed (energy, basis: per atom its shells
    with grad_exponents and grad_coefficients, elements: the sums over the atoms of each
    element, timings)."""

    energy: float
    shells: list[ShellGradient]
    iterations: int
    threads: int
    timings: dict
    summary: dict

    def flat(self) -> "numpy.ndarray":
        """Every dE/dparameter in one array: per shell, its dE/dalpha_i then its dE/dc_i."""
        import numpy as np

        return np.concatenate(
            [np.concatenate([s.grad_exponents, s.grad_coefficients]) for s in self.shells]
        )


_REPO = Path(__file__).resolve().parents[2]


def library_path() -> Path:
    """Where libtutti is loaded from (see the module documentation)."""
    explicit = os.environ.get("TUTTI_LIB")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"TUTTI_LIB={explicit} is not a file")
        return path
    candidates = [_REPO / "target" / profile / "libtutti.so" for profile in ("release", "debug")]
    built = [path for path in candidates if path.is_file()]
    if not built:
        raise FileNotFoundError(
            "libtutti.so not found: set TUTTI_LIB, or build it with "
            f"`cargo build -p tutti-capi` (looked in {', '.join(map(str, candidates))})"
        )
    return max(built, key=lambda path: path.stat().st_mtime)


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path()))
    int_p = ctypes.POINTER(ctypes.c_int)
    signatures = {
        "tutti_version": ([int_p, int_p, int_p], ctypes.c_int),
        "tutti_device_count": ([ctypes.c_int, int_p], ctypes.c_int),
        "tutti_device_info": (
            [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_CDeviceInfo)],
            ctypes.c_int,
        ),
        "tutti_last_error": ([], ctypes.c_char_p),
        "tutti_status_name": ([ctypes.c_int], ctypes.c_char_p),
        "tutti_free_c": ([ctypes.c_void_p], ctypes.c_int),
        "tutti_fmm_options_default": ([ctypes.POINTER(_CFmmOptions)], ctypes.c_int),
        "tutti_fmm": (
            [
                ctypes.c_int64,
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(_CFmmOptions),
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(ctypes.c_double),
            ],
            ctypes.c_int,
        ),
        "tutti_direct_sum": (
            [
                ctypes.c_int64,
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(ctypes.c_double),
                ctypes.c_double,
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(ctypes.c_double),
            ],
            ctypes.c_int,
        ),
        "tutti_rhf_options_default": ([ctypes.POINTER(_CRhfOptions)], ctypes.c_int),
        "tutti_rhf_energy": (
            [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(_CRhfOptions),
                ctypes.POINTER(_CRhfResult),
                # c_void_p: the JSON pointer must reach tutti_free_c unchanged.
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_gradient_options_default": ([ctypes.POINTER(_CGradientOptions)], ctypes.c_int),
        "tutti_rhf_gradient": (
            [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(_CGradientOptions),
                ctypes.POINTER(_CRhfGradient),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_rhf_gradient_free": ([ctypes.POINTER(_CRhfGradient)], ctypes.c_int),
        "tutti_fit_options_default": ([ctypes.POINTER(_CFitOptions)], ctypes.c_int),
        "tutti_fit": (
            [
                _RESIDUAL_FN,
                ctypes.c_void_p,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_int),
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(_CFitOptions),
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(ctypes.c_double),
                ctypes.POINTER(_CFitResult),
            ],
            ctypes.c_int,
        ),
        "tutti_train_from_arrays": (
            [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                int_p,
                ctypes.POINTER(ctypes.POINTER(ctypes.c_double)),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_train_from_dir": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "tutti_train_info": ([ctypes.c_void_p, int_p, int_p, int_p], ctypes.c_int),
        "tutti_train_shapes": ([ctypes.c_void_p, int_p, ctypes.c_size_t], ctypes.c_int),
        "tutti_train_site": (
            [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_double), ctypes.c_size_t],
            ctypes.c_int,
        ),
        "tutti_train_write_dir": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
        "tutti_train_free": ([ctypes.c_void_p], ctypes.c_int),
        "tutti_train_norm": ([ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)], ctypes.c_int),
        "tutti_train_distance": (
            [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)],
            ctypes.c_int,
        ),
        "tutti_src_options_default": ([ctypes.POINTER(_CSrcOptions)], ctypes.c_int),
        "tutti_src": (
            [
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.c_int,
                ctypes.POINTER(_CSrcOptions),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
    }
    for name, (argtypes, restype) in signatures.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype
    return lib


_lib = _load()


def _check(status: int) -> None:
    """Raises TuttiError for a negative status, with the calling thread's message."""
    if status < 0:
        message = _lib.tutti_last_error().decode("utf-8", errors="replace")
        raise TuttiError(status, message)


def _int(value: int, name: str) -> ctypes.c_int:
    """An int argument, refusing values a C int cannot hold (ctypes would wrap them)."""
    if not -(2**31) <= int(value) < 2**31:
        raise TuttiError(
            Status.ERROR_INVALID_ARGUMENT, f"argument `{name}` is {value}: too large for an int"
        )
    return ctypes.c_int(int(value))


def version() -> tuple[int, int, int]:
    """The loaded library's version as (major, minor, patch)."""
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(_lib.tutti_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch)))
    return major.value, minor.value, patch.value


def device_count(kind: Kind | int = Kind.AUTO) -> int:
    """How many devices of ``kind`` a computation may use by default.

    CPU: the host's core count. GPU: the CUDA device count (TuttiError with
    ``Status.ERROR_UNSUPPORTED`` from a library built without CUDA). AUTO: GPUs if any, else CPU.
    """
    count = ctypes.c_int()
    _check(_lib.tutti_device_count(_int(kind, "kind"), ctypes.byref(count)))
    return count.value


def device_info(kind: Kind | int, count: int, index: int) -> DeviceInfo:
    """Device ``index`` (0-based) of a selection of the first ``count`` devices of ``kind``."""
    raw = _CDeviceInfo()
    _check(
        _lib.tutti_device_info(
            _int(kind, "kind"), _int(count, "count"), _int(index, "index"), ctypes.byref(raw)
        )
    )
    try:
        name = ctypes.string_at(raw.name).decode("utf-8", errors="replace")
    finally:
        _check(_lib.tutti_free_c(raw.name))
    return DeviceInfo(
        kind=Kind(raw.kind),
        ordinal=raw.ordinal,
        index=raw.index,
        threads=raw.threads,
        free_bytes=raw.free_bytes,
        total_bytes=raw.total_bytes,
        name=name,
    )


def fit(residuals, residual_counts, initial, *, devices: int = 1, max_iterations: int | None = None) -> FitResult:
    """Least-squares fit through a Python callback (``tutti_fit``).

    ``residuals(experiment, parameters)`` returns ``(r, jacobian)`` for one experiment:
    ``r`` a sequence of ``residual_counts[experiment]`` floats, ``jacobian`` their
    derivatives, as rows (one per residual) or flat row-major. The fit minimizes
    ``0.5 * sum |r|^2`` over all experiments, split over ``devices`` simulated devices (the
    result does not depend on how many).

    An exception in the callback stops the fit (every later callback call reports failure
    without calling ``residuals``) and fails it, even where the library could have gone
    around the rejected point: an ``Exception`` is raised here as the ``__cause__`` of a
    TuttiError (``Status.ERROR_CALLBACK`` unless the library failed otherwise), and a
    ``KeyboardInterrupt`` or ``SystemExit`` is re-raised as itself.
    """
    counts = [int(c) for c in residual_counts]
    start = [float(x) for x in initial]
    n = len(start)
    raised: list[BaseException] = []

    def trampoline(_user, experiment, p, n_parameters, r, m, jac):
        if raised:  # stop: the fit will fail with the first exception anyway
            return 1
        try:
            values, jacobian = residuals(experiment, [p[i] for i in range(n_parameters)])
            flat = [float(x) for row in jacobian for x in (row if hasattr(row, "__len__") else [row])]
            if len(values) != m or len(flat) != m * n_parameters:
                raise ValueError(
                    f"experiment {experiment}: expected {m} residuals and {m * n_parameters} "
                    f"Jacobian entries, got {len(values)} and {len(flat)}"
                )
            for i in range(m):
                r[i] = float(values[i])
            for i, x in enumerate(flat):
                jac[i] = x
            return 0
        except BaseException as error:  # noqa: BLE001 - handed back to the caller below
            raised.append(error)
            return 1

    callback = _RESIDUAL_FN(trampoline)  # kept alive for the whole call
    options = _CFitOptions()
    _check(_lib.tutti_fit_options_default(ctypes.byref(options)))
    options.devices = int(devices)
    if max_iterations is not None:
        options.max_iterations = int(max_iterations)
    counts_c = (ctypes.c_int * max(len(counts), 1))(*counts)
    initial_c = (ctypes.c_double * max(n, 1))(*start)
    parameters_c = (ctypes.c_double * max(n, 1))()
    covariance_c = (ctypes.c_double * max(n * n, 1))()
    result_c = _CFitResult()
    status = _lib.tutti_fit(
        callback,
        None,
        _int(len(counts), "n_experiments"),
        counts_c,
        _int(n, "n_parameters"),
        initial_c,
        ctypes.byref(options),
        parameters_c,
        covariance_c,
        ctypes.byref(result_c),
    )
    if raised:
        first = raised[0]
        if not isinstance(first, Exception):  # KeyboardInterrupt, SystemExit: as themselves
            raise first
        if status >= 0:  # the library went around the point: the fit still fails
            status = Status.ERROR_CALLBACK
            message = (
                f"tutti_fit: the residual callback raised {type(first).__name__}: {first}"
            )
        else:
            message = _lib.tutti_last_error().decode("utf-8", errors="replace")
        raise TuttiError(status, message) from first
    _check(status)
    return FitResult(
        parameters=[parameters_c[i] for i in range(n)],
        covariance=[[covariance_c[i * n + j] for j in range(n)] for i in range(n)],
        cost=result_c.cost,
        iterations=result_c.iterations,
        evaluations=result_c.evaluations,
        converged=bool(result_c.converged),
    )


def rhf_energy(
    xyz,
    basis: str,
    *,
    threads: int = 0,
    charge: int = 0,
    cartesian: bool = False,
    max_iterations: int | None = None,
) -> RhfEnergy:
    """Closed-shell RHF energy of a molecule (``tutti_rhf_energy``).

    ``xyz`` is the text of an XYZ file (Angstrom), or a path to one (a ``Path``, or a string
    without a newline naming a file). ``basis`` is a shipped name (sto-3g, 6-31g, 6-31g*,
    cc-pvdz, def2-svp, def2-tzvp) or a path to an NWChem-format file. ``threads`` sizes the
    Fock build's pool (0 = all cores). A basis or element the library does not know raises
    TuttiError with ``Status.ERROR_INVALID_ARGUMENT``; an SCF that does not converge,
    ``Status.ERROR_NOT_CONVERGED``.
    """
    import json

    if isinstance(xyz, os.PathLike) or ("\n" not in xyz and Path(xyz).is_file()):
        xyz = Path(xyz).read_text()
    options = _CRhfOptions()
    _check(_lib.tutti_rhf_options_default(ctypes.byref(options)))
    options.threads = _int(threads, "threads").value
    options.charge = _int(charge, "charge").value
    options.cartesian = 1 if cartesian else 0
    if max_iterations is not None:
        options.max_iterations = _int(max_iterations, "max_iterations").value
    result = _CRhfResult()
    text = ctypes.c_void_p()
    _check(
        _lib.tutti_rhf_energy(
            str(xyz).encode("utf-8"),
            os.fsencode(basis),
            ctypes.byref(options),
            ctypes.byref(result),
            ctypes.byref(text),
        )
    )
    try:
        summary = json.loads(ctypes.string_at(text.value).decode("utf-8"))
    finally:
        _check(_lib.tutti_free_c(text))
    return RhfEnergy(
        energy=result.energy,
        electronic_energy=result.electronic_energy,
        nuclear_repulsion=result.nuclear_repulsion,
        nao=result.nao,
        electrons=result.electrons,
        iterations=result.iterations,
        converged=bool(result.converged),
        summary=summary,
    )


def rhf_gradient(
    xyz,
    basis: str,
    *,
    threads: int = 0,
    serial: bool = False,
    charge: int = 0,
    cartesian: bool = False,
    max_iterations: int | None = None,
) -> RhfGradient:
    """The RHF energy and its gradient with respect to every exponent and library
    contraction coefficient of every shell on every atom (``tutti_rhf_gradient``).

    ``xyz``, ``basis``, ``threads``, ``charge``, ``cartesian`` and ``max_iterations`` are as
    for :func:`rhf_energy`; ``threads`` sizes every loop, SCF and gradient (0 = all cores).
    ``serial`` runs the serial reference implementation. The convention is PySCF's: each
    contracted function is renormalized, and the derivatives include that renormalization.
    Parameters are per atom; ``summary["elements"]`` holds the sums per element. Errors raise
    TuttiError with the C status (``Status.ERROR_INVALID_ARGUMENT`` for an unknown basis or
    element or an odd electron count, ``Status.ERROR_IO`` for an unreadable basis file,
    ``Status.ERROR_NOT_CONVERGED`` for an SCF that does not converge).
    """
    import json

    import numpy as np

    if isinstance(xyz, os.PathLike) or ("\n" not in xyz and Path(xyz).is_file()):
        xyz = Path(xyz).read_text()
    options = _CGradientOptions()
    _check(_lib.tutti_gradient_options_default(ctypes.byref(options)))
    options.rhf.threads = _int(threads, "threads").value
    options.rhf.charge = _int(charge, "charge").value
    options.rhf.cartesian = 1 if cartesian else 0
    options.serial = 1 if serial else 0
    if max_iterations is not None:
        options.rhf.max_iterations = _int(max_iterations, "max_iterations").value
    result = _CRhfGradient()
    text = ctypes.c_void_p()
    _check(
        _lib.tutti_rhf_gradient(
            str(xyz).encode("utf-8"),
            os.fsencode(basis),
            ctypes.byref(options),
            ctypes.byref(result),
            ctypes.byref(text),
        )
    )
    try:
        n = result.n_primitives
        arrays = {
            name: np.ctypeslib.as_array(getattr(result, name), shape=(n,)).copy()
            for name in ("exponents", "coefficients", "grad_exponents", "grad_coefficients")
        }
        shells = []
        for index in range(result.n_shells):
            shell = result.shells[index]
            part = slice(shell.offset, shell.offset + shell.primitives)
            shells.append(
                ShellGradient(
                    atom=shell.atom,
                    l=shell.l,
                    **{name: values[part] for name, values in arrays.items()},
                )
            )
        summary = json.loads(ctypes.string_at(text.value).decode("utf-8"))
    finally:
        _check(_lib.tutti_free_c(text))
        _check(_lib.tutti_rhf_gradient_free(ctypes.byref(result)))
    return RhfGradient(
        energy=result.energy,
        shells=shells,
        iterations=result.iterations,
        threads=result.threads,
        timings={name: getattr(result.timings, name) for name, _ in _CGradientTimings._fields_},
        summary=summary,
    )


def _bodies(positions, masses, function: str):
    """float64 C-order copies of (N, 3) positions and (N,) strengths, shapes checked."""
    import numpy as np

    x = np.ascontiguousarray(positions, dtype=np.float64)
    m = np.ascontiguousarray(masses, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise TuttiError(
            Status.ERROR_INVALID_ARGUMENT,
            f"{function}: `positions` must have shape (N, 3), got {x.shape}",
        )
    if m.shape != (x.shape[0],):
        raise TuttiError(
            Status.ERROR_INVALID_ARGUMENT,
            f"{function}: `masses` must have shape ({x.shape[0]},) to match `positions`, "
            f"got {m.shape}",
        )
    return x, m


def _fields(function, positions, masses, last):
    """Runs tutti_fmm or tutti_direct_sum into fresh numpy arrays (potential, accel)."""
    import numpy as np

    x, m = _bodies(positions, masses, function.__name__)
    n = x.shape[0]
    potential = np.empty(n)
    accel = np.empty((n, 3))
    double_p = ctypes.POINTER(ctypes.c_double)
    # Empty arrays have no data pointer numpy guarantees; tutti reads nothing when n = 0.
    pointer = lambda a: a.ctypes.data_as(double_p) if a.size else double_p()  # noqa: E731
    _check(function(n, pointer(x), pointer(m), last, pointer(potential), pointer(accel)))
    return potential, accel


def fmm(
    positions,
    masses,
    order: int | None = None,
    theta: float | None = None,
    leaf_size: int | None = None,
    softening: float = 0.0,
    devices: int = 1,
    f32_far_field: bool = False,
):
    """Potentials (N,) and accelerations (N, 3) of N bodies by the fast multipole method.

    ``positions`` (N, 3) and ``masses`` (N,) are anything ``numpy.asarray`` takes (strengths
    may be negative); G = 1, ``phi_i = -sum_j m_j / sqrt(r_ij^2 + softening^2)`` and
    ``a_i = -grad phi_i`` (``tutti_fmm``). ``None`` keeps the library's default (order 7,
    theta 0.5, leaf size 64: relative L2 error about 1e-5 on accelerations). The evaluation
    is split among ``devices`` simulated devices; the result is the same for any count.
    Returns ``(potential, accel)`` as float64 numpy arrays.
    """
    options = _CFmmOptions()
    _check(_lib.tutti_fmm_options_default(ctypes.byref(options)))
    if order is not None:
        options.order = _int(order, "order").value
    if theta is not None:
        options.theta = float(theta)
    if leaf_size is not None:
        options.leaf_size = _int(leaf_size, "leaf_size").value
    options.softening = float(softening)
    options.devices = _int(devices, "devices").value
    options.f32_far_field = int(bool(f32_far_field))
    return _fields(_lib.tutti_fmm, positions, masses, ctypes.byref(options))


def direct_sum(positions, masses, softening: float = 0.0):
    """:func:`fmm`'s quantities by the direct O(N^2) sum (``tutti_direct_sum``)."""
    return _fields(_lib.tutti_direct_sum, positions, masses, float(softening))


class Train:
    """A tensor train (MPS or MPO, float64 or complex128) held by the library (``TuttiTrain``).

    ``Train(cores)`` copies a list of numpy arrays (anything ``numpy.asarray`` takes), site 0
    first: 3-axis cores (Dl, d, Dr) make an MPS, 4-axis cores (Dl, d_out, d_in, Dr) an MPO; the
    first Dl and the last Dr are 1. Complex cores (or any complex core) make a complex128
    train, else float64. The handle is released by :meth:`close`, by leaving a ``with`` block,
    or when the object is collected.

    A train may be used by several threads at once. :meth:`close` while another thread's call
    on the same train is running is safe: later calls raise TuttiError at once, and the
    handle is released when the last running call returns.
    """

    def __init__(self, cores, *, _handle: int | None = None):
        # The handle's state, guarded by _lock: calls in flight pin it, close() waits for them.
        self._lock = threading.Condition()
        self._in_flight = 0
        self._handle = ctypes.c_void_p()
        if _handle is not None:
            self._handle = ctypes.c_void_p(_handle)
            return
        import numpy as np

        arrays = [np.asarray(core) for core in cores]
        if not arrays:
            raise TuttiError(Status.ERROR_INVALID_ARGUMENT, "Train: `cores` is empty")
        ndims = {a.ndim for a in arrays}
        if ndims not in ({3}, {4}):
            raise TuttiError(
                Status.ERROR_INVALID_ARGUMENT,
                f"Train: every core needs 3 axes (MPS) or 4 axes (MPO), got {sorted(ndims)}",
            )
        kind = TrainKind.MPS if ndims == {3} else TrainKind.MPO
        complex_ = any(np.iscomplexobj(a) for a in arrays)
        dtype = np.complex128 if complex_ else np.float64
        # C-order copies; complex128 memory is interleaved (re, im) doubles, as tutti wants.
        arrays = [np.ascontiguousarray(a, dtype=dtype) for a in arrays]
        shapes = [int(d) for a in arrays for d in a.shape]
        shapes_c = (ctypes.c_int * len(shapes))(*shapes)
        double_p = ctypes.POINTER(ctypes.c_double)
        # A zero-size core has no data pointer numpy guarantees; tutti refuses its shape first.
        pointers = (double_p * len(arrays))(
            *[a.ctypes.data_as(double_p) if a.size else double_p() for a in arrays]
        )
        handle = ctypes.c_void_p()
        _check(
            _lib.tutti_train_from_arrays(
                int(kind),
                int(Dtype.COMPLEX128 if complex_ else Dtype.FLOAT64),
                _int(len(arrays), "n_sites"),
                shapes_c,
                pointers,
                ctypes.byref(handle),
            )
        )
        self._handle = handle

    @classmethod
    def from_dir(cls, path) -> "Train":
        """Opens a train directory (``000.npy``, ``001.npy``, ...); cores are read on use."""
        handle = ctypes.c_void_p()
        _check(_lib.tutti_train_from_dir(os.fsencode(path), ctypes.byref(handle)))
        return cls(None, _handle=handle.value)

    @contextlib.contextmanager
    def _live(self):
        """The handle, pinned for the ``with`` block: close() waits until it ends."""
        with self._lock:
            if not self._handle:
                raise TuttiError(Status.ERROR_INVALID_ARGUMENT, "the train was closed")
            self._in_flight += 1
            handle = self._handle
        try:
            yield handle
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._lock.notify_all()

    def _info(self) -> tuple[TrainKind, Dtype, int]:
        kind, dtype, sites = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        with self._live() as handle:
            _check(
                _lib.tutti_train_info(
                    handle, ctypes.byref(kind), ctypes.byref(dtype), ctypes.byref(sites)
                )
            )
        return TrainKind(kind.value), Dtype(dtype.value), sites.value

    @property
    def kind(self) -> TrainKind:
        """MPS or MPO."""
        return self._info()[0]

    @property
    def dtype(self) -> Dtype:
        """FLOAT64 or COMPLEX128."""
        return self._info()[1]

    def __len__(self) -> int:
        return self._info()[2]

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        """Each core's shape, site 0 first."""
        kind, _, sites = self._info()
        axes = 3 if kind == TrainKind.MPS else 4
        raw = (ctypes.c_int * (axes * sites))()
        with self._live() as handle:
            _check(_lib.tutti_train_shapes(handle, raw, axes * sites))
        return [tuple(raw[axes * k : axes * k + axes]) for k in range(sites)]

    @property
    def bonds(self) -> list[int]:
        """The bond dimensions ``[1, D_1, ..., 1]``."""
        return [1] + [shape[-1] for shape in self.shapes]

    def cores(self) -> list:
        """Copies of the cores as numpy arrays (float64 or complex128), site 0 first."""
        import numpy as np

        _, dtype, _ = self._info()
        np_dtype = np.complex128 if dtype == Dtype.COMPLEX128 else np.float64
        width = 2 if dtype == Dtype.COMPLEX128 else 1
        result = []
        for site, shape in enumerate(self.shapes):
            core = np.empty(shape, dtype=np_dtype)
            with self._live() as handle:
                _check(
                    _lib.tutti_train_site(
                        handle,
                        site,
                        core.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                        core.size * width,
                    )
                )
            result.append(core)
        return result

    def write_dir(self, path) -> None:
        """Writes the train as a directory of ``.npy`` files, atomically."""
        with self._live() as handle:
            _check(_lib.tutti_train_write_dir(handle, os.fsencode(path)))

    def norm(self) -> float:
        """``||self||`` (Frobenius for an MPO), by contraction."""
        value = ctypes.c_double()
        with self._live() as handle:
            _check(_lib.tutti_train_norm(handle, ctypes.byref(value)))
        return value.value

    def distance(self, other: "Train") -> float:
        """``||self - other||``, by contraction (accurate when the two nearly agree)."""
        value = ctypes.c_double()
        with self._live() as mine, other._live() as theirs:
            _check(_lib.tutti_train_distance(mine, theirs, ctypes.byref(value)))
        return value.value

    def close(self) -> None:
        """Releases the library's train; later uses raise TuttiError. Idempotent and
        thread-safe: calls already running on the train (in other threads) finish first."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ did not get far enough to hold anything
            return
        with lock:
            handle, self._handle = self._handle, ctypes.c_void_p()
            if not handle:
                return
            # New calls see the cleared handle and raise; wait for the running ones.
            while self._in_flight:
                lock.wait()
        _check(_lib.tutti_train_free(handle))

    def __enter__(self) -> "Train":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        try:
            kind, dtype, sites = self._info()
        except TuttiError:
            return "Train(closed)"
        return f"Train({kind.name}, {dtype.name.lower()}, {sites} sites, bonds {self.bonds})"


def src(
    trains,
    chi: int,
    *,
    oversample: int = 0,
    cutoff: float = 0.0,
    seed: int = 0,
    devices: int = 1,
) -> Train:
    """The product of a stack of trains compressed to bonds <= ``chi`` by SRC (``tutti_src``).

    ``trains`` (``Train`` objects, or lists of numpy cores converted on the fly) are in
    mathematical order: ``src([h, psi], 16)`` is H|psi>. An MPS may only come first (a bra,
    not conjugated) or last. The sweep is split among ``devices`` simulated devices; the result
    does not depend on how many beyond rounding, and is exact when ``chi + oversample``
    reaches every bond of the exact product.
    """
    owned = [t if isinstance(t, Train) else Train(t) for t in trains]
    if not owned:
        raise TuttiError(Status.ERROR_INVALID_ARGUMENT, "src: `trains` is empty")
    options = _CSrcOptions()
    _check(_lib.tutti_src_options_default(ctypes.byref(options)))
    options.chi_out = _int(chi, "chi").value
    options.oversample = _int(oversample, "oversample").value
    options.cutoff = float(cutoff)
    if not 0 <= int(seed) < 2**64:
        raise TuttiError(Status.ERROR_INVALID_ARGUMENT, f"src: seed {seed} is not a u64")
    options.seed = int(seed)
    options.devices = _int(devices, "devices").value
    out = ctypes.c_void_p()
    with contextlib.ExitStack() as pinned:
        handles = [pinned.enter_context(t._live()).value for t in owned]
        stack = (ctypes.c_void_p * len(owned))(*handles)
        _check(
            _lib.tutti_src(stack, _int(len(owned), "n"), ctypes.byref(options), ctypes.byref(out))
        )
    return Train(None, _handle=out.value)
