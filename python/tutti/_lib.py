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

