"""tutti.fit through a Python callback: exact recovery, device independence, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tutti

TRUE = (2.0, -0.5)


def exponential(experiment: int, p: list[float]):
    """y = a exp(b x) against exact data from (a, b) = (2, -0.5); five points per experiment."""
    xs = [experiment + 0.25 * i for i in range(5)]
    r = [p[0] * math.exp(p[1] * x) - TRUE[0] * math.exp(TRUE[1] * x) for x in xs]
    jac = [[math.exp(p[1] * x), p[0] * x * math.exp(p[1] * x)] for x in xs]
    return r, jac


def cpu(devices: int, **caps) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices, **caps)


def test_fit_recovers_exact_parameters_with_the_same_bits_on_1_to_4_devices() -> None:
    one = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], resources=cpu(1))
    assert one.converged
    assert one.parameters[0] == pytest.approx(2.0, abs=1e-10)
    assert one.parameters[1] == pytest.approx(-0.5, abs=1e-10)
    assert one.cost < 1e-20
    cov = one.covariance
    assert isinstance(one.parameters, np.ndarray) and one.parameters.shape == (2,)
    assert isinstance(cov, np.ndarray) and cov.shape == (2, 2)
    assert cov[0][0] > 0 and cov[1][1] > 0 and cov[0][1] == cov[1][0]
    for devices in (2, 3, 4):
        many = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], resources=cpu(devices))
        assert np.array_equal(many.parameters, one.parameters)  # the same bits
        assert np.array_equal(many.covariance, one.covariance)
    # None is the library's default resources.
    default = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], resources=None)
    assert default.parameters == pytest.approx(one.parameters, abs=1e-12)


def test_a_noisy_linear_fit_matches_the_normal_equations() -> None:
    xs = [i * 0.1 for i in range(20)]
    ys = [0.5 + 1.5 * x + 0.01 * ((i * 7) % 5 - 2) for i, x in enumerate(xs)]

    def line(_: int, p: list[float]):
        return [p[0] + p[1] * x - y for x, y in zip(xs, ys)], [[1.0, x] for x in xs]

    result = tutti.fit(line, [len(xs)], [0.0, 0.0])
    n = len(xs)
    sx, sy = sum(xs), sum(ys)
    sxx, sxy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    intercept = (sy - slope * sx) / n
    assert result.parameters[0] == pytest.approx(intercept, rel=1e-10)
    assert result.parameters[1] == pytest.approx(slope, rel=1e-10)


def test_an_exception_in_the_callback_is_raised_with_the_tutti_error() -> None:
    def broken(experiment: int, p: list[float]):
        raise RuntimeError(f"model failed for experiment {experiment}")

    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fit(broken, [3], [1.0])
    assert caught.value.status == tutti.Status.ERROR_CALLBACK
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "model failed" in str(caught.value.__cause__)


def test_bad_arguments_raise() -> None:
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fit(exponential, [], [1.0, 0.0])
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "n_experiments" in caught.value.message
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fit(exponential, [5], [1.0, 0.0], resources=tutti.Resources(kind="cpu", ordinals=(100000,)))
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "100000" in caught.value.message
    with pytest.raises(TypeError):
        tutti.fit(exponential, [5], [1.0, 0.0], resources=2)
    with pytest.raises(TypeError):
        tutti.fit(exponential, [5], [1.0, 0.0], devices=2)  # the old keyword is gone


def test_a_memory_cap_too_small_is_refused_before_the_callback_runs() -> None:
    calls = []

    def model(experiment: int, p: list[float]):
        calls.append(experiment)
        return exponential(experiment, p)

    # 20000 residuals x 2 parameters: one Jacobian block is 320 000 bytes, more than a
    # 0.1 MiB (104 858-byte) cap.
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fit(model, [20000], [1.0, 0.0], resources=cpu(1, device_memory_mib=0.1))
    assert caught.value.status == tutti.Status.ERROR_OUT_OF_MEMORY
    assert "jacobian blocks" in caught.value.message
    assert calls == []


def _failing_once(error: BaseException):
    """exponential, but the second call (a trial step the fit could go around) raises."""
    calls = []

    def model(experiment: int, p: list[float]):
        calls.append(experiment)
        if len(calls) == 2:
            raise error
        return exponential(experiment, p)

    return model, calls


def test_an_exception_fails_the_fit_even_when_it_would_converge() -> None:
    model, calls = _failing_once(ValueError("bad trial point"))
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fit(model, [5], [1.0, 0.0])
    assert caught.value.status == tutti.Status.ERROR_CALLBACK
    assert isinstance(caught.value.__cause__, ValueError)
    assert "bad trial point" in str(caught.value)
    assert len(calls) == 2, "the fit stops calling the model after the exception"


@pytest.mark.parametrize("counts, devices", [([5], 1), ([5, 5], 2)])
def test_a_keyboard_interrupt_in_the_callback_is_re_raised(counts, devices) -> None:
    # One experiment: the second call is a trial step; two: the second experiment's start.
    model, calls = _failing_once(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        tutti.fit(model, counts, [1.0, 0.0], resources=cpu(devices))
    assert len(calls) == 2


def reduced(a: float):
    """The model with a held at ``a``: b is the one parameter."""

    def model(experiment: int, p: list[float]):
        r, jac = exponential(experiment, [a, p[0]])
        return r, [[row[1]] for row in jac]

    return model


# Either fit may stop anywhere the cost is flat to its cost tolerance (1e-14 of the cost):
# within about sqrt(2e-14 cost / curvature) = 1.3e-8 of the minimum for b with a held at 1.5
# (cost 0.33, curvature 37), so a bounded fit and the reduced fit agree to 1e-7 relative.
REDUCED_REL = 1e-7


@pytest.mark.parametrize(
    "bounds, initial",
    [
        (([-np.inf, -np.inf], [1.5, np.inf]), [1.0, 0.0]),  # a <= 1.5
        ((-np.inf, 1.5), [1.0, 0.0]),  # scalars apply to every parameter; b stays below
        (([1.5, -np.inf], [1.5, np.inf]), [1.5, 0.0]),  # a fixed at 1.5
        ((np.array([0.0, -1.0]), (1.5, 0.0)), [1.0, -0.2]),  # a box, a on its upper side
    ],
)
def test_a_bound_that_excludes_the_truth_holds_the_solution_on_it(bounds, initial) -> None:
    reference = tutti.fit(reduced(1.5), [5, 5, 5, 5], [initial[1]], resources=cpu(1))
    assert reference.covariance_rank == 1
    bounded = tutti.fit(exponential, [5, 5, 5, 5], initial, bounds=bounds, resources=cpu(1))
    assert bounded.parameters[0] == 1.5  # exactly the bound
    assert bounded.parameters[1] == pytest.approx(reference.parameters[0], rel=REDUCED_REL)
    assert bounded.converged and bounded.termination != tutti.Termination.MAX_ITERATIONS
    assert bounded.cost > 0.3 and bounded.covariance_rank == 2
    assert np.all(np.isfinite(bounded.covariance))


def test_bounds_that_allow_everything_are_no_bounds() -> None:
    free = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], resources=cpu(1))
    for bounds in [(-np.inf, np.inf), ([-np.inf] * 2, [np.inf] * 2)]:
        same = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], bounds=bounds, resources=cpu(1))
        assert np.array_equal(same.parameters, free.parameters)
    # Bounds that hold the truth inside change the path, not the answer.
    boxed = tutti.fit(exponential, [5, 5, 5, 5], [1.0, 0.0], bounds=([0, -1], [5, 0]))
    assert boxed.parameters == pytest.approx(TRUE, abs=1e-10)


@pytest.mark.parametrize(
    "bounds, initial, needle",
    [
        (([0.0, 1.0], [5.0, -1.0]), [1.0, 0.0], "options->lower[1] is 1, above options->upper[1]"),
        (([np.nan, 0.0], np.inf), [1.0, 0.0], "options->lower[0] is NaN"),
        ((-np.inf, [0.5, np.inf]), [1.0, 0.0], "initial[0] is 1, outside its bounds"),
        ((np.inf, np.inf), [1.0, 0.0], "options->lower[0] is inf"),
    ],
)
def test_bad_bounds_raise_naming_the_entry(bounds, initial, needle) -> None:
    with pytest.raises(tutti.InvalidArgumentError) as caught:
        tutti.fit(exponential, [5], initial, bounds=bounds)
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert needle in caught.value.message


@pytest.mark.parametrize(
    "bounds", [([0.0], [5.0, 5.0]), (0.0, [[5.0, 5.0]]), (0.0,), "ab", (0.0, 1.0, 2.0)]
)
def test_bounds_of_the_wrong_shape_raise_value_error(bounds) -> None:
    with pytest.raises(ValueError, match="bounds"):
        tutti.fit(exponential, [5], [1.0, 0.0], bounds=bounds)


def test_a_rank_deficient_fit_keeps_its_parameters() -> None:
    # y = (p0 + p1) x against y = 3x at x = 1..5: only the sum is determined, and
    # J^T J = 55 [[1, 1], [1, 1]] has rank 1 with pseudo-inverse [[1, 1], [1, 1]] / 220.
    def sum_only(_: int, p: list[float]):
        xs = [1.0, 2.0, 3.0, 4.0, 5.0]
        return [(p[0] + p[1]) * x - 3 * x for x in xs], [[x, x] for x in xs]

    result = tutti.fit(sum_only, [5], [1.0, 0.0])
    assert np.all(np.isfinite(result.parameters))
    assert result.parameters.sum() == pytest.approx(3.0, abs=1e-10)
    assert result.covariance_rank == 1
    assert result.covariance == pytest.approx(np.full((2, 2), 1 / 220), rel=1e-12)
    assert result.converged


def test_the_termination_reason_is_reported() -> None:
    done = tutti.fit(exponential, [5, 5], [1.0, 0.0])
    assert done.converged and done.termination in (
        tutti.Termination.GRADIENT,
        tutti.Termination.STEP,
        tutti.Termination.COST,
    )
    assert done.covariance_rank == 2
    once = tutti.fit(exponential, [5, 5], [1.0, 0.0], max_iterations=1)
    assert once.termination is tutti.Termination.MAX_ITERATIONS and not once.converged
