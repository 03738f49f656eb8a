"""tutti.fmm against a direct sum written in numpy, and its error paths."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import header_struct_fields

import tutti


def numpy_direct(positions: np.ndarray, masses: np.ndarray, softening: float = 0.0):
    """phi_i = -sum_{j != i} m_j / s_ij, a_i = -sum_{j != i} m_j (x_i - x_j) / s_ij^3, with
    s_ij = sqrt(r_ij^2 + softening^2)."""
    d = positions[:, None, :] - positions[None, :, :]
    s2 = np.einsum("ijk,ijk->ij", d, d) + softening**2
    np.fill_diagonal(s2, np.inf)
    inv = 1.0 / np.sqrt(s2)
    potential = -inv @ masses
    accel = -np.einsum("ij,ijk->ik", masses[None, :] * inv**3, d)
    return potential, accel


def relative_l2(approx: np.ndarray, exact: np.ndarray) -> float:
    return float(np.linalg.norm(approx - exact) / np.linalg.norm(exact))


@pytest.fixture(scope="module")
def bodies():
    rng = np.random.default_rng(4)
    positions = rng.normal(size=(1500, 3)) * [1.0, 1.0, 0.3]
    masses = rng.uniform(0.5, 1.5, size=1500)
    return positions, masses


def test_fmm_matches_a_numpy_direct_sum(bodies) -> None:
    positions, masses = bodies
    exact_potential, exact_accel = numpy_direct(positions, masses)
    potential, accel = tutti.fmm(positions, masses)
    assert potential.shape == (1500,) and accel.shape == (1500, 3)
    assert relative_l2(accel, exact_accel) < 1e-4
    assert relative_l2(potential, exact_potential) < 1e-4
    # Higher order, smaller theta: more accurate.
    _, sharp = tutti.fmm(positions, masses, order=10, theta=0.4)
    assert relative_l2(sharp, exact_accel) < 0.2 * relative_l2(accel, exact_accel)


def test_devices_give_the_same_bits(bodies) -> None:
    positions, masses = bodies
    one = tutti.fmm(positions, masses, leaf_size=16)
    for devices in (2, 3, 4):
        many = tutti.fmm(
            positions, masses, leaf_size=16, resources=tutti.Resources(kind="cpu", devices=devices)
        )
        assert np.array_equal(one[0], many[0]) and np.array_equal(one[1], many[1]), devices
    # Two ranks on one device (the same ordinal twice) take the multi-device path too.
    twice = tutti.fmm(
        positions, masses, leaf_size=16, resources=tutti.Resources(kind="cpu", ordinals=[0, 0])
    )
    assert np.array_equal(one[1], twice[1])


def test_device_requests_that_cannot_be_met_raise(bodies) -> None:
    positions, masses = bodies
    too_many = tutti.Resources(kind="cpu", devices=100_000)
    with pytest.raises(tutti.TuttiError, match="options->resources: 100000 cpu device"):
        tutti.fmm(positions, masses, resources=too_many)
    with pytest.raises(tutti.TuttiError, match="options->resources: .*ordinal 300"):
        tutti.fmm(positions, masses, resources=tutti.Resources(kind="cpu", ordinals=[300]))
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.fmm(positions, masses, resources=tutti.Resources(kind="gpu", devices=1))
    assert caught.value.status in (tutti.Status.ERROR_UNSUPPORTED, tutti.Status.ERROR_DEVICE)
    tiny = tutti.Resources(kind="cpu", devices=2, device_memory_mib=1 / 64)
    with pytest.raises(tutti.TuttiError, match="multipoles") as caught:
        tutti.fmm(positions, masses, leaf_size=4, resources=tiny)
    assert caught.value.status == tutti.Status.ERROR_OUT_OF_MEMORY
    with pytest.raises(TypeError, match="tutti.Resources"):
        tutti.fmm(positions, masses, resources=2)


def test_softening_and_the_direct_sum_entry(bodies) -> None:
    positions, masses = bodies
    positions = positions[:300].tolist()  # plain lists work too
    masses = masses[:300]
    exact_potential, exact_accel = numpy_direct(np.array(positions), masses, softening=0.05)
    potential, accel = tutti.direct_sum(positions, masses, softening=0.05)
    assert relative_l2(accel, exact_accel) < 1e-13
    assert relative_l2(potential, exact_potential) < 1e-13
    potential, accel = tutti.fmm(positions, masses, softening=0.05, f32_far_field=True)
    assert relative_l2(accel, exact_accel) < 1e-4


def test_zero_bodies_work() -> None:
    potential, accel = tutti.fmm(np.zeros((0, 3)), np.zeros(0))
    assert potential.shape == (0,) and accel.shape == (0, 3)


def test_bad_input_raises_naming_the_argument(bodies) -> None:
    positions, masses = bodies
    bad = positions.copy()
    bad[11, 0] = np.nan
    with pytest.raises(tutti.TuttiError) as error:
        tutti.fmm(bad, masses)
    assert error.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "`positions` of body 11" in error.value.message
    with pytest.raises(tutti.TuttiError, match="softening"):
        tutti.fmm(positions, masses, softening=-1.0)
    with pytest.raises(tutti.TuttiError, match="theta"):
        tutti.fmm(positions, masses, theta=1.5)
    with pytest.raises(tutti.TuttiError, match=r"shape \(N, 3\)"):
        tutti.fmm(positions[:, :2], masses)
    with pytest.raises(tutti.TuttiError, match="`masses` must have shape"):
        tutti.fmm(positions, masses[:-1])
    twins = positions.copy()
    twins[8] = twins[2]
    with pytest.raises(tutti.TuttiError, match="bodies 2 and 8"):
        tutti.fmm(twins, masses)


def test_python_fmm_options_layout_matches_the_header(header: str) -> None:
    fields = [name for name, _ in tutti._CFmmOptions._fields_]
    assert header_struct_fields(header, "TuttiFmmOptions") == fields


def test_eps_picks_an_order_that_meets_it(bodies) -> None:
    # The flattened Gaussian cloud is not one of the table's cases: meeting eps here says the
    # measured table transfers to another distribution.
    positions, masses = bodies
    exact_potential, exact_accel = numpy_direct(positions, masses)
    for eps in (1e-3, 1e-5, 1e-6):
        order, measured = tutti.order_for_accuracy(eps)
        assert measured <= eps and 2 <= order <= 10
        potential, accel = tutti.fmm(positions, masses, eps=eps)
        assert relative_l2(accel, exact_accel) <= eps, eps
        assert relative_l2(potential, exact_potential) <= eps, eps
        same = tutti.fmm(positions, masses, order=order)
        assert np.array_equal(same[1], accel)
    assert tutti.order_for_accuracy(1e-5) == (8, 7.84e-6)
    with pytest.raises(tutti.InvalidArgumentError, match="eps"):
        tutti.order_for_accuracy(1e-8)
    with pytest.raises(tutti.InvalidArgumentError, match="not both"):
        tutti.fmm(positions, masses, eps=1e-4, order=5)


def test_the_kernels_host_twins_give_the_host_code_bits(bodies) -> None:
    # On simulated devices `always` runs M2L and P2P as the kernels' host twins, through the
    # device path; they compute the host code's operations in the same order.
    positions, masses = bodies
    cpu = tutti.Resources(kind="cpu", devices=2)
    host = tutti.fmm(positions, masses, resources=cpu, kernels="never")
    for kernels, fma in ((tutti.Kernels.ALWAYS, True), ("Always", False), (0, True)):
        twin = tutti.fmm(positions, masses, resources=cpu, kernels=kernels, fused_multiply_add=fma)
        assert np.array_equal(twin[0], host[0]) and np.array_equal(twin[1], host[1]), kernels
    with pytest.raises(tutti.InvalidArgumentError, match="kernels"):
        tutti.fmm(positions, masses, kernels="gpu")


def numpy_direct_at(positions, masses, targets, softening: float = 0.0):
    """Potential and acceleration at targets by numpy, leaving out sources at a target."""
    d = targets[:, None, :] - positions[None, :, :]
    r2 = np.einsum("tsk,tsk->ts", d, d)
    s2 = r2 + softening**2
    inv = np.where(r2 > 0, 1.0 / np.sqrt(np.where(s2 > 0, s2, 1.0)), 0.0)
    potential = -(inv * masses).sum(axis=1)
    accel = -np.einsum("ts,tsk->tk", masses * inv**3, d)
    return potential, accel


def test_fmm_at_separate_targets_matches_numpy(bodies) -> None:
    positions, masses = bodies
    rng = np.random.default_rng(11)
    lo, hi = positions.min(axis=0), positions.max(axis=0)
    inside_and_around = lo + (hi - lo) * (1.5 * rng.random((700, 3)) - 0.25)
    targets = np.vstack([inside_and_around, positions[:5], positions[:1]])
    exact_potential, exact_accel = numpy_direct_at(positions, masses, targets)
    potential, accel = tutti.fmm(positions, masses, targets=targets, eps=1e-6)
    assert potential.shape == (706,) and accel.shape == (706, 3)
    # eps picks the order from errors measured at the bodies; at these targets (a third of
    # them outside the cloud, where cells open differently) the same order measured 1.4e-6
    # on accelerations: the bound is 3 eps, and 1e-5 would mean a wrong convention.
    assert relative_l2(accel, exact_accel) <= 3e-6
    assert relative_l2(potential, exact_potential) <= 3e-6
    assert np.array_equal(potential[-1], potential[-6]) and np.array_equal(accel[-1], accel[-6])
    # Targets that are all bodies: the bodies' own fields, bit for bit.
    own = tutti.fmm(positions, masses)
    at = tutti.fmm(positions, masses, targets=positions[::-1])
    assert np.array_equal(at[0], own[0][::-1]) and np.array_equal(at[1], own[1][::-1])
    empty = tutti.fmm(positions, masses, targets=np.empty((0, 3)))
    assert empty[0].shape == (0,) and empty[1].shape == (0, 3)
    with pytest.raises(tutti.InvalidArgumentError, match="targets"):
        tutti.fmm(positions, masses, targets=np.zeros((4, 2)))
    with pytest.raises(tutti.InvalidArgumentError, match="targets"):
        tutti.fmm(positions, masses, targets=[[0.0, np.nan, 0.0]])
