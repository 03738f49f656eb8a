"""Gravitational fields of N bodies: the fast multipole method (``tutti_fmm``) and the direct
sum (``tutti_direct_sum``)."""

from __future__ import annotations

import ctypes

from ._lib import Kernels, Status, TuttiError, _check, _int, declare, lib
from .progress import _CProgressCallback, _ProgressHook
from .resources import Resources, _c_resources, _CResources
from .world import _entering_library, spans_world

__all__ = ["fmm", "direct_sum", "order_for_accuracy"]


class _CFmmOptions(ctypes.Structure):
    _fields_ = [
        ("order", ctypes.c_int),
        ("theta", ctypes.c_double),
        ("leaf_size", ctypes.c_int),
        ("softening", ctypes.c_double),
        ("f32_far_field", ctypes.c_int),
        ("resources", _CResources),
        ("kernels", ctypes.c_int),
        ("fused_multiply_add", ctypes.c_int),
        ("progress", _CProgressCallback),
    ]


_double_p = ctypes.POINTER(ctypes.c_double)
declare(
    {
        "tutti_fmm_options_default": ([ctypes.POINTER(_CFmmOptions)], ctypes.c_int),
        "tutti_fmm": (
            [
                ctypes.c_int64,
                _double_p,
                _double_p,
                ctypes.POINTER(_CFmmOptions),
                _double_p,
                _double_p,
            ],
            ctypes.c_int,
        ),
        "tutti_fmm_targets": (
            [
                ctypes.c_int64,
                _double_p,
                _double_p,
                ctypes.c_int64,
                _double_p,
                ctypes.POINTER(_CFmmOptions),
                _double_p,
                _double_p,
            ],
            ctypes.c_int,
        ),
        "tutti_direct_sum": (
            [ctypes.c_int64, _double_p, _double_p, ctypes.c_double, _double_p, _double_p],
            ctypes.c_int,
        ),
        "tutti_fmm_order_for_accuracy": (
            [ctypes.c_double, ctypes.POINTER(ctypes.c_int), _double_p],
            ctypes.c_int,
        ),
    }
)


def order_for_accuracy(eps: float) -> tuple[int, float]:
    """The expansion order :func:`fmm` uses for ``eps=``, with its measured error.

    The lowest order whose relative L2 acceleration error, measured at theta 0.5 on 10^4
    uniform, Plummer and thin-disk bodies against exact sums (the worst of the three; table
    in docs/fmm.md), is at most ``eps``. ``eps`` below the best measured error (8.53e-7,
    order 10) raises :class:`tutti.InvalidArgumentError`: give ``order`` and ``theta``.
    """
    order, measured = ctypes.c_int(), ctypes.c_double()
    _check(lib.tutti_fmm_order_for_accuracy(float(eps), ctypes.byref(order), ctypes.byref(measured)))
    return order.value, measured.value


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


def _fields(function, positions, masses, last, hook: _ProgressHook | None = None):
    """Runs tutti_fmm or tutti_direct_sum into fresh numpy arrays (potential, accel); an
    exception of ``hook``'s callable comes before the call's status."""
    import numpy as np

    x, m = _bodies(positions, masses, function.__name__)
    n = x.shape[0]
    potential = np.empty(n)
    accel = np.empty((n, 3))
    double_p = ctypes.POINTER(ctypes.c_double)
    # Empty arrays have no data pointer numpy guarantees; tutti reads nothing when n = 0.
    pointer = lambda a: a.ctypes.data_as(double_p) if a.size else double_p()  # noqa: E731
    _entering_library()
    status = function(n, pointer(x), pointer(m), last, pointer(potential), pointer(accel))
    if hook is not None:
        hook.raise_pending()
    _check(status)
    return potential, accel


def _target_fields(positions, masses, targets, options, hook: _ProgressHook):
    """Runs tutti_fmm_targets into fresh numpy arrays (potential, accel) at ``targets``."""
    import numpy as np

    x, m = _bodies(positions, masses, "fmm")
    t = np.ascontiguousarray(targets, dtype=np.float64)
    if t.ndim != 2 or t.shape[1] != 3:
        raise TuttiError(
            Status.ERROR_INVALID_ARGUMENT, f"fmm: `targets` must have shape (M, 3), got {t.shape}"
        )
    potential = np.empty(t.shape[0])
    accel = np.empty((t.shape[0], 3))
    double_p = ctypes.POINTER(ctypes.c_double)
    pointer = lambda a: a.ctypes.data_as(double_p) if a.size else double_p()  # noqa: E731
    _entering_library()
    status = lib.tutti_fmm_targets(
        x.shape[0], pointer(x), pointer(m), t.shape[0], pointer(t), options,
        pointer(potential), pointer(accel),
    )
    hook.raise_pending()
    _check(status)
    return potential, accel


@spans_world
def fmm(
    positions,
    masses,
    order: int | None = None,
    theta: float | None = None,
    leaf_size: int | None = None,
    softening: float = 0.0,
    f32_far_field: bool = False,
    resources: Resources | None = None,
    eps: float | None = None,
    progress=None,
    kernels: Kernels | str = Kernels.AUTO,
    fused_multiply_add: bool = True,
    targets=None,
):
    """Potentials (N,) and accelerations (N, 3) of N bodies by the fast multipole method.

    ``positions`` (N, 3) and ``masses`` (N,) are anything ``numpy.asarray`` takes (strengths
    may be negative); G = 1, ``phi_i = -sum_j m_j / sqrt(r_ij^2 + softening^2)`` and
    ``a_i = -grad phi_i`` (``tutti_fmm``). ``None`` keeps the library's default (order 7,
    theta 0.5, leaf size 64: relative L2 error about 1e-5 on accelerations). The evaluation
    is split among the devices of ``resources`` (a :class:`tutti.Resources`; ``None``: one
    simulated device using all cores, or every GPU); the result is the same bits for any
    device count, and a memory cap too small for it raises before any work.
    ``eps`` asks for a relative L2 error on accelerations instead of an order: tutti picks
    the lowest order measured to reach it (:func:`order_for_accuracy`, which also says what
    that order achieved) at theta 0.5; give ``eps`` or ``order``/``theta``, not both.
    ``progress``, a callable, receives a :class:`tutti.Progress` as each of the five phases
    ends (``tutti.progress`` says how an exception in it is raised). ``kernels`` (a
    :class:`tutti.Kernels` or its name) says whether M2L and P2P run as device kernels;
    ``fused_multiply_add=False`` makes a GPU's kernels give the host code's bits.
    ``targets`` (M, 3), when given, asks for the fields at those points instead of at the
    bodies (``tutti_fmm_targets``: one tree over both, as FMM3D's): a body at exactly a
    target's position is left out of that target's sum, so a target at a body gets the
    body's own field; duplicates are fine. ``eps`` picks the order from errors measured at the
    bodies: at separate targets expect the same order of magnitude, not the bound itself.
    Returns ``(potential, accel)`` as float64 numpy
    arrays, (N,) and (N, 3), or (M,) and (M, 3) with ``targets``.
    """
    options = _CFmmOptions()
    _check(lib.tutti_fmm_options_default(ctypes.byref(options)))
    if eps is not None:
        if order is not None or theta is not None:
            raise TuttiError(
                Status.ERROR_INVALID_ARGUMENT,
                "fmm: give `eps` or `order`/`theta`, not both",
            )
        order, _ = order_for_accuracy(eps)
    if order is not None:
        options.order = _int(order, "order").value
    if theta is not None:
        options.theta = float(theta)
    if leaf_size is not None:
        options.leaf_size = _int(leaf_size, "leaf_size").value
    options.softening = float(softening)
    options.f32_far_field = int(bool(f32_far_field))
    options.kernels = int(Kernels._coerce(kernels, "fmm"))
    options.fused_multiply_add = int(bool(fused_multiply_add))
    options.resources, keepalive = _c_resources(resources)
    hook = _ProgressHook(progress, "fmm")
    options.progress = hook.c
    if targets is None:
        fields = _fields(lib.tutti_fmm, positions, masses, ctypes.byref(options), hook)
    else:
        fields = _target_fields(positions, masses, targets, ctypes.byref(options), hook)
    del keepalive  # the struct's pointers were read during the call
    return fields


def direct_sum(positions, masses, softening: float = 0.0):
    """:func:`fmm`'s quantities by the direct O(N^2) sum (``tutti_direct_sum``)."""
    return _fields(lib.tutti_direct_sum, positions, masses, float(softening))

