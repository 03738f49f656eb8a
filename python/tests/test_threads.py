"""Train handles shared between threads: close() during another thread's call is an error for
that thread or the next call, never a crash (review finding H3)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tutti

# Run in a child so that a segfault fails this test instead of killing pytest; faulthandler
# prints the threads' stacks if it happens. Bond 256: the cores are large enough to be
# mmap'd, so a use after free reads an unmapped page instead of stale heap.
RACE = textwrap.dedent(
    """
    import faulthandler, sys, threading, time
    faulthandler.enable()
    import numpy as np
    import tutti

    rng = np.random.default_rng(1)
    sites, bond = 4, 256
    cores = [
        rng.standard_normal((1 if k == 0 else bond, 2, 1 if k == sites - 1 else bond))
        for k in range(sites)
    ]
    expected = tutti.Train(cores).norm()
    outcomes = {"norm": 0, "closed": 0}
    for i in range(200):
        train = tutti.Train(cores)
        barrier = threading.Barrier(2)

        def use():
            barrier.wait()
            try:
                value = train.norm()
            except tutti.TuttiError as error:
                assert "closed" in error.message, error
                outcomes["closed"] += 1
            else:
                assert abs(value - expected) <= 1e-9 * expected, (value, expected)
                outcomes["norm"] += 1

        def close():
            barrier.wait()
            time.sleep((0.0, 0.0002, 0.001)[i % 3])
            train.close()

        threads = [threading.Thread(target=use), threading.Thread(target=close)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            train.norm()
        except tutti.TuttiError:
            pass
        else:
            raise AssertionError("a call after close() must raise")
    print(outcomes)
    """
)


def test_close_during_another_threads_call_never_crashes() -> None:
    child = subprocess.run(
        [sys.executable, "-c", RACE],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, f"rc {child.returncode}\n{child.stdout}\n{child.stderr}"


def test_every_call_after_close_raises_and_close_is_idempotent() -> None:
    train = tutti.Train([np.ones((1, 2, 1))] * 3)
    other = tutti.Train([np.ones((1, 2, 1))] * 3)
    assert train.distance(other) == pytest.approx(0.0, abs=1e-12)
    train.close()
    train.close()
    for call in (
        train.norm,
        lambda: train.distance(other),
        lambda: other.distance(train),
        lambda: train.shapes,
        train.cores,
        lambda: len(train),
        lambda: tutti.src([train, other], chi=2),
    ):
        with pytest.raises(tutti.TuttiError) as caught:
            call()
        assert "closed" in caught.value.message
    assert repr(train) == "Train(closed)"
    assert other.norm() == pytest.approx(8.0**0.5)
    other.close()
