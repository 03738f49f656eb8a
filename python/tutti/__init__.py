"""Python bindings to tutti's C ABI (``include/tutti.h``) through ctypes.

Install it with ``pip install ./python`` from the repository's root: cargo builds libtutti
and the package carries it. The library is loaded from ``TUTTI_LIB`` when that is set, else
from inside the package (see :func:`library_path`). Calls into the library release the GIL
(ctypes does), so other Python threads run while tutti computes.

Every failing call raises a :class:`TuttiError`, of the subclass its C status names
(:class:`InvalidArgumentError`, a ``ValueError`` too; :class:`OutOfMemoryError`, a
``MemoryError``; ...), carrying the status and the library's message::

    >>> import tutti
    >>> major, minor, patch = tutti.version()
    >>> tutti.device_info(tutti.Kind.CPU, count=2, index=1).index
    1
    >>> tutti.device_info(tutti.Kind.CPU, count=2, index=2)
    Traceback (most recent call last):
    tutti.InvalidArgumentError: tutti_device_info: argument `index` is 2, out of range: ...

The package is split by job, one module per workload, each holding its own ctypes mirrors of
the header's structs and declaring its own functions: ``_lib`` (loading, statuses,
:class:`TuttiError`), ``devices``, ``resources`` (:class:`Resources`, where a call runs), ``world``
(:class:`World`, MPI processes a call is split among),
``progress`` (:class:`Progress`, what every workload's ``progress=`` callable receives),
``fit``, ``chem`` (RHF energy and gradient), ``fmm``, ``sweep`` (:class:`Train`,
:func:`src`), ``sparse`` (:func:`splu`, :class:`SparseLU`, :func:`spsolve`). Everything public is re-exported here.
"""

from __future__ import annotations

__all__ = [
    "__version__",
    "Kind",
    "Kernels",
    "Status",
    "TuttiError",
    "InvalidArgumentError",
    "NullPointerError",
    "UnsupportedError",
    "DeviceError",
    "OutOfMemoryError",
    "InputOutputError",
    "InternalError",
    "CallbackError",
    "NotConvergedError",
    "RemoteError",
    "SingularError",
    "DeviceInfo",
    "MAX_SIMULATED_DEVICES",
    "library_path",
    "version",
    "device_count",
    "device_info",
    "Resources",
    "World",
    "FitResult",
    "Termination",
    "fit",
    "RhfEnergy",
    "rhf_energy",
    "ShellGradient",
    "RhfGradient",
    "rhf_gradient",
    "fmm",
    "direct_sum",
    "order_for_accuracy",
    "TrainKind",
    "Dtype",
    "Train",
    "src",
    "SparseLU",
    "splu",
    "spsolve",
    "Progress",
]

#: The most simulated (CPU) devices one selection may open (TUTTI_MAX_SIMULATED_DEVICES).

from ._version import __version__
from ._lib import (
    MAX_SIMULATED_DEVICES,
    CallbackError,
    DeviceError,
    InputOutputError,
    InternalError,
    InvalidArgumentError,
    Kernels,
    Kind,
    NotConvergedError,
    NullPointerError,
    OutOfMemoryError,
    RemoteError,
    SingularError,
    Status,
    TuttiError,
    UnsupportedError,
    library_path,
    version,
)
from .devices import DeviceInfo, _CDeviceInfo, device_count, device_info
from .resources import Resources
from .world import World
from .fit import FitResult, Termination, _CFitOptions, _CFitResult, fit
from .chem import (
    RhfEnergy,
    RhfGradient,
    ShellGradient,
    _CGradientOptions,
    _CGradientShell,
    _CGradientTimings,
    _CRhfGradient,
    _CRhfOptions,
    _CRhfResult,
    rhf_energy,
    rhf_gradient,
)
from .progress import Progress, _CProgress, _CProgressCallback
from .fmm import _CFmmOptions, direct_sum, fmm, order_for_accuracy
from .sweep import Dtype, Train, TrainKind, _CSrcOptions, src
from .sparse import SparseLU, _CSparseInfo, _CSparseOptions, _CSparseSolveInfo, splu, spsolve

# The public classes print, pickle and document as tutti.X, wherever they are defined.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = __name__
del _name, _value
