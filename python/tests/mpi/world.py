"""tutti.World over mpi4py (run under ``mpirun -n N`` by ``cargo xtask mpi-test``, with
``TUTTI_LIB`` naming a libtutti built with ``--features mpi``): the Python counterpart of
``ffi-tests/mpi/test_world.c``. A program whose MPI is initialised by mpi4py passes
``MPI.COMM_WORLD`` to tutti; the FMM and a fit over the world give bitwise the results of the
same calls on N simulated devices in this process; an error on one process (found by the
library, or by Python before the library is called) raises ``ERROR_REMOTE`` with its rank and
message on every other, and the communicator and the world stay usable; each half of a split
communicator is a world of its own. A sparse LU (``tutti.splu``) over the world solves to the
bits of the same number of devices in this process, and a NaN value or a right-hand side of
the wrong shape on one process raises ``ERROR_REMOTE`` on the others. Every process prints
``rank R: ok``.

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


class Stencil:
    """An unsymmetric 5-point stencil on a 24 x 24 grid, as the CSR attributes
    ``tutti.splu`` reads of a scipy.sparse matrix (so that scipy is not needed here)."""

    format = "csr"
    dtype = np.dtype(np.float64)

    def __init__(self, grid: int = 24, scale: float = 1.0):
        n = grid * grid
        indptr, indices, data = [0], [], []
        for y in range(grid):
            for x in range(grid):
                row = x + grid * y
                for inside, col, value in (
                    (y > 0, row - grid, -1.2),
                    (x > 0, row - 1, -1.3),
                    (True, row, 4.5),
                    (x < grid - 1, row + 1, -0.7),
                    (y < grid - 1, row + grid, -0.8),
                ):
                    if inside:
                        indices.append(col)
                        data.append(scale * value)
                indptr.append(len(indices))
        self.shape = (n, n)
        self.indptr = np.array(indptr, dtype=np.int64)
        self.indices = np.array(indices, dtype=np.int64)
        self.data = np.array(data)

    def tocsr(self):
        return self


def sparse_over(world: tutti.World, what: str) -> None:
    a = Stencil()
    b = np.stack([np.arange(a.shape[0]) % 7 - 3.0, np.arange(a.shape[0]) % 5 * 0.25], axis=1)
    with tutti.splu(a, resources=cpu(1, world)) as lu:
        x = lu.solve(b)
        check(lu.info["devices"] == world.size, f"{what}: info counts {world.size} ranks")
        lu.refactor(Stencil(scale=2.0))
        y = lu.solve(b[:, 0])
    with tutti.splu(a, resources=cpu(world.size)) as alone:
        x_alone = alone.solve(b)
        alone.refactor(Stencil(scale=2.0))
        y_alone = alone.solve(b[:, 0])
    check(
        x.tobytes() == x_alone.tobytes() and y.tobytes() == y_alone.tobytes(),
        f"{what}: the sparse LU over {world.size} processes is bitwise that on "
        f"{world.size} devices",
    )


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

    sparse_over(world, "MPI.COMM_WORLD")
    with tutti.splu(Stencil(), resources=cpu(1, world)) as lu:
        # A NaN value on the last process only: the library refuses it there.
        values = Stencil().data
        if rank == size - 1:
            values[11] = np.nan
        expect_failure(
            lambda: lu.refactor(values),
            tutti.Status.ERROR_INVALID_ARGUMENT,
            "NaN",
            "a NaN sparse value",
        )
        lu.refactor(Stencil())
        # A right-hand side of the wrong shape on the last process only: refused in Python.
        n = Stencil().shape[0]
        b = np.ones(n - 1 if rank == size - 1 else n)
        expect_failure(
            lambda: lu.solve(b),
            tutti.Status.ERROR_INVALID_ARGUMENT,
            "solve: `b` has shape",
            "a right-hand side of the wrong shape",
        )
        check(np.all(np.isfinite(lu.solve(np.ones(n)))), "the sparse LU solves after them")

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
