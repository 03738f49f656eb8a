"""Sparse direct solves (``tutti_sparse_*``): a multifrontal LU split among devices.

:func:`splu` analyses and factors a scipy.sparse matrix (CSR or CSC used as given, any other
format converted to CSR) and returns a :class:`SparseLU`, whose :meth:`SparseLU.solve` takes
one right-hand side (n,) or many (n, k), and whose :meth:`SparseLU.refactor` factors new
values on the same pattern without analysing again. :func:`spsolve` does both at once::

    import numpy as np, scipy.sparse as sp, tutti

    a = sp.random(1000, 1000, density=0.005, format="csr") + sp.eye(1000) * 4
    lu = tutti.splu(a, resources=tutti.Resources(kind="cpu", devices=2))
    x = lu.solve(np.ones(1000))

Complex matrices (complex64 or complex128) are factored in complex128, real ones in float64
unless ``dtype=np.complex128`` is asked for; the dtype of a factorization is fixed when it is
made (:attr:`SparseLU.dtype`).

Across MPI processes, ``resources=tutti.Resources(..., world=world)`` splits the
factorization among the world's processes: every process calls :func:`splu`,
:meth:`SparseLU.refactor` and :meth:`SparseLU.solve` with the same arguments, and every
process gets the whole solution, bitwise that of as many devices in one process.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

from ._lib import Status, TuttiError, _check, _int, declare, lib
from .resources import Resources, _c_resources, _CResources
from .sweep import Dtype
from .world import _entering_library, spans_world

__all__ = ["SparseLU", "splu", "spsolve"]

_CSR, _CSC = 0, 1


class _CSparseOptions(ctypes.Structure):
    _fields_ = [
        ("resources", _CResources),
        ("layout", ctypes.c_int),
        ("index_base", ctypes.c_int),
        ("block", ctypes.c_int),
        ("leaf_size", ctypes.c_int),
        ("grid_dims", ctypes.c_int * 3),
        ("grid_periodic", ctypes.c_int * 3),
        ("pivot_tiny", ctypes.c_double),
        ("pivot_perturbation", ctypes.c_double),
        ("max_refinements", ctypes.c_int),
        ("refinement_target", ctypes.c_double),
        ("dtype", ctypes.c_int),
    ]


class _CSparseInfo(ctypes.Structure):
    _fields_ = [
        ("unknowns", ctypes.c_int64),
        ("matrix_nnz", ctypes.c_int64),
        ("factor_nnz", ctypes.c_int64),
        ("factor_flops", ctypes.c_double),
        ("solve_flops", ctypes.c_double),
        ("fronts", ctypes.c_int64),
        ("largest_front", ctypes.c_int64),
        ("devices", ctypes.c_int),
        ("factored", ctypes.c_int),
        ("perturbed_pivots", ctypes.c_int64),
        ("device_bytes", ctypes.c_uint64),
    ]


class _CSparseSolveInfo(ctypes.Structure):
    _fields_ = [
        ("refinements", ctypes.c_int),
        ("backward_error", ctypes.c_double),
    ]


_i64_p = ctypes.POINTER(ctypes.c_int64)
_double_p = ctypes.POINTER(ctypes.c_double)
declare(
    {
        "tutti_sparse_options_default": ([ctypes.POINTER(_CSparseOptions)], ctypes.c_int),
        "tutti_sparse_analyse": (
            [
                ctypes.c_int64,
                _i64_p,
                _i64_p,
                ctypes.POINTER(_CSparseOptions),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_sparse_factor": ([ctypes.c_void_p, _double_p, ctypes.c_int64], ctypes.c_int),
        # Complex values as (re, im) pairs of doubles: a contiguous complex128 array.
        "tutti_sparse_factor_c128": (
            [ctypes.c_void_p, _double_p, ctypes.c_int64],
            ctypes.c_int,
        ),
        "tutti_sparse_solve": (
            [ctypes.c_void_p, _double_p, ctypes.c_int64, ctypes.POINTER(_CSparseSolveInfo)],
            ctypes.c_int,
        ),
        "tutti_sparse_solve_c128": (
            [ctypes.c_void_p, _double_p, ctypes.c_int64, ctypes.POINTER(_CSparseSolveInfo)],
            ctypes.c_int,
        ),
        "tutti_sparse_info": (
            [ctypes.c_void_p, ctypes.POINTER(_CSparseInfo)],
            ctypes.c_int,
        ),
        "tutti_sparse_free": ([ctypes.c_void_p], ctypes.c_int),
    }
)


@spans_world
def _told(call, *, resources=None):
    """``call()``; when ``resources.world`` is set and ``call`` fails in Python before it
    reaches the library (an argument refused here, on this process only), the other processes
    of the world are told instead of waiting in their call forever."""
    return call()


def _invalid(message: str) -> TuttiError:
    return TuttiError(Status.ERROR_INVALID_ARGUMENT, message)


def _value_dtype(dtype, values_dtype, function: str):
    """The numpy dtype a factorization is made in: ``dtype`` when given (float64 or
    complex128), else complex128 for complex values and float64 for any other. Complex values
    with ``dtype`` float64 are refused: their imaginary parts would be lost."""
    import numpy as np

    complex_values = np.issubdtype(values_dtype, np.complexfloating)
    if dtype is None:
        return np.dtype(np.complex128 if complex_values else np.float64)
    expected = f"{function}: `dtype` is {dtype!r}: expected float64 or complex128"
    try:
        chosen = np.dtype(dtype)
    except TypeError:
        raise _invalid(expected) from None
    if chosen != np.float64 and chosen != np.complex128:
        raise _invalid(expected)
    if complex_values and chosen == np.float64:
        raise _invalid(
            f"{function}: complex values ({values_dtype}) cannot be factored in float64: "
            "their imaginary parts would be lost (factor in complex128: dtype=None or "
            "numpy.complex128)"
        )
    return chosen


def _compressed(matrix, dtype=None, function: str = "splu"):
    """``(layout, n, indptr, indices, data)`` of a square scipy.sparse matrix: CSR and CSC as
    given (no copy when already int64 and of the chosen dtype), other formats as CSR;
    ``data`` in ``dtype`` (see :func:`_value_dtype`)."""
    import numpy as np

    if not all(hasattr(matrix, attr) for attr in ("tocsr", "shape", "dtype")):
        raise _invalid(
            f"{function}: expected a scipy.sparse matrix or array, got {type(matrix).__name__}"
        )
    rows, cols = matrix.shape
    if rows != cols:
        raise _invalid(f"{function}: the matrix is {rows} x {cols}: a square matrix is needed")
    dtype = _value_dtype(dtype, matrix.dtype, function)
    fmt = getattr(matrix, "format", None)
    if fmt not in ("csr", "csc"):
        matrix, fmt = matrix.tocsr(), "csr"
    layout = _CSR if fmt == "csr" else _CSC
    indptr = np.ascontiguousarray(matrix.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(matrix.indices, dtype=np.int64)
    data = np.ascontiguousarray(matrix.data, dtype=dtype)
    return layout, int(rows), indptr, indices, data


class SparseLU:
    """A sparse LU factorization held by the library (``TuttiSparse``), made by :func:`splu`.

    The pattern is analysed once (nested dissection, or the geometric dissection of a grid);
    :meth:`refactor` factors new values on it; :meth:`solve` solves with iterative
    refinement. Factors and solutions are the same bits on any number of devices. The handle
    is released by :meth:`close`, by leaving a ``with`` block, or when the object is
    collected. Calls on one object from several threads are serialised.

    :attr:`dtype` (``numpy.float64`` or ``numpy.complex128``) is fixed when the object is
    made: ``dtype=None`` (the default) picks complex128 for a complex matrix (complex64 is
    promoted) and float64 for a real one; ``dtype=np.complex128`` factors a real matrix in
    complex128. A complex factorization takes real or complex right-hand sides and values
    (real ones promoted) and returns complex solutions; a real factorization refuses complex
    ones with :class:`tutti.InvalidArgumentError` (a ``ValueError``), since dropping their
    imaginary parts would give a wrong answer.

    Over a world (``resources=tutti.Resources(..., world=world)``) every process makes the
    same calls with the same arguments (a digest of the values and right-hand sides is
    compared: when they differ, every process raises);
    a failure on one process raises ``Status.ERROR_REMOTE`` on the others, also for an
    argument refused here in Python. :attr:`info` and :meth:`close` are local. The
    factorization keeps what it needs of the world itself and works after the world is
    closed, but close it on every process (or leave a ``with`` block) before closing the
    world: released after the world, it frees tutti's duplicate communicator, which every
    process must do, not the garbage collector at different times.
    """

    @spans_world
    def __init__(
        self,
        matrix,
        *,
        resources: Resources | None = None,
        grid=None,
        periodic=None,
        block: int = 1,
        leaf_size: int = 64,
        pivot_tiny: float | None = None,
        pivot_perturbation: float | None = None,
        max_refinements: int | None = None,
        refinement_target: float | None = None,
        dtype=None,
    ):
        import numpy as np

        self._lock = threading.RLock()
        self._handle = ctypes.c_void_p()
        self._resources = resources
        layout, n, indptr, indices, data = _compressed(matrix, dtype)
        options = _CSparseOptions()
        _check(lib.tutti_sparse_options_default(ctypes.byref(options)))
        c_resources, keep_alive = _c_resources(resources)
        options.resources = c_resources
        options.layout = layout
        options.dtype = Dtype.COMPLEX128 if data.dtype == np.complex128 else Dtype.FLOAT64
        options.block = _int(block, "block")
        options.leaf_size = _int(leaf_size, "leaf_size")
        if grid is not None:
            dims = [int(d) for d in grid]
            if not 1 <= len(dims) <= 3:
                raise _invalid(f"splu: `grid` has {len(dims)} axes: 1, 2 or 3 are supported")
            wraps = [False] * len(dims) if periodic is None else [bool(p) for p in periodic]
            if len(wraps) != len(dims):
                raise _invalid(
                    f"splu: `periodic` has {len(wraps)} entries for a grid of {len(dims)} axes"
                )
            for axis, (d, p) in enumerate(zip(dims, wraps)):
                options.grid_dims[axis] = _int(d, f"grid[{axis}]")
                options.grid_periodic[axis] = int(p)
        elif periodic is not None:
            raise _invalid("splu: `periodic` needs `grid`")
        if pivot_tiny is not None:
            options.pivot_tiny = float(pivot_tiny)
        if pivot_perturbation is not None:
            options.pivot_perturbation = float(pivot_perturbation)
        if max_refinements is not None:
            options.max_refinements = _int(max_refinements, "max_refinements")
        if refinement_target is not None:
            options.refinement_target = float(refinement_target)
        handle = ctypes.c_void_p()
        _entering_library()
        _check(
            lib.tutti_sparse_analyse(
                n,
                indptr.ctypes.data_as(_i64_p),
                indices.ctypes.data_as(_i64_p),
                ctypes.byref(options),
                ctypes.byref(handle),
            )
        )
        del keep_alive
        self._handle = handle
        self._layout, self._indptr, self._indices = layout, indptr, indices
        self.shape = (n, n)
        #: ``numpy.float64`` or ``numpy.complex128``: the values factored and the solutions.
        self.dtype = data.dtype
        self.refactor(data)

    @property
    def _complex(self) -> bool:
        import numpy as np

        return self.dtype == np.complex128

    @contextlib.contextmanager
    def _live(self):
        with self._lock:
            if not self._handle:
                raise _invalid("the factorization was closed")
            yield self._handle

    def refactor(self, values) -> None:
        """Factors new values on the analysed pattern: a scipy.sparse matrix with the same
        pattern in the same format as the one analysed, or the 1-D array of its ``data``
        (in the analysed entry order). The values are factored in :attr:`dtype`: real values
        are promoted for a complex factorization, complex ones are refused for a real one
        (:class:`tutti.InvalidArgumentError`). A failed refactorization leaves no factors:
        solving raises until one succeeds."""
        _told(lambda: self._refactor(values), resources=self._resources)

    def _refactor(self, values) -> None:
        import numpy as np

        if hasattr(values, "tocsr"):
            layout, n, indptr, indices, data = _compressed(values, self.dtype, "refactor")
            same = (
                layout == self._layout
                and (n, n) == self.shape
                and np.array_equal(indptr, self._indptr)
                and np.array_equal(indices, self._indices)
            )
            if not same:
                raise _invalid(
                    "refactor: the matrix's pattern or format differs from the analysed one"
                )
        else:
            values = np.asarray(values)
            dtype = _value_dtype(self.dtype, values.dtype, "refactor")
            data = np.ascontiguousarray(values, dtype=dtype)
            if data.ndim != 1:
                raise _invalid(f"refactor: `values` has {data.ndim} axes: expected 1")
        factor = lib.tutti_sparse_factor_c128 if self._complex else lib.tutti_sparse_factor
        with self._live() as handle:
            _entering_library()
            _check(factor(handle, data.ctypes.data_as(_double_p), data.size))

    def solve(self, b, *, info: bool = False):
        """``x`` with ``A x = b``, for ``b`` of shape (n,) or (n, k) (k right-hand sides in one
        pass); ``b`` is not changed. ``x`` has :attr:`dtype`: a real ``b`` is promoted for a
        complex factorization; a complex ``b`` for a real factorization raises
        :class:`tutti.InvalidArgumentError` (a ``ValueError``: factor in complex128, or solve
        the real and imaginary parts as two right-hand sides). With ``info=True`` returns
        ``(x, info)``, ``info`` a dict with ``refinements`` and ``backward_error``. A matrix
        singular to working precision raises :class:`tutti.SingularError`."""
        return _told(lambda: self._solve(b, info), resources=self._resources)

    def _solve(self, b, info: bool):
        import numpy as np

        b = np.asarray(b)
        if np.iscomplexobj(b) and not self._complex:
            raise _invalid(
                f"solve: `b` is complex ({b.dtype}) but the factorization is float64: make it "
                "with dtype=numpy.complex128, or solve the real and imaginary parts as two "
                "right-hand sides"
            )
        n = self.shape[0]
        if b.ndim not in (1, 2) or b.shape[0] != n:
            raise _invalid(f"solve: `b` has shape {b.shape}: expected ({n},) or ({n}, k)")
        rhs = 1 if b.ndim == 1 else b.shape[1]
        if rhs == 0:
            raise _invalid(f"solve: `b` has shape {b.shape}: no right-hand side")
        # Column-major: each right-hand side contiguous, as the library wants.
        x = np.array(b, dtype=self.dtype, order="F", copy=True)
        solve = lib.tutti_sparse_solve_c128 if self._complex else lib.tutti_sparse_solve
        result = _CSparseSolveInfo()
        with self._live() as handle:
            _entering_library()
            _check(solve(handle, x.ctypes.data_as(_double_p), rhs, ctypes.byref(result)))
        if info:
            return x, {"refinements": result.refinements, "backward_error": result.backward_error}
        return x

    @property
    def info(self) -> dict:
        """What the analysis predicts and the factorization did: ``unknowns``, ``matrix_nnz``,
        ``factor_nnz`` (nnz(L+U)), ``factor_flops``, ``solve_flops``, ``fronts``,
        ``largest_front``, ``devices`` (over a world: the ranks of all its processes),
        ``factored``, ``perturbed_pivots``, ``device_bytes`` (the plan's bytes per device)."""
        out = _CSparseInfo()
        with self._live() as handle:
            _check(lib.tutti_sparse_info(handle, ctypes.byref(out)))
        values = {name: getattr(out, name) for name, _ in _CSparseInfo._fields_}
        values["factored"] = bool(values["factored"])
        return values

    def close(self) -> None:
        """Releases the library's factorization; later uses raise. Idempotent."""
        lock = getattr(self, "_lock", None)
        if lock is None:
            return
        with lock:
            handle, self._handle = self._handle, ctypes.c_void_p()
        if handle:
            _check(lib.tutti_sparse_free(handle))

    def __enter__(self) -> "SparseLU":
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
            facts = self.info
        except TuttiError:
            return "SparseLU(closed)"
        return (
            f"SparseLU({facts['unknowns']} unknowns, {self.dtype}, "
            f"nnz(L+U) {facts['factor_nnz']}, {facts['devices']} device(s))"
        )


def splu(matrix, **options) -> SparseLU:
    """Analyses and factors a square real or complex scipy.sparse matrix; see
    :class:`SparseLU` for the keyword options: ``resources`` (a :class:`tutti.Resources`: the
    devices the factorization is split among, and their memory caps: a factorization that
    does not fit is refused before any numeric work; with a ``world``, split among its
    processes), ``grid`` and ``periodic`` (the grid
    shape, x fastest, for a geometric ordering), ``block`` (unknowns per grid point),
    ``leaf_size``, ``pivot_tiny``, ``pivot_perturbation``, ``max_refinements``,
    ``refinement_target``, ``dtype`` (None: complex128 for a complex matrix, else float64;
    or ``numpy.complex128`` to factor a real matrix in complex)."""
    return SparseLU(matrix, **options)


def spsolve(matrix, b, **options):
    """``x`` with ``matrix @ x = b``: :func:`splu` then :meth:`SparseLU.solve`. As scipy's
    ``spsolve``, a real matrix with a complex ``b`` is solved in complex128 (unless
    ``dtype`` is given)."""
    import numpy as np

    if options.get("dtype") is None and np.iscomplexobj(b):
        options["dtype"] = np.complex128
    with SparseLU(matrix, **options) as lu:
        return lu.solve(b)
