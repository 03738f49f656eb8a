"""Where a computation runs: :class:`Resources`, taken by every workload function as its
``resources=`` keyword (the C ``TuttiResources``; ``tutti_backend::Resources`` in Rust).

Workload modules put it into their options struct with :func:`_c_resources`::

    options.resources, keepalive = _c_resources(resources)
    ... call the C function while ``keepalive`` is alive ...
"""

from __future__ import annotations

import ctypes
import numbers
import os
from dataclasses import dataclass

from ._lib import Kind, _check, declare, lib
from .world import World

__all__ = ["Resources"]

#: TuttiResources.devices for "every GPU, or one simulated device using all cores"
#: (TUTTI_ALL_DEVICES).
_ALL_DEVICES = -1

_MIB = 1 << 20
_KINDS = {"auto": Kind.AUTO, "cpu": Kind.CPU, "gpu": Kind.GPU}


class _CResources(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("devices", ctypes.c_int),
        ("ordinals", ctypes.POINTER(ctypes.c_int)),
        ("ordinal_count", ctypes.c_int),
        ("device_memory_bytes", ctypes.c_uint64),
        ("host_memory_bytes", ctypes.c_uint64),
        # c_void_p rather than c_char_p: the buffer is kept alive by the caller, see _to_c.
        ("scratch_dir", ctypes.c_void_p),
        ("scratch_limit_bytes", ctypes.c_uint64),
        # const TuttiWorld *: NULL, the call runs in this process alone; else a World's.
        ("world", ctypes.c_void_p),
    ]


declare({"tutti_resources_default": ([ctypes.POINTER(_CResources)], ctypes.c_int)})


def _count(value, name: str, *, low: int, high: int) -> int:
    """An integer in [low, high), refusing bools, floats and strings with a clear message."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"Resources: `{name}` must be an int, got {value!r}")
    value = int(value)
    if not low <= value < high:
        raise ValueError(f"Resources: `{name}` is {value}: expected {low} to {high - 1}")
    return value


def _mib(value, name: str) -> int | None:
    """A size in MiB (int or float) as bytes, or None; 0 and negative sizes are refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"Resources: `{name}` must be a number of MiB or None, got {value!r}")
    if not value > 0:  # also refuses NaN
        raise ValueError(
            f"Resources: `{name}` is {value}: expected a positive number of MiB "
            "(None for no cap)"
        )
    size = round(value * _MIB)
    if not 1 <= size < 2**64:
        raise ValueError(f"Resources: `{name}` is {value} MiB: out of range")
    return size


@dataclass(frozen=True)
class Resources:
    """Which devices a computation may use, and how much memory and scratch space.

    - ``kind``: ``"auto"`` (the default: GPUs when there are any, else simulated CPU
      devices), ``"cpu"`` or ``"gpu"`` (or a :class:`Kind`).
    - ``devices``: how many, the first n (at least 1); ``None`` (the default) means every GPU,
      or one simulated device using all cores.
    - ``ordinals``: instead of ``devices``, the device ordinals in rank order (an ordinal may
      repeat: two ranks then share one device).
    - ``device_memory_mib``, ``host_memory_mib``: caps (per device, and on the host in all);
      ``None`` means no cap beyond the hardware.
    - ``scratch``: the directory for scratch (spill) files (``None``: the system temporary
      directory); ``scratch_limit_mib`` caps what is written there.
    - ``world``: a :class:`tutti.World` (MPI processes) to split the call among: every
      process makes the same call, each runs a rank per device it selects; ``None`` (the default)
      runs the call in this process alone.

    ``Resources()`` is what every workload uses when given ``resources=None``. Bad values
    raise ``ValueError`` (``TypeError`` for a wrong type) here; device selection itself (more
    devices than there are, an unknown ordinal, a GPU without CUDA) is checked by the call.
    """

    kind: str = "auto"
    devices: int | None = None
    ordinals: tuple[int, ...] | None = None
    device_memory_mib: float | None = None
    host_memory_mib: float | None = None
    scratch: str | None = None
    scratch_limit_mib: float | None = None
    world: World | None = None

    def __post_init__(self) -> None:
        if self.world is not None and not isinstance(self.world, World):
            raise TypeError(
                f"Resources: `world` must be a tutti.World or None, got {self.world!r}"
            )
        kind = self.kind
        if isinstance(kind, Kind):
            kind = kind.name.lower()
        if not isinstance(kind, str) or kind.lower() not in _KINDS:
            raise ValueError(
                f"Resources: unknown `kind` {self.kind!r}: expected 'auto', 'cpu' or 'gpu'"
            )
        object.__setattr__(self, "kind", kind.lower())
        if self.devices is not None:
            if self.devices == 0 and not isinstance(self.devices, bool):
                raise ValueError(
                    "Resources: `devices` is 0: give at least 1, or None for every GPU "
                    "(else one simulated device using all cores)"
                )
            _count(self.devices, "devices", low=1, high=2**31)
            object.__setattr__(self, "devices", int(self.devices))
        if self.ordinals is not None:
            if isinstance(self.ordinals, (str, bytes)) or not hasattr(self.ordinals, "__iter__"):
                raise TypeError(
                    f"Resources: `ordinals` must be a sequence of ints, got {self.ordinals!r}"
                )
            ordinals = tuple(
                _count(o, f"ordinals[{i}]", low=0, high=2**31) for i, o in enumerate(self.ordinals)
            )
            if not ordinals:
                raise ValueError("Resources: `ordinals` is empty: give at least one, or None")
            if self.devices is not None:
                raise ValueError(
                    f"Resources: give `devices` ({self.devices}) or `ordinals` "
                    f"({list(ordinals)}), not both"
                )
            object.__setattr__(self, "ordinals", ordinals)
        for name in ("device_memory_mib", "host_memory_mib", "scratch_limit_mib"):
            _mib(getattr(self, name), name)
        if self.scratch is not None:
            if not isinstance(self.scratch, (str, bytes, os.PathLike)):
                raise TypeError(
                    f"Resources: `scratch` must be a path or None, got {self.scratch!r}"
                )
            scratch = os.fsdecode(self.scratch)
            if not scratch or "\0" in scratch:
                raise ValueError(f"Resources: `scratch` {scratch!r} is not a directory name")
            try:
                scratch.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(f"Resources: `scratch` {scratch!r} is not valid UTF-8") from None
            object.__setattr__(self, "scratch", scratch)

    def _to_c(self) -> tuple[_CResources, tuple]:
        """The C ``TuttiResources`` for these resources, and the objects its pointers point
        into (the ordinals array, the scratch directory's bytes): keep the second alive until
        the C call that reads the struct returns."""
        out = _CResources(
            kind=int(_KINDS[self.kind]),
            devices=_ALL_DEVICES if self.devices is None else self.devices,
            ordinal_count=0,
            device_memory_bytes=_mib(self.device_memory_mib, "device_memory_mib") or 0,
            host_memory_bytes=_mib(self.host_memory_mib, "host_memory_mib") or 0,
            scratch_limit_bytes=_mib(self.scratch_limit_mib, "scratch_limit_mib") or 0,
        )
        keepalive = []
        if self.ordinals is not None:
            ordinals = (ctypes.c_int * len(self.ordinals))(*self.ordinals)
            out.ordinals = ctypes.cast(ordinals, ctypes.POINTER(ctypes.c_int))
            out.ordinal_count = len(self.ordinals)
            keepalive.append(ordinals)
        if self.scratch is not None:
            scratch = ctypes.create_string_buffer(self.scratch.encode("utf-8"))
            out.scratch_dir = ctypes.addressof(scratch)
            keepalive.append(scratch)
        if self.world is not None:
            out.world = self.world._pointer()
            keepalive.append(self.world)
        return out, tuple(keepalive)


def _c_resources(resources: Resources | None) -> tuple[_CResources, tuple]:
    """The ``resources=`` keyword of a workload function as a C struct and its keepalive
    (see :meth:`Resources._to_c`); ``None`` gives the library's defaults."""
    if resources is None:
        out = _CResources()
        _check(lib.tutti_resources_default(ctypes.byref(out)))
        return out, ()
    if not isinstance(resources, Resources):
        raise TypeError(
            f"`resources` must be a tutti.Resources or None, got {type(resources).__name__}"
        )
    return resources._to_c()
