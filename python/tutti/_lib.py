"""The library itself: where libtutti is found and loaded, the statuses and kinds every
function shares, :class:`TuttiError` and the helpers every workload module uses.

Each workload module (``devices``, ``fit``, ``chem``, ``fmm``, ``sweep``, ``resources``) holds
its own ctypes mirrors of the header's structs and declares its own functions' signatures
with :func:`declare`, so a change to one workload's C functions touches one module.
"""

from __future__ import annotations

import ctypes
import enum
import os
from pathlib import Path

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
    ERROR_REMOTE = -10
    ERROR_SINGULAR = -11


class Kind(enum.IntEnum):
    """TuttiKind: which kind of device a call uses."""

    CPU = 0
    GPU = 1
    AUTO = 2


class Kernels(enum.IntEnum):
    """TuttiKernels: whether a workload's ranks run its device code or its host code.

    ``AUTO`` (the default): the device code on GPU ranks, the host code on simulated devices;
    ``ALWAYS``: the device code everywhere (on simulated devices its host twins, which give
    the host code's bits: how the GPU path is tested without a GPU); ``NEVER``: the host code
    everywhere, GPU ranks included.
    """

    AUTO = 0
    ALWAYS = 1
    NEVER = 2

    @classmethod
    def _coerce(cls, value, function: str) -> "Kernels":
        """``value`` as a member: a member, its value, or its name in any case."""
        try:
            if isinstance(value, str):
                return cls[value.upper()]
            return cls(value)
        except (KeyError, ValueError):
            raise TuttiError(
                Status.ERROR_INVALID_ARGUMENT,
                f"{function}: `kernels` is {value!r}: expected 'auto', 'always' or 'never'",
            ) from None



class TuttiError(Exception):
    """A tutti call failed.

    ``status`` is the C status (a :class:`Status` when this version knows it, else the raw
    int), ``message`` the library's ``tutti_last_error()`` for the call. Each status has its
    own subclass (:class:`InvalidArgumentError`, :class:`OutOfMemoryError`, ...), and
    ``TuttiError(status, message)`` builds the one the status names, so ``except
    tutti.InvalidArgumentError`` and ``except tutti.TuttiError`` both work. The subclasses
    are also the built-in exceptions users catch: ``ValueError`` for an invalid argument,
    ``MemoryError`` for memory, ``OSError`` for files, ``NotImplementedError`` for what is
    not supported.
    """

    #: The status this class stands for (``None`` for the base class).
    STATUS: Status | None = None

    def __new__(cls, status: int = 0, message: str = "", *args):
        if cls is TuttiError:
            cls = _ERRORS.get(int(status), TuttiError)
        # The built-in exception whose layout the class has allocates it (OSError has a
        # layout of its own; MemoryError shares Exception's).
        builtin = cls
        while builtin.__module__ != "builtins":
            builtin = builtin.__base__
        return builtin.__new__(cls)

    def __init__(self, status: int, message: str):
        try:
            status = Status(status)
            name = f"TUTTI_{status.name}"
        except ValueError:
            name = "TUTTI_ERROR_UNKNOWN"
        text = f"{message} ({name}, status {int(status)})"
        Exception.__init__(self, text)
        self.args = (text,)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return self.args[0]

    def __reduce__(self):
        return (TuttiError, (int(self.status), self.message))


class InvalidArgumentError(TuttiError, ValueError):
    """TUTTI_ERROR_INVALID_ARGUMENT: an argument or input is out of its domain."""

    STATUS = Status.ERROR_INVALID_ARGUMENT


class NullPointerError(TuttiError, ValueError):
    """TUTTI_ERROR_NULL_POINTER: a required pointer was null (a bug in a binding)."""

    STATUS = Status.ERROR_NULL_POINTER


class UnsupportedError(TuttiError, NotImplementedError):
    """TUTTI_ERROR_UNSUPPORTED: valid, but not supported by this build or device."""

    STATUS = Status.ERROR_UNSUPPORTED


class DeviceError(TuttiError, RuntimeError):
    """TUTTI_ERROR_DEVICE: a device failed (driver, launch, transfer)."""

    STATUS = Status.ERROR_DEVICE


class OutOfMemoryError(TuttiError, MemoryError):
    """TUTTI_ERROR_OUT_OF_MEMORY: the work does not fit the memory it was given."""

    STATUS = Status.ERROR_OUT_OF_MEMORY


class InputOutputError(TuttiError, OSError):
    """TUTTI_ERROR_IO: reading or writing a file failed."""

    STATUS = Status.ERROR_IO


class InternalError(TuttiError, RuntimeError):
    """TUTTI_ERROR_PANIC: a bug in tutti (a caught panic); please report it."""

    STATUS = Status.ERROR_PANIC


class CallbackError(TuttiError, RuntimeError):
    """TUTTI_ERROR_CALLBACK: a user callback failed; ``__cause__`` is its exception when it
    was a Python callable."""

    STATUS = Status.ERROR_CALLBACK


class NotConvergedError(TuttiError, ArithmeticError):
    """TUTTI_ERROR_NOT_CONVERGED: an iteration (SCF, fit) did not converge."""

    STATUS = Status.ERROR_NOT_CONVERGED


class RemoteError(TuttiError, RuntimeError):
    """TUTTI_ERROR_REMOTE: another rank or process of the group failed first."""

    STATUS = Status.ERROR_REMOTE


class SingularError(TuttiError, ArithmeticError):
    """TUTTI_ERROR_SINGULAR: the matrix is singular, structurally (an empty row or column)
    or numerically (pivots were perturbed and refinement could not recover the solution)."""

    STATUS = Status.ERROR_SINGULAR


#: Each error status's subclass of TuttiError.
_ERRORS = {
    int(error.STATUS): error
    for error in (
        InvalidArgumentError,
        NullPointerError,
        UnsupportedError,
        DeviceError,
        OutOfMemoryError,
        InputOutputError,
        InternalError,
        CallbackError,
        NotConvergedError,
        RemoteError,
        SingularError,
    )
}


_PACKAGE = Path(__file__).resolve().parent
_LIBRARY = "libtutti.so"


def library_path() -> Path:
    """Where libtutti is loaded from: ``TUTTI_LIB`` when set, else the library installed
    inside this package (``pip install ./python``), else, for a package used from a checkout
    of the repository, the newer of ``target/release`` and ``target/debug``."""
    explicit = os.environ.get("TUTTI_LIB")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"TUTTI_LIB={explicit} is not a file")
        return path
    bundled = _PACKAGE / "lib" / _LIBRARY
    if bundled.is_file():
        return bundled
    checkout = _PACKAGE.parents[1]
    candidates = [checkout / "target" / profile / _LIBRARY for profile in ("release", "debug")]
    built = [path for path in candidates if path.is_file()]
    if not built or not (checkout / "Cargo.toml").is_file():
        raise FileNotFoundError(
            f"libtutti.so is not installed in {_PACKAGE}: install the package with "
            "`pip install ./python` from the repository's root, or set TUTTI_LIB to a built "
            "library (`cargo build --release -p tutti-capi`)"
        )
    return max(built, key=lambda path: path.stat().st_mtime)


#: Every signature declared so far, ``{name: (argtypes, restype)}`` (checked against the
#: header by python/tests/test_header_sync.py).
DECLARED: dict = {}


def declare(signatures: dict) -> None:
    """Sets ``argtypes`` and ``restype`` of the named functions of :data:`lib`, from a dict
    ``{name: ([argtypes...], restype)}``."""
    for name, (argtypes, restype) in signatures.items():
        DECLARED[name] = (list(argtypes), restype)
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = restype


#: The loaded libtutti; each module declares its functions' signatures on it.
lib = ctypes.CDLL(str(library_path()))

_int_p = ctypes.POINTER(ctypes.c_int)
declare(
    {
        "tutti_version": ([_int_p, _int_p, _int_p], ctypes.c_int),
        "tutti_last_error": ([], ctypes.c_char_p),
        "tutti_status_name": ([ctypes.c_int], ctypes.c_char_p),
        "tutti_free_c": ([ctypes.c_void_p], ctypes.c_int),
    }
)


def __getattr__(name: str):
    """The C functions as attributes of this module too (``tutti._lib.tutti_free_c``)."""
    if name.startswith("tutti_"):
        return getattr(lib, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check(status: int) -> None:
    """Raises TuttiError for a negative status, with the calling thread's message."""
    if status < 0:
        message = lib.tutti_last_error().decode("utf-8", errors="replace")
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
    _check(lib.tutti_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch)))
    return major.value, minor.value, patch.value

