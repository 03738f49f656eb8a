"""Tensor trains and SRC through the ctypes bindings, against dense numpy products."""

from __future__ import annotations

import numpy as np
import pytest

import tutti


def random_cores(rng, n, bond, phys, complex_=False):
    """Cores of a random train: phys is (d,) for an MPS, (d_out, d_in) for an MPO."""
    cores = []
    for k in range(n):
        shape = (1 if k == 0 else bond, *phys, 1 if k == n - 1 else bond)
        core = rng.standard_normal(shape)
        if complex_:
            core = core + 1j * rng.standard_normal(shape)
        cores.append(core)
    return cores


def dense_mps(cores):
    """The dense vector of an MPS (site 0 the most significant index)."""
    vector = np.ones((1, 1))
    for core in cores:
        vector = np.einsum("pa,asb->psb", vector, core).reshape(-1, core.shape[-1])
    return vector[:, 0]


def dense_mpo(cores):
    """The dense matrix of an MPO (rows: outputs, columns: inputs)."""
    matrix = np.ones((1, 1, 1))
    for core in cores:
        o, i = core.shape[1], core.shape[2]
        matrix = np.einsum("pqa,aoib->poqib", matrix, core)
        p, q = matrix.shape[0], matrix.shape[2]
        matrix = matrix.reshape(p * o, q * i, core.shape[-1])
    return matrix[:, :, 0]


def cpu(devices: int, **caps) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices, **caps)


@pytest.mark.parametrize("complex_", [False, True])
def test_src_reproduces_the_dense_product_on_1_to_4_devices(complex_):
    rng = np.random.default_rng(5)
    h_cores = random_cores(rng, 5, 3, (2, 2), complex_)
    g_cores = random_cores(rng, 5, 2, (2, 2), complex_)
    psi_cores = random_cores(rng, 5, 2, (2,), complex_)
    expected = dense_mpo(h_cores) @ dense_mpo(g_cores) @ dense_mps(psi_cores)
    with tutti.Train(h_cores) as h, tutti.Train(g_cores) as g, tutti.Train(psi_cores) as psi:
        assert h.kind == tutti.TrainKind.MPO and psi.kind == tutti.TrainKind.MPS
        assert psi.dtype == (tutti.Dtype.COMPLEX128 if complex_ else tutti.Dtype.FLOAT64)
        assert [c.shape for c in psi.cores()] == [c.shape for c in psi_cores]
        for a, b in zip(psi.cores(), psi_cores):
            np.testing.assert_array_equal(a, b)
        results = []
        for devices in (1, 2, 3, 4):
            # Exact bonds of H G psi are at most 3 * 2 * 2 = 12 < 16.
            result = tutti.src([h, g, psi], 16, seed=3, resources=cpu(devices))
            got = dense_mps(result.cores())
            assert np.linalg.norm(got - expected) <= 1e-12 * np.linalg.norm(expected)
            assert max(result.bonds) <= 16
            assert abs(result.norm() - np.linalg.norm(expected)) <= 1e-12 * result.norm()
            results.append(result)
        for other in results[1:]:
            assert results[0].distance(other) <= 1e-12 * results[0].norm()
        # The same count twice: the same bits.
        again = tutti.src([h, g, psi], 16, seed=3, resources=cpu(3))
        for a, b in zip(again.cores(), results[2].cores()):
            np.testing.assert_array_equal(a, b)
        again.close()
        for result in results:
            result.close()


def test_truncation_and_mpo_times_mpo():
    rng = np.random.default_rng(1)
    a = random_cores(rng, 4, 2, (2, 2))
    b = random_cores(rng, 4, 2, (2, 2))
    product = tutti.src([a, b], 16)  # lists of numpy cores are converted on the fly
    assert product.kind == tutti.TrainKind.MPO
    np.testing.assert_allclose(
        dense_mpo(product.cores()), dense_mpo(a) @ dense_mpo(b), rtol=0, atol=1e-12
    )
    small = tutti.src([a, b], 2, oversample=4, seed=1)
    assert max(small.bonds) <= 2


def test_directory_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    cores = random_cores(rng, 4, 3, (2,), complex_=True)
    with tutti.Train(cores) as train:
        train.write_dir(tmp_path / "psi")
    opened = tutti.Train.from_dir(tmp_path / "psi")
    assert opened.shapes == [c.shape for c in cores]
    for a, b in zip(opened.cores(), cores):
        np.testing.assert_array_equal(a, b)
    opened.close()
    opened.close()  # idempotent
    with pytest.raises(tutti.TuttiError):
        opened.norm()


def test_bad_input_raises_with_the_status_and_the_site():
    cores = [np.ones((1, 2, 2)), np.ones((3, 2, 1))]
    with pytest.raises(tutti.TuttiError) as error:
        tutti.Train(cores)
    assert error.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "bond mismatch at site 1" in error.value.message
    with pytest.raises(tutti.TuttiError) as error:
        tutti.Train([np.array([[[np.nan], [1.0]]])])
    assert "not finite" in error.value.message
    psi = tutti.Train([np.ones((1, 2, 1))] * 3)
    h = tutti.Train([np.ones((1, 2, 2, 1))] * 3)
    with pytest.raises(tutti.TuttiError) as error:
        tutti.src([h, psi, h], 4)
    assert error.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    with pytest.raises(tutti.TuttiError) as error:
        tutti.src([h, psi], 0)
    assert "chi_out" in error.value.message
    with pytest.raises(tutti.TuttiError) as error:
        tutti.Train.from_dir("/nonexistent/tutti/train")
    assert error.value.status == tutti.Status.ERROR_IO


def test_where_it_runs_errors_and_a_refused_cap():
    rng = np.random.default_rng(3)
    h = random_cores(rng, 6, 3, (2, 2))
    psi = random_cores(rng, 6, 8, (2,))
    # None is the library's default resources; repeated ordinals put two ranks on one device.
    default = tutti.src([h, psi], 6, seed=1, resources=None)
    twice = tutti.src([h, psi], 6, seed=1, resources=tutti.Resources(kind="cpu", ordinals=(0, 0)))
    assert default.distance(twice) <= 1e-12 * default.norm()
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.src([h, psi], 6, resources=tutti.Resources(kind="cpu", ordinals=(0, 100000)))
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "100000" in caught.value.message
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.src([h, psi], 6, resources=cpu(1, device_memory_mib=0.001))
    assert caught.value.status == tutti.Status.ERROR_OUT_OF_MEMORY
    assert "memory plan" in caught.value.message
    with pytest.raises(TypeError):
        tutti.src([h, psi], 6, resources=2)
    with pytest.raises(TypeError):
        tutti.src([h, psi], 6, devices=2)  # the old keyword is gone


def test_distributed_qr_agrees_with_the_default_and_reports_its_qrs():
    rng = np.random.default_rng(7)
    h = random_cores(rng, 8, 3, (2, 2))
    psi = random_cores(rng, 8, 4, (2,))
    # chi 6 truncates the exact bonds (up to 12): the same sketch, factored two ways.
    plain, plain_info = tutti.src([h, psi], 6, seed=3, resources=cpu(2), info=True)
    split, split_info = tutti.src(
        [h, psi], 6, seed=3, resources=cpu(2), distributed_qr=True, info=True
    )
    assert split.bonds == plain.bonds == [1, 2, 4, 6, 6, 6, 4, 2, 1]
    assert plain.distance(split) <= 1e-10 * plain.norm()
    assert abs(split.norm() - plain.norm()) <= 1e-10 * plain.norm()
    assert plain_info["qr"]["distributed"] == 0
    assert plain_info["qr"]["householder"] == 7
    assert split_info["qr"]["distributed"] > 0
    assert split_info["qr"]["distributed"] + split_info["qr"]["householder"] == 7
    assert 0 < split_info["qr"]["worst_orthogonality"] < 1e-12
    # Without `info` the train comes alone, with the same bits.
    alone = tutti.src([h, psi], 6, seed=3, resources=cpu(2), distributed_qr=True)
    assert isinstance(alone, tutti.Train)
    for a, b in zip(alone.cores(), split.cores()):
        np.testing.assert_array_equal(a, b)
    for train in (plain, split, alone):
        train.close()


def test_info_reports_the_sweep():
    rng = np.random.default_rng(8)
    h = random_cores(rng, 6, 3, (2, 2))
    psi = random_cores(rng, 6, 4, (2,))
    result, info = tutti.src([h, psi], 5, oversample=3, seed=1, resources=cpu(2), info=True)
    assert set(info) == {
        "sketch_width",
        "devices",
        "seconds",
        "exact_fallback",
        "truncated_weight",
        "norm",
        "qr",
        "environments",
    }
    assert info["sketch_width"] == 8
    assert info["devices"] == 2
    assert info["exact_fallback"] is False
    assert info["seconds"] > 0 and info["seconds"] >= info["qr"]["seconds"] >= 0
    assert info["truncated_weight"] > 0
    assert abs(info["norm"] - result.norm()) <= 1e-12 * result.norm()
    assert info["qr"] == {
        "distributed": 0,
        "shifted": 0,
        "householder": 5,
        "worst_orthogonality": 0.0,
        "seconds": info["qr"]["seconds"],
    }
    # No caps: every environment (sites 1 to 5) where the ranks compute, nothing spilled.
    assert info["environments"] == {"on_device": 5, "on_host": 0, "on_disk": 0, "spilled_bytes": 0}
    result.close()
    # A 2-site stack is contracted exactly.
    ends = [[h[0], h[-1]], [psi[0], psi[-1]]]
    short, short_info = tutti.src(ends, 4, resources=cpu(1), info=True)
    assert short_info["exact_fallback"] is True
    assert short_info["qr"]["householder"] == 0
    short.close()
