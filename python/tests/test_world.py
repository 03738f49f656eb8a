"""tutti.World in one process: argument checks, a library without MPI, and the guard that
tells the other processes when a call over a world fails in Python before reaching the
library (the mpirun test is ``tests/mpi/world.py``, run by ``cargo xtask mpi-test``)."""

from __future__ import annotations

import numpy as np
import pytest

import tutti


def test_a_world_needs_a_fortran_handle_and_mpi() -> None:
    with pytest.raises(TypeError, match="must be an int"):
        tutti.World("0")
    with pytest.raises(TypeError, match="must be an int"):
        tutti.World(True)
    with pytest.raises(ValueError, match="not a Fortran"):
        tutti.World(2**31)
    with pytest.raises(TypeError, match="no py2f"):
        tutti.World.from_mpi4py(object())
    with pytest.raises(tutti.TuttiError) as raised:
        tutti.World(0)
    # The suite's library is built without MPI; one built with it refuses a process that
    # has not initialised MPI.
    if raised.value.status == tutti.Status.ERROR_UNSUPPORTED:
        assert "built without MPI" in raised.value.message
    else:
        assert raised.value.status == tutti.Status.ERROR_DEVICE, raised.value
    with pytest.raises(TypeError, match="must be a tutti.World"):
        tutti.Resources(world=0)


class RecordingWorld(tutti.World):
    """A world that is not one: it records what it would tell the other processes. Its
    pointer is not a live TuttiWorld, so the library refuses any call naming it."""

    def __init__(self) -> None:  # noqa: D107 - no communicator behind it
        self._handle = 64
        self.rank, self.size, self.local_rank, self.local_size = 0, 2, 0, 2
        self.told: list[str] = []

    def _fail(self, message: str) -> None:
        self.told.append(message)

    __slots__ = ("told",)


def test_a_call_failing_in_python_tells_the_other_processes() -> None:
    world = RecordingWorld()
    resources = tutti.Resources(kind="cpu", devices=1, world=world)
    flat = np.zeros((4, 2))
    with pytest.raises(tutti.TuttiError, match="must have shape"):
        tutti.fmm(flat, np.ones(4), resources=resources)
    assert len(world.told) == 1
    assert world.told[0] == "tutti_fmm: `positions` must have shape (N, 3), got (4, 2)"
    with pytest.raises(ValueError):
        tutti.fit(lambda e, p: ([0.0], [[1.0]]), ["one"], [0.0], resources=resources)
    assert world.told[1].startswith("ValueError: invalid literal for int()")
    # A call that reaches the library: the library refuses the world and tells nobody
    # (a real world's processes would all be in the call).
    told = len(world.told)
    with pytest.raises(tutti.TuttiError, match="not a live world handle"):
        tutti.fmm(np.zeros((4, 3)), np.ones(4), resources=resources)
    assert len(world.told) == told
    # Without a world nothing is told.
    with pytest.raises(tutti.TuttiError):
        tutti.fmm(flat, np.ones(4), resources=tutti.Resources(kind="cpu"))


def test_a_closed_world_is_refused() -> None:
    world = RecordingWorld()
    world._handle = None
    assert world.closed
    world.close()
    with pytest.raises(ValueError, match="closed"):
        tutti.fmm(np.zeros((4, 3)), np.ones(4), resources=tutti.Resources(world=world))
