"""Devices: how many a computation may use, and what each one is (``tutti_device_*``)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ._lib import Kind, _check, _int, declare, lib

__all__ = ["DeviceInfo", "device_count", "device_info"]


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


declare(
    {
        "tutti_device_count": ([ctypes.c_int, ctypes.POINTER(ctypes.c_int)], ctypes.c_int),
        "tutti_device_info": (
            [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_CDeviceInfo)],
            ctypes.c_int,
        ),
    }
)


def device_count(kind: Kind | int = Kind.AUTO) -> int:
    """How many devices of ``kind`` a computation may use by default.

    CPU: the host's core count. GPU: the CUDA device count (TuttiError with
    ``Status.ERROR_UNSUPPORTED`` from a library built without CUDA). AUTO: GPUs if any, else CPU.
    """
    count = ctypes.c_int()
    _check(lib.tutti_device_count(_int(kind, "kind"), ctypes.byref(count)))
    return count.value


def device_info(kind: Kind | int, count: int, index: int) -> DeviceInfo:
    """Device ``index`` (0-based) of a selection of the first ``count`` devices of ``kind``."""
    raw = _CDeviceInfo()
    _check(
        lib.tutti_device_info(
            _int(kind, "kind"), _int(count, "count"), _int(index, "index"), ctypes.byref(raw)
        )
    )
    try:
        name = ctypes.string_at(raw.name).decode("utf-8", errors="replace")
    finally:
        _check(lib.tutti_free_c(raw.name))
    return DeviceInfo(
        kind=Kind(raw.kind),
        ordinal=raw.ordinal,
        index=raw.index,
        threads=raw.threads,
        free_bytes=raw.free_bytes,
        total_bytes=raw.total_bytes,
        name=name,
    )
