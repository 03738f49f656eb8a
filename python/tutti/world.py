"""MPI worlds: the processes of a host program's communicator, adopted by tutti
(``TuttiWorld``), so that a workload call is split among them.

Every process makes the same call with the same arguments and ``resources=Resources(...,
world=world)``; each runs a rank per device its resources select (``devices=1``: one rank per
process; several need MPI initialised with ``MPI_THREAD_SERIALIZED``, which mpi4py's default
``MPI_THREAD_MULTIPLE`` is) and every process gets the result. A failure on one process
raises :class:`tutti.TuttiError` on every other with ``Status.ERROR_REMOTE``, that process's
rank and message; the communicator stays usable. mpi4py is not imported here: :meth:`World.from_mpi4py` takes any object with
``py2f()``, and :class:`World` itself takes the Fortran handle (``MPI_Comm_c2f``)::

    from mpi4py import MPI
    import tutti

    with tutti.World.from_mpi4py(MPI.COMM_WORLD) as world:
        potential, accel = tutti.fmm(x, m, resources=tutti.Resources(kind="cpu", world=world))

A library built without MPI raises ``TuttiError`` with ``Status.ERROR_UNSUPPORTED``.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import numbers
import threading

from ._lib import TuttiError, _check, declare, lib

_int_p = ctypes.POINTER(ctypes.c_int)
declare(
    {
        "tutti_world_from_fcomm": (
            [ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p)],
            ctypes.c_int,
        ),
        "tutti_world_info": ([ctypes.c_void_p, _int_p, _int_p, _int_p, _int_p], ctypes.c_int),
        "tutti_world_fail": ([ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int),
        "tutti_world_free": ([ctypes.c_void_p], ctypes.c_int),
    }
)


class World:
    """The processes of an MPI communicator, given by its Fortran handle ``fcomm`` (an int:
    ``comm.py2f()`` in mpi4py, ``MPI_Comm_c2f(comm)`` in C). Collective over the
    communicator: every process makes it. MPI must be initialised, and is the host's to
    finalise. tutti talks on its own duplicate of the communicator.

    ``rank``, ``size``: this process's place in the world; ``local_rank``, ``local_size``: its
    place among the processes on its node (which share its cores, memory and GPUs).

    :meth:`close` (collective, like ``MPI_Comm_free``; also by leaving a ``with`` block)
    releases the duplicate; call it before MPI is finalised. A world is never closed by the
    garbage collector: processes collect at different times, and a collective release from
    one of them alone would wait forever.
    """

    __slots__ = ("_handle", "rank", "size", "local_rank", "local_size")

    def __init__(self, fcomm: int):
        if isinstance(fcomm, bool) or not isinstance(fcomm, numbers.Integral):
            raise TypeError(f"World: `fcomm` must be an int (a Fortran handle), got {fcomm!r}")
        if not -(2**31) <= int(fcomm) < 2**31:
            raise ValueError(f"World: `fcomm` is {fcomm}: not a Fortran (32-bit) handle")
        handle = ctypes.c_void_p()
        _check(lib.tutti_world_from_fcomm(int(fcomm), ctypes.byref(handle)))
        self._handle = handle.value
        numbers_ = [ctypes.c_int() for _ in range(4)]
        _check(lib.tutti_world_info(self._handle, *map(ctypes.byref, numbers_)))
        self.rank, self.size, self.local_rank, self.local_size = (n.value for n in numbers_)

    @classmethod
    def from_mpi4py(cls, comm) -> World:
        """The world of an mpi4py communicator (anything with ``py2f()``)."""
        py2f = getattr(comm, "py2f", None)
        if py2f is None:
            raise TypeError(f"World.from_mpi4py: {comm!r} has no py2f(): not an mpi4py Comm")
        return cls(py2f())

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has released this world."""
        return self._handle is None

    def close(self) -> None:
        """Releases the world (collective over its processes); closing twice does nothing."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _check(lib.tutti_world_free(handle))

    def _pointer(self) -> int:
        """The ``TuttiWorld *`` for a call; a closed world is refused."""
        if self._handle is None:
            raise ValueError("World: this world is closed")
        return self._handle

    def _fail(self, message: str) -> None:
        """Fails this process's call before it reaches the library (``tutti_world_fail``), so
        the other processes, waiting in theirs, raise ``ERROR_REMOTE`` with ``message``."""
        if self._handle is not None:
            _check(lib.tutti_world_fail(self._handle, message.encode("utf-8", "replace")))

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"rank {self.rank} of {self.size}"
        return f"World({state}, local rank {self.local_rank} of {self.local_size})"


_calls = threading.local()


def _entering_library() -> None:
    """Marks that this thread's workload call has reached the C library: from here on, a
    failure is the library's, which tells the other processes itself."""
    _calls.count = getattr(_calls, "count", 0) + 1


def spans_world(function):
    """Decorates a workload function taking ``resources=``: when ``resources.world`` is set
    and the call fails in Python before it reaches the library (an argument refused here on
    this process only), the other processes are told (:meth:`World._fail`) instead of
    waiting for this one forever."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            resources = signature.bind_partial(*args, **kwargs).arguments.get("resources")
        except TypeError:  # the call itself is wrong; it raises below, after telling
            resources = kwargs.get("resources")
        world = getattr(resources, "world", None)
        if world is None:
            return function(*args, **kwargs)
        before = getattr(_calls, "count", 0)
        try:
            return function(*args, **kwargs)
        except BaseException as error:
            if getattr(_calls, "count", 0) == before and not world.closed:
                text = getattr(error, "message", None)
                try:
                    world._fail(
                        text if isinstance(text, str) else f"{type(error).__name__}: {error}"
                    )
                except TuttiError as told:  # the original error stays the one raised
                    error.add_note(f"telling the other processes failed too: {told}")
            raise

    return call

