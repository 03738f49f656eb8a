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

import ctypes
import enum
import os
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


class Kind(enum.IntEnum):
    """TuttiKind: which kind of device a call uses."""

    CPU = 0
    GPU = 1
    AUTO = 2


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
    result does not depend on how many). An exception in the callback fails the fit and is
    re-raised here, chained to the TuttiError.
    """
    counts = [int(c) for c in residual_counts]
    start = [float(x) for x in initial]
    n = len(start)
    raised: list[BaseException] = []

    def trampoline(_user, experiment, p, n_parameters, r, m, jac):
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
    try:
        _check(status)
    except TuttiError as error:
        if raised:
            raise error from raised[0]
        raise
    return FitResult(
        parameters=[parameters_c[i] for i in range(n)],
        covariance=[[covariance_c[i * n + j] for j in range(n)] for i in range(n)],
        cost=result_c.cost,
        iterations=result_c.iterations,
        evaluations=result_c.evaluations,
        converged=bool(result_c.converged),
    )
