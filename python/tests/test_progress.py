"""progress= on every workload: what the callable receives, and an exception it raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_adjoint import WATER
from test_fit import TRUE, exponential
from test_sweep import random_cores

import tutti


def cpu(devices: int) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices)


def bodies(n: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)), 0.5 + rng.random(n)


def test_fmm_reports_its_five_phases_in_order_and_the_same_fields() -> None:
    x, m = bodies(600)
    seen: list[tutti.Progress] = []
    potential, accel = tutti.fmm(x, m, resources=cpu(2), progress=seen.append)
    assert [(p.task, p.stage, p.done, p.total, p.value) for p in seen] == [
        ("fmm", stage, done, 5, None)
        for done, stage in enumerate(["tree", "upward", "far field", "near field", "gather"], 1)
    ]
    # Reporting changes nothing: the same bits as without a callable.
    quiet_potential, quiet_accel = tutti.fmm(x, m, resources=cpu(2))
    assert np.array_equal(potential, quiet_potential) and np.array_equal(accel, quiet_accel)


def test_rhf_reports_each_scf_iteration_with_its_energy() -> None:
    seen: list[tutti.Progress] = []
    result = tutti.rhf_energy(WATER, "sto-3g", resources=cpu(2), progress=seen.append)
    assert len(seen) == result.iterations
    assert [p.done for p in seen] == list(range(1, result.iterations + 1))
    assert {(p.task, p.stage, p.total) for p in seen} == {("scf", "iteration", 128)}
    # The last iteration's energy is the result's, to the SCF's energy tolerance (1e-10 Eh).
    assert seen[-1].value == pytest.approx(result.energy, abs=1e-10)


def test_the_gradient_reports_its_scf() -> None:
    seen: list[tutti.Progress] = []
    result = tutti.rhf_gradient(WATER, "sto-3g", resources=cpu(1), progress=seen.append)
    assert len(seen) == result.iterations >= 2
    assert seen[-1].value == pytest.approx(result.energy, abs=1e-10)


def test_fit_reports_each_iteration_with_a_cost_that_never_rises() -> None:
    seen: list[tutti.Progress] = []
    result = tutti.fit(exponential, [5, 5, 5], [1.0, 0.0], resources=cpu(2), progress=seen.append)
    assert result.parameters == pytest.approx(TRUE, abs=1e-10)
    assert [p.done for p in seen] == list(range(1, result.iterations + 1))
    assert {(p.task, p.stage) for p in seen} == {("fit", "iteration")}
    costs = [p.value for p in seen]
    # Levenberg-Marquardt keeps a step only when it lowers the cost.
    assert all(later <= earlier for earlier, later in zip(costs, costs[1:]))
    assert costs[-1] == pytest.approx(result.cost, abs=1e-20)


def test_src_reports_each_site_of_both_passes_and_the_kernels_choice_keeps_the_bits() -> None:
    rng = np.random.default_rng(3)
    h = random_cores(rng, 6, 3, (2, 2))
    psi = random_cores(rng, 6, 2, (2,))
    seen: list[tutti.Progress] = []
    with tutti.src([h, psi], 4, resources=cpu(2), progress=seen.append) as out:
        cores = out.cores()
    sketch = [(p.done, p.total) for p in seen if p.stage == "sketch (left to right)"]
    orthogonalize = [(p.done, p.total) for p in seen if p.stage == "orthogonalize (right to left)"]
    assert {p.task for p in seen} == {"sweep"}
    assert len(sketch) + len(orthogonalize) == len(seen)
    # The sketch pass visits sites 0..n-2, the orthogonalization pass n-1 down to 0.
    assert sketch == [(k, 5) for k in range(1, 6)]
    assert orthogonalize == [(k, 6) for k in range(1, 7)]
    for kernels in ("always", tutti.Kernels.NEVER):
        with tutti.src([h, psi], 4, resources=cpu(2), kernels=kernels) as again:
            assert all(np.array_equal(a, b) for a, b in zip(again.cores(), cores)), kernels


def test_an_exception_in_the_callable_is_raised_as_itself_after_the_call() -> None:
    calls = []

    def stop(report: tutti.Progress) -> None:
        calls.append(report.stage)
        raise KeyError("enough")

    x, m = bodies(200)
    with pytest.raises(KeyError, match="enough"):
        tutti.fmm(x, m, progress=stop)
    assert calls == ["tree"]  # later reports are dropped
    with pytest.raises(KeyError):
        tutti.rhf_energy(WATER, "sto-3g", progress=stop)
    with pytest.raises(KeyError):
        tutti.fit(exponential, [5], [1.0, 0.0], progress=stop)
    # The library is usable afterwards.
    result = tutti.fit(exponential, [5], [1.0, 0.0])
    assert math.isclose(result.parameters[0], TRUE[0], abs_tol=1e-10)


def test_a_progress_that_is_not_callable_is_invalid() -> None:
    x, m = bodies(10)
    with pytest.raises(tutti.InvalidArgumentError, match="progress"):
        tutti.fmm(x, m, progress=3)
