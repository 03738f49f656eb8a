"""Least-squares fits through a Python callback (``tutti_fit``)."""

from __future__ import annotations

import ctypes
import enum
import math
from dataclasses import dataclass

from ._lib import Status, TuttiError, _check, _int, declare, lib
from .progress import _CProgressCallback, _ProgressHook
from .resources import Resources, _c_resources, _CResources
from .world import _entering_library, spans_world

__all__ = ["FitResult", "Termination", "fit"]


class _CFitOptions(ctypes.Structure):
    _fields_ = [
        ("resources", _CResources),
        ("max_iterations", ctypes.c_int),
        ("gradient_tolerance", ctypes.c_double),
        ("step_tolerance", ctypes.c_double),
        ("cost_tolerance", ctypes.c_double),
        ("progress", _CProgressCallback),
        ("lower", ctypes.POINTER(ctypes.c_double)),
        ("upper", ctypes.POINTER(ctypes.c_double)),
    ]


class _CFitResult(ctypes.Structure):
    _fields_ = [
        ("cost", ctypes.c_double),
        ("iterations", ctypes.c_int),
        ("evaluations", ctypes.c_int),
        ("converged", ctypes.c_int),
        ("termination", ctypes.c_int),
        ("covariance_rank", ctypes.c_int),
    ]


class Termination(enum.IntEnum):
    """Why a fit stopped (``TUTTI_TERMINATION_*``): a tolerance was met (``GRADIENT``: the
    largest cosine of the angle between the residuals and a column of the Jacobian, among
    the parameters the bounds leave free; ``STEP``: the step relative to the parameters;
    ``COST``: the relative decrease of the cost), or the fit stopped before converging with
    the best point found: ``MAX_ITERATIONS``, the iteration limit was reached, or
    ``CALLBACK``, a per-iteration callback asked it to stop (the Rust API's; ``fit`` has none
    yet, so it does not return this today)."""

    GRADIENT = 1
    STEP = 2
    COST = 3
    MAX_ITERATIONS = 4
    CALLBACK = 5


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
    """The outcome of :func:`fit`: ``parameters`` (n,) and ``covariance`` (n, n) as float64
    numpy arrays, ``(J^T J)^-1`` at the solution.

    ``covariance_rank`` is the rank of ``J^T J`` there: n when every combination of the
    parameters is determined by the data, less when some are not, and ``covariance`` is then
    the pseudo-inverse (the variances of the undetermined combinations are not known); -1
    (with a NaN covariance) when none could be formed. ``termination`` says why the fit
    stopped; ``converged`` is whether it met a tolerance (``GRADIENT``, ``STEP`` or ``COST``)."""

    parameters: "numpy.ndarray"
    covariance: "numpy.ndarray"
    cost: float
    iterations: int
    evaluations: int
    converged: bool
    covariance_rank: int
    termination: Termination


declare(
    {
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
)


@spans_world
def fit(
    residuals,
    residual_counts,
    initial,
    *,
    resources: Resources | None = None,
    max_iterations: int | None = None,
    bounds=None,
    progress=None,
) -> FitResult:
    """Least-squares fit through a Python callback (``tutti_fit``).

    ``residuals(experiment, parameters)`` returns ``(r, jacobian)`` for one experiment:
    ``r`` a sequence of ``residual_counts[experiment]`` floats, ``jacobian`` their
    derivatives, as rows (one per residual) or flat row-major. The fit minimizes
    ``0.5 * sum |r|^2`` over all experiments, split over the devices of ``resources`` (a
    :class:`tutti.Resources`; ``None``: every GPU, else one simulated device using all
    cores); the result is the same bits for any device count, and a memory cap too small for
    the fit's buffers raises (``Status.ERROR_OUT_OF_MEMORY``) before the callback runs. The
    covariance is ``(J^T J)^-1`` at the solution, from a QR of the Jacobian; when ``J^T J``
    is singular (parameters the data determine only in combination, such as two that enter
    only as their sum) the fit still returns its parameters, with the pseudo-inverse and
    ``covariance_rank < n`` (see :class:`FitResult`).

    ``bounds=(lower, upper)``, as scipy's ``least_squares`` takes them: each a float for
    every parameter or a sequence of n, ``-numpy.inf`` / ``numpy.inf`` for no bound on that
    side; ``lower[i] == upper[i]`` fixes parameter i there. ``initial`` must lie inside. A
    parameter held at a bound by the gradient is left out of the step; the covariance is
    still that of the unconstrained problem at the solution (as ``curve_fit`` reports it).
    Bad bounds (a NaN, ``lower > upper``, a start outside) raise
    :class:`tutti.InvalidArgumentError` naming the entry (``options->lower[i]``,
    ``initial[i]``); bounds of the wrong length or shape raise ``ValueError`` here.

    An exception in the callback stops the fit (every later callback call reports failure
    without calling ``residuals``) and fails it, even where the library could have gone
    around the rejected point: an ``Exception`` is raised here as the ``__cause__`` of a
    TuttiError (``Status.ERROR_CALLBACK`` unless the library failed otherwise), and a
    ``KeyboardInterrupt`` or ``SystemExit`` is re-raised as itself.

    ``progress``, a callable, receives a :class:`tutti.Progress` after each iteration, with
    the cost as ``value`` (``tutti.progress`` says how an exception in it is raised).
    """
    counts = [int(c) for c in residual_counts]
    start = [float(x) for x in initial]
    n = len(start)
    lower, upper = _bounds(bounds, n)
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
    _check(lib.tutti_fit_options_default(ctypes.byref(options)))
    options.resources, keepalive = _c_resources(resources)
    if max_iterations is not None:
        options.max_iterations = int(max_iterations)
    hook = _ProgressHook(progress, "fit")
    options.progress = hook.c
    if lower is not None:  # kept alive by these names until the call returns
        lower_c = (ctypes.c_double * n)(*lower)
        upper_c = (ctypes.c_double * n)(*upper)
        options.lower = ctypes.cast(lower_c, ctypes.POINTER(ctypes.c_double))
        options.upper = ctypes.cast(upper_c, ctypes.POINTER(ctypes.c_double))
    counts_c = (ctypes.c_int * max(len(counts), 1))(*counts)
    initial_c = (ctypes.c_double * max(n, 1))(*start)
    parameters_c = (ctypes.c_double * max(n, 1))()
    covariance_c = (ctypes.c_double * max(n * n, 1))()
    result_c = _CFitResult()
    n_experiments, n_parameters = _int(len(counts), "n_experiments"), _int(n, "n_parameters")
    _entering_library()
    status = lib.tutti_fit(
        callback,
        None,
        n_experiments,
        counts_c,
        n_parameters,
        initial_c,
        ctypes.byref(options),
        parameters_c,
        covariance_c,
        ctypes.byref(result_c),
    )
    del keepalive  # the struct's pointers were read during the call
    hook.raise_pending()
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
            message = lib.tutti_last_error().decode("utf-8", errors="replace")
        raise TuttiError(status, message) from first
    _check(status)
    import numpy as np

    return FitResult(
        parameters=np.ctypeslib.as_array(parameters_c)[:n].copy(),
        covariance=np.ctypeslib.as_array(covariance_c)[: n * n].reshape(n, n).copy(),
        cost=result_c.cost,
        iterations=result_c.iterations,
        evaluations=result_c.evaluations,
        converged=bool(result_c.converged),
        covariance_rank=result_c.covariance_rank,
        termination=Termination(result_c.termination),
    )


def _bounds(bounds, n: int) -> tuple[list[float], list[float]] | tuple[None, None]:
    """``bounds=(lower, upper)`` as two lists of n floats (a scalar applies to every
    parameter), or ``(None, None)`` for no bounds. The values are the library's to check."""
    if bounds is None:
        return None, None
    import numpy as np

    try:
        lower, upper = bounds
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (lower, upper), got {bounds!r}") from None

    def side(values, name: str) -> list[float]:
        try:
            values = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"bounds: {name} is not numbers ({error})") from None
        if values.ndim == 0:
            values = np.full(n, values)
        if values.shape != (n,):
            raise ValueError(
                f"bounds: {name} has shape {values.shape}, expected a scalar or ({n},)"
            )
        return values.tolist()

    lower, upper = side(lower, "lower"), side(upper, "upper")
    if all(x == -math.inf for x in lower) and all(x == math.inf for x in upper):
        return None, None  # scipy's default (-inf, inf): no bounds at all
    return lower, upper
