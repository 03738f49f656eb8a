"""tutti.World over mpi4py (run under ``mpirun -n N`` by ``cargo xtask mpi-test``, with
``TUTTI_LIB`` naming a libtutti built with ``--features mpi``): the Python counterpart of
``ffi-tests/mpi/test_world.c``. A program whose MPI is initialised by mpi4py passes
``MPI.COMM_WORLD`` to tutti; the FMM and a fit over the world give bitwise the results of the
same calls on N simulated devices in this process; an error on one process (found by the
library, or by Python before the library is called) raises ``ERROR_REMOTE`` with its rank and
message on every other, and the communicator and the world stay usable; each half of a split
communicator is a world of its own. Every process prints ``rank R: ok``.

Not collected by pytest (its name has no ``test_`` prefix): it needs mpirun.
"""

from __future__ import annotations

import math
import sys

import numpy as np
from mpi4py import MPI

import tutti

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if not ok:
        failures.append(what)
        print(f"rank {rank}: FAILED: {what}", flush=True)


def bodies(n: int = 1500):
    """The same bodies on every process."""
    rng = np.random.default_rng(12345)
    return rng.uniform(-1.0, 1.0, (n, 3)), rng.uniform(0.5, 1.5, n)


def cpu(devices=None, world=None) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices, world=world)


def fmm_over(world: tutti.World, what: str) -> None:
    x, m = bodies()
    potential, accel = tutti.fmm(x, m, resources=cpu(1, world))
    local_potential, local_accel = tutti.fmm(x, m, resources=cpu(world.size))
    check(
        potential.tobytes() == local_potential.tobytes()
        and accel.tobytes() == local_accel.tobytes(),
        f"{what}: the FMM over {world.size} processes is bitwise the FMM on "
        f"{world.size} devices",
    )


def exponential(experiment: int, p):
    xs = [experiment + 0.25 * i for i in range(5)]
    r = [p[0] * math.exp(p[1] * x) - 2.0 * math.exp(-0.5 * x) + 1e-3 * math.sin(7 * x) for x in xs]
    jac = [[math.exp(p[1] * x), p[0] * x * math.exp(p[1] * x)] for x in xs]
    return r, jac


def expect_failure(call, own_status, own_text: str, what: str) -> None:
    """`call` fails on the last process with `own_status` and `own_text`, and on every other
    with ERROR_REMOTE naming the last rank and the same text."""
    try:
        call()
    except tutti.TuttiError as error:
        if rank == size - 1:
            check(
                error.status == own_status and own_text in error.message,
                f"{what}: the bad process raises its own error ({error})",
            )
        else:
            check(
                error.status == tutti.Status.ERROR_REMOTE
                and f"rank {size - 1} failed" in error.message
                and own_text in error.message,
                f"{what}: rank {rank} raises ERROR_REMOTE naming rank {size - 1} ({error})",
            )
    else:
        check(False, f"{what}: the call must fail on every process")


with tutti.World.from_mpi4py(comm) as world:
    check((world.rank, world.size) == (rank, size), f"rank {world.rank} of {world.size}")
    check(
        (world.local_rank, world.local_size) == (rank, size),
        f"one node: local rank {world.local_rank} of {world.local_size}",
    )
    fmm_over(world, "MPI.COMM_WORLD")

    counts = [5] * 7
    over = tutti.fit(exponential, counts, [1.0, 0.0], resources=cpu(1, world))
    alone = tutti.fit(exponential, counts, [1.0, 0.0], resources=cpu(size))
    check(
        np.array_equal(over.parameters, alone.parameters)
        and np.array_equal(over.covariance, alone.covariance),
        f"the fit over {size} processes is bitwise the fit on {size} devices",
    )

    # A NaN mass on the last process only: the library refuses it there.
    x, m = bodies()
    if rank == size - 1:
        m[7] = np.nan
    expect_failure(
        lambda: tutti.fmm(x, m, resources=cpu(1, world)),
        tutti.Status.ERROR_INVALID_ARGUMENT,
        "of body 7 is NaN",
        "a NaN mass",
    )
    # Positions of the wrong shape on the last process only: refused in Python, before the
    # library is called; the other processes, already waiting in tutti_fmm, are told.
    x, m = bodies()
    bad = x[:, :2] if rank == size - 1 else x
    expect_failure(
        lambda: tutti.fmm(bad, m, resources=cpu(1, world)),
        tutti.Status.ERROR_INVALID_ARGUMENT,
        "`positions` must have shape (N, 3)",
        "positions of the wrong shape",
    )

    check(comm.allreduce(rank) == size * (size - 1) // 2, "mpi4py's allreduce after them")
    fmm_over(world, "after the failures")

check(world.closed, "leaving the with block closes the world")
world.close()  # closing twice does nothing

# Each half of a split communicator is a world of its own.
half = comm.Split(rank % 2, rank)
with tutti.World.from_mpi4py(half) as half_world:
    check(half_world.size == half.size, f"the half has {half_world.size} processes")
    fmm_over(half_world, "half of MPI.COMM_WORLD")
half.Free()

if failures:
    sys.exit(1)
print(f"rank {rank}: ok", flush=True)
