"""Tensor trains (``TuttiTrain``) and their compressed products by SRC (``tutti_src``)."""

from __future__ import annotations

import contextlib
import ctypes
import enum
import os
import threading

from ._lib import Kernels, Status, TuttiError, _check, _int, declare, lib
from ._quimb import quimb_cores, to_quimb
from .progress import _CProgressCallback, _ProgressHook
from .resources import Resources, _c_resources, _CResources
from .world import _entering_library, spans_world

__all__ = ["TrainKind", "Dtype", "Train", "src"]


class TrainKind(enum.IntEnum):
    """TuttiTrainKind: a state (cores (Dl, d, Dr)) or an operator (cores (Dl, d_out, d_in, Dr))."""

    MPS = 0
    MPO = 1


class Dtype(enum.IntEnum):
    """TuttiDtype: the element type of a train."""

    FLOAT64 = 0
    COMPLEX128 = 1



class _CSrcInfo(ctypes.Structure):
    """TuttiSrcInfo: the diagnostics ``tutti_src`` writes to ``options->info_out``."""

    _fields_ = [
        ("sketch_width", ctypes.c_uint64),
        ("devices", ctypes.c_uint64),
        ("seconds", ctypes.c_double),
        ("exact_fallback", ctypes.c_int),
        ("truncated_weight", ctypes.c_double),
        ("norm", ctypes.c_double),
        ("qr_distributed", ctypes.c_uint64),
        ("qr_shifted", ctypes.c_uint64),
        ("qr_householder", ctypes.c_uint64),
        ("qr_worst_orthogonality", ctypes.c_double),
        ("qr_seconds", ctypes.c_double),
        ("environments_on_device", ctypes.c_uint64),
        ("environments_on_host", ctypes.c_uint64),
        ("environments_on_disk", ctypes.c_uint64),
        ("spilled_bytes", ctypes.c_uint64),
    ]

    def to_dict(self) -> dict:
        """The diagnostics as :func:`src` returns them with ``info=True``."""
        return {
            "sketch_width": self.sketch_width,
            "devices": self.devices,
            "seconds": self.seconds,
            "exact_fallback": bool(self.exact_fallback),
            "truncated_weight": self.truncated_weight,
            "norm": self.norm,
            "qr": {
                "distributed": self.qr_distributed,
                "shifted": self.qr_shifted,
                "householder": self.qr_householder,
                "worst_orthogonality": self.qr_worst_orthogonality,
                "seconds": self.qr_seconds,
            },
            "environments": {
                "on_device": self.environments_on_device,
                "on_host": self.environments_on_host,
                "on_disk": self.environments_on_disk,
                "spilled_bytes": self.spilled_bytes,
            },
        }


class _CSrcOptions(ctypes.Structure):
    _fields_ = [
        ("chi_out", ctypes.c_int),
        ("oversample", ctypes.c_int),
        ("cutoff", ctypes.c_double),
        ("seed", ctypes.c_uint64),
        ("resources", _CResources),
        ("kernels", ctypes.c_int),
        ("distributed_qr", ctypes.c_int),
        ("info_out", ctypes.POINTER(_CSrcInfo)),
        ("progress", _CProgressCallback),
    ]



_int_p = ctypes.POINTER(ctypes.c_int)
declare(
    {
        "tutti_train_from_arrays": (
            [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                _int_p,
                ctypes.POINTER(ctypes.POINTER(ctypes.c_double)),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_train_from_dir": ([ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "tutti_train_info": ([ctypes.c_void_p, _int_p, _int_p, _int_p], ctypes.c_int),
        "tutti_train_shapes": ([ctypes.c_void_p, _int_p, ctypes.c_size_t], ctypes.c_int),
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
)


class Train:
    """A tensor train (MPS or MPO, float64 or complex128) held by the library (``TuttiTrain``).

    ``Train(cores)`` copies a list of numpy arrays (anything ``numpy.asarray`` takes), site 0
    first: 3-axis cores (Dl, d, Dr) make an MPS, 4-axis cores (Dl, d_out, d_in, Dr) an MPO; the
    first Dl and the last Dr are 1. Complex cores (or any complex core) make a complex128
    train, else float64. The handle is released by :meth:`close`, by leaving a ``with`` block,
    or when the object is collected.

    ``cores`` may also be a quimb ``MatrixProductState`` or ``MatrixProductOperator`` (an
    open chain, one tensor per site), read by index names: an MPO's upper indices
    (``upper_ind``, quimb's ``'k{}'``) are the output legs ``d_out`` and its lower ones
    (``'b{}'``) the inputs ``d_in``, as in quimb's ``mpo.apply(mps)``; float32 and complex64
    are widened. Any other quimb network, or a cyclic one, is an ``InvalidArgumentError``.
    :meth:`to_quimb` converts back.

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

        from_quimb = quimb_cores(cores)
        if from_quimb is not None:
            cores = from_quimb
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
            lib.tutti_train_from_arrays(
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
        _check(lib.tutti_train_from_dir(os.fsencode(path), ctypes.byref(handle)))
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
                lib.tutti_train_info(
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
            _check(lib.tutti_train_shapes(handle, raw, axes * sites))
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
                    lib.tutti_train_site(
                        handle,
                        site,
                        core.ctypes.data_as(ctypes.POINTER(ctypes.c_double)),
                        core.size * width,
                    )
                )
            result.append(core)
        return result

    def to_quimb(self):
        """A copy as a quimb ``MatrixProductState`` or ``MatrixProductOperator``, with quimb's
        default names: site (for an MPO upper, output) indices ``'k{}'``, an MPO's lower
        (input) indices ``'b{}'``, site tags ``'I{}'``; float64 or complex128 as the train.
        Needs quimb installed (``ModuleNotFoundError`` otherwise)."""
        return to_quimb(self.cores(), operator=self.kind == TrainKind.MPO)

    def write_dir(self, path) -> None:
        """Writes the train as a directory of ``.npy`` files, atomically."""
        with self._live() as handle:
            _check(lib.tutti_train_write_dir(handle, os.fsencode(path)))

    def norm(self) -> float:
        """``||self||`` (Frobenius for an MPO), by contraction."""
        value = ctypes.c_double()
        with self._live() as handle:
            _check(lib.tutti_train_norm(handle, ctypes.byref(value)))
        return value.value

    def distance(self, other: "Train") -> float:
        """``||self - other||``, by contraction (accurate when the two nearly agree)."""
        value = ctypes.c_double()
        with self._live() as mine, other._live() as theirs:
            _check(lib.tutti_train_distance(mine, theirs, ctypes.byref(value)))
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
        _check(lib.tutti_train_free(handle))

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


@spans_world
def src(
    trains,
    chi: int,
    *,
    oversample: int = 0,
    cutoff: float = 0.0,
    seed: int = 0,
    resources: Resources | None = None,
    kernels: Kernels | str = Kernels.AUTO,
    progress=None,
    distributed_qr: bool = False,
    info: bool = False,
) -> Train | tuple[Train, dict]:
    """The product of a stack of trains compressed to bonds <= ``chi`` by SRC (``tutti_src``).

    ``trains`` (``Train`` objects, or what :class:`Train` takes: lists of numpy cores, quimb
    MPS and MPO objects, converted on the fly) are in mathematical order: ``src([h, psi],
    16)`` is H|psi> (for quimb objects, ``h.apply(psi)``). An MPS may only come first (a bra,
    not conjugated) or last. The sweep is split among the devices of ``resources`` (a
    :class:`tutti.Resources`; ``None``: every GPU, else one simulated device using all cores);
    the result does not depend on how many beyond rounding, and is exact when
    ``chi + oversample`` reaches every bond of the exact product. The sweep's memory is
    planned first: a cap in ``resources`` too small for it raises
    (``Status.ERROR_OUT_OF_MEMORY``, with the numbers) before any work. ``kernels`` (a
    :class:`tutti.Kernels` or its name) says whether the contractions run as device code.
    ``progress``, a callable, receives a :class:`tutti.Progress` as each site of each pass
    starts (``tutti.progress`` says how an exception in it is raised).

    Sketched environments that fit neither the device nor the host memory caps of
    ``resources`` are spilled to its scratch directory and read back (out of core); the
    files are removed before ``src`` returns, and the result's bits do not change.
    ``distributed_qr=True`` splits the QR of each site's sketched matrix among the devices (a
    distributed CholeskyQR2; the default factors it at the first device while the others
    wait); the result agrees to rounding, and one device always uses the default.

    With ``info=True`` the call returns ``(train, info)``, ``info`` a dict of the sweep's
    diagnostics: ``sketch_width`` (``chi + oversample``, clamped to the largest bond the
    product can have), ``devices``, ``seconds`` (wall clock), ``exact_fallback`` (``True``
    for a 2-site stack, contracted exactly), ``truncated_weight`` (the squared singular
    values the final truncation dropped), ``norm`` (of the result), ``qr`` (a dict: sites
    factored ``distributed``, of those ``shifted``, and by ``householder`` QR at the first
    device; ``worst_orthogonality``, the largest ``||Q^H Q - I||_F`` of the distributed QRs;
    ``seconds``) and ``environments`` (a dict: sites whose sketched environment stayed
    ``on_device``, moved ``on_host`` or went ``on_disk``, and the ``spilled_bytes`` written).
    """
    owned = [t if isinstance(t, Train) else Train(t) for t in trains]
    if not owned:
        raise TuttiError(Status.ERROR_INVALID_ARGUMENT, "src: `trains` is empty")
    options = _CSrcOptions()
    _check(lib.tutti_src_options_default(ctypes.byref(options)))
    options.chi_out = _int(chi, "chi").value
    options.oversample = _int(oversample, "oversample").value
    options.cutoff = float(cutoff)
    if not 0 <= int(seed) < 2**64:
        raise TuttiError(Status.ERROR_INVALID_ARGUMENT, f"src: seed {seed} is not a u64")
    options.seed = int(seed)
    options.resources, keepalive = _c_resources(resources)
    options.kernels = int(Kernels._coerce(kernels, "src"))
    options.distributed_qr = 1 if distributed_qr else 0
    diagnostics = _CSrcInfo()
    if info:
        options.info_out = ctypes.pointer(diagnostics)
    hook = _ProgressHook(progress, "src")
    options.progress = hook.c
    out = ctypes.c_void_p()
    with contextlib.ExitStack() as pinned:
        handles = [pinned.enter_context(t._live()).value for t in owned]
        stack = (ctypes.c_void_p * len(owned))(*handles)
        count = _int(len(owned), "n")
        _entering_library()
        status = lib.tutti_src(stack, count, ctypes.byref(options), ctypes.byref(out))
        if status != 0 and not hook.raised:
            # Now, while the thread's last error is this call's: leaving the block calls in.
            _check(status)
    del keepalive  # the struct's pointers were read during the call
    result = Train(None, _handle=out.value) if status == 0 else None
    if hook.raised:
        if result is not None:
            result.close()
        hook.raise_pending()
    if info:
        return result, diagnostics.to_dict()
    return result
