"""Least-squares fits through a Python callback (``tutti_fit``)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ._lib import Status, TuttiError, _check, _int, declare, lib
from .progress import _CProgressCallback, _ProgressHook
from .resources import Resources, _c_resources, _CResources
from .world import _entering_library, spans_world

__all__ = ["FitResult", "fit"]


class _CFitOptions(ctypes.Structure):
    _fields_ = [
        ("resources", _CResources),
        ("max_iterations", ctypes.c_int),
        ("gradient_tolerance", ctypes.c_double),
        ("step_tolerance", ctypes.c_double),
        ("cost_tolerance", ctypes.c_double),
        ("progress", _CProgressCallback),
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
    """The outcome of :func:`fit`: ``parameters`` (n,) and ``covariance`` (n, n) as float64
    numpy arrays, ``(J^T J)^-1`` at the solution."""

    parameters: "numpy.ndarray"
    covariance: "numpy.ndarray"
    cost: float
    iterations: int
    evaluations: int
    converged: bool


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
    covariance is ``(J^T J)^-1`` at the solution, from a QR of the Jacobian.

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
    )
