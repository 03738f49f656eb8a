"""quimb's MatrixProductState / MatrixProductOperator as tutti trains, and back.

quimb is optional: these tests skip without it, except where TUTTI_EXPECT_INSTALLED=1 (CI,
which installs a pinned quimb into the test virtualenv: xtask/src/python.rs), where a missing
quimb fails them.

Tolerance: with chi above every exact bond, tutti's SRC is the exact product up to rounding
(its own exactness tests: <= 3e-14 relative), and quimb's contraction of the same product is
exact up to rounding too; on these 6-site, d <= 4 chains both are ~1e-15. ``EXACT`` = 1e-10
keeps four orders of margin while a swapped or misread leg gives an O(1) difference (checked
below).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tutti

EXACT = 1e-10


@pytest.fixture(scope="module")
def qtn():
    """quimb.tensor; its absence fails under TUTTI_EXPECT_INSTALLED=1, else skips."""
    if os.environ.get("TUTTI_EXPECT_INSTALLED") == "1":
        try:
            import quimb.tensor
        except ImportError as error:
            pytest.fail(f"TUTTI_EXPECT_INSTALLED=1 but quimb is not importable: {error}")
        return quimb.tensor
    return pytest.importorskip("quimb.tensor")


def relative(got, expected) -> float:
    got, expected = np.asarray(got).ravel(), np.asarray(expected).ravel()
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


def dense_mps(cores):
    """The dense vector of tutti MPS cores (site 0 the most significant index, as quimb's)."""
    vector = np.ones((1, 1))
    for core in cores:
        vector = np.einsum("pa,asb->psb", vector, core).reshape(-1, core.shape[-1])
    return vector[:, 0]


def dense_mpo(cores):
    """The dense matrix of tutti MPO cores (rows: outputs, columns: inputs)."""
    matrix = np.ones((1, 1, 1))
    for core in cores:
        matrix = np.einsum("pqa,aoib->poqib", matrix, core)
        matrix = matrix.reshape(matrix.shape[0] * core.shape[1], -1, core.shape[-1])
    return matrix[:, :, 0]


def site_array(tn, site):
    """Site ``site``'s array as (left bond, physical legs, right bond), by quimb's own names:
    ``bond``, ``site_ind`` or ``upper_ind``/``lower_ind``; end bonds absent."""
    if hasattr(tn, "upper_ind"):
        legs = [tn.upper_ind(site), tn.lower_ind(site)]
    else:
        legs = [tn.site_ind(site)]
    left = [tn.bond(site - 1, site)] if site > 0 else []
    right = [tn.bond(site, site + 1)] if site < tn.L - 1 else []
    return tn[site].transpose(*left, *legs, *right).data


def scramble_layouts(tn):
    """Reverses every tensor's axes in memory: the same network under quimb's names, so a
    conversion that assumed quimb's default array layout would misread it."""
    for tensor in tn:
        tensor.transpose_(*reversed(tensor.inds))
    return tn


def random_mpo(qtn, rng, d_out, d_in, bond, complex_=False):
    """A quimb MPO with per-site output dims ``d_out`` (upper) and input dims ``d_in``
    (lower), from arrays in quimb's default 'lrud' layout, end bonds absent."""
    length = len(d_out)
    arrays = []
    for site in range(length):
        shape = (
            *((bond,) if site > 0 else ()),
            *((bond,) if site < length - 1 else ()),
            d_out[site],
            d_in[site],
        )
        array = rng.standard_normal(shape)
        if complex_:
            array = array + 1j * rng.standard_normal(shape)
        arrays.append(array / np.sqrt(array.size))
    return qtn.MatrixProductOperator(arrays)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("phys_dim", [2, (2, 3, 4)])
def test_mpo_times_mps_is_quimbs_apply(qtn, dtype, phys_dim):
    # phys_dim as a sequence is cycled over the sites: d = 2, 3, 4, 2, 3, 4.
    mpo = qtn.MPO_rand(6, 3, phys_dim=phys_dim, dtype=dtype, seed=1)
    mps = qtn.MPS_rand_state(6, 4, phys_dim=phys_dim, dtype=dtype, seed=2)
    expected = mpo.apply(mps).to_dense()
    assert relative(mpo.to_dense() @ mps.to_dense(), expected) <= EXACT
    # Exact bonds are at most 3 * 4 = 12 < 64.
    result = tutti.src([mpo, mps], 64)
    assert result.kind == tutti.TrainKind.MPS
    want = tutti.Dtype.COMPLEX128 if dtype == "complex128" else tutti.Dtype.FLOAT64
    assert result.dtype == want
    assert relative(dense_mps(result.cores()), expected) <= EXACT
    assert relative(result.to_quimb().to_dense(), expected) <= EXACT


@pytest.mark.parametrize("complex_", [False, True])
def test_rectangular_mpo_with_different_dims_per_site(qtn, complex_):
    rng = np.random.default_rng(7)
    d_out, d_in = (2, 3, 1, 4, 2, 3), (3, 2, 4, 2, 1, 2)
    mpo = scramble_layouts(random_mpo(qtn, rng, d_out, d_in, 3, complex_))
    mps = scramble_layouts(
        qtn.MPS_rand_state(
            6, 4, phys_dim=d_in, dtype="complex128" if complex_ else "float64", seed=8
        )
    )
    # Every site's (d_out, d_in) differs, so any other reading of the legs has wrong shapes.
    assert [tuple(shape[1:3]) for shape in tutti.Train(mpo).shapes] == list(zip(d_out, d_in))
    assert [shape[1] for shape in tutti.Train(mps).shapes] == list(d_in)
    expected = mpo.apply(mps).to_dense()
    result = tutti.src([mpo, mps], 64)
    assert [shape[1] for shape in result.shapes] == list(d_out)
    assert relative(dense_mps(result.cores()), expected) <= EXACT
    # Output and input swapped: tutti refuses the stack (d_in of the MPO != d of the MPS).
    swapped = [core.transpose(0, 2, 1, 3) for core in tutti.Train(mpo).cores()]
    with pytest.raises(tutti.InvalidArgumentError):
        tutti.src([swapped, mps], 64)

    # An MPO times an MPO: quimb's A.apply(B) is A B, lower legs of A on upper legs of B.
    other = scramble_layouts(random_mpo(qtn, rng, d_in, (2, 2, 3, 1, 2, 2), 2, complex_))
    product = tutti.src([mpo, other], 64)
    assert product.kind == tutti.TrainKind.MPO
    expected = mpo.apply(other).to_dense()
    assert relative(mpo.to_dense() @ other.to_dense(), expected) <= EXACT
    assert relative(dense_mpo(product.cores()), expected) <= EXACT
    assert relative(product.to_quimb().to_dense(), expected) <= EXACT


def test_a_swapped_convention_would_fail(qtn):
    # A square random MPO is not symmetric: reading upper as input gives its transpose, far
    # from quimb's apply, so the exact comparisons above do pin the convention down.
    mpo = qtn.MPO_rand(6, 3, seed=3)
    mps = qtn.MPS_rand_state(6, 4, seed=4)
    expected = mpo.apply(mps).to_dense()
    swapped = [core.transpose(0, 2, 1, 3) for core in tutti.Train(mpo).cores()]
    assert relative(dense_mps(tutti.src([swapped, mps], 64).cores()), expected) > 0.1
    assert relative(dense_mps(tutti.src([mpo, mps], 64).cores()), expected) <= EXACT


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_compressed_product_against_quimbs_contract_then_truncate(qtn, dtype):
    mpo = qtn.MPO_rand(8, 3, dtype=dtype, seed=1)
    mps = qtn.MPS_rand_state(8, 4, dtype=dtype, seed=2)
    exact = mpo.apply(mps).to_dense()
    for chi in (4, 6):
        # quimb: the exact product, right-canonized, then SVD-truncated left to right
        # (form="left"), no cutoff.
        truncated = mpo.apply(mps, compress=True, max_bond=chi, cutoff=0.0, form="left")
        quimb_error = relative(truncated.to_dense(), exact)
        # tutti: a sketch as wide as the exact bonds (12 <= chi + 16) is the exact product,
        # right-canonical; its final SVD sweep truncates left to right too: the same train.
        result = tutti.src([mpo, mps], chi, oversample=16, seed=1)
        assert max(result.bonds) <= chi
        assert relative(dense_mps(result.cores()), truncated.to_dense()) <= EXACT
        # Plain SRC (sketch width chi) is near it: measured 1.6-2.7x its error here (seed 1).
        sketched = tutti.src([mpo, mps], chi, seed=1)
        assert max(sketched.bonds) <= chi
        assert quimb_error < relative(dense_mps(sketched.cores()), exact) <= 4 * quimb_error


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_round_trips_are_exact(qtn, dtype):
    rng = np.random.default_rng(11)
    complex_ = dtype == "complex128"
    networks = [
        qtn.MPS_rand_state(5, 3, phys_dim=(2, 3), dtype=dtype, seed=5),
        random_mpo(qtn, rng, (2, 3, 1, 4, 2), (3, 2, 4, 2, 1), 3, complex_),
    ]
    for network in networks:
        original = network.copy()
        scramble_layouts(network)
        train = tutti.Train(network)
        assert train.dtype == (tutti.Dtype.COMPLEX128 if complex_ else tutti.Dtype.FLOAT64)
        # quimb -> tutti: each core is the site's array by name, with size-1 end bonds.
        for site, core in enumerate(train.cores()):
            by_name = site_array(original, site)
            expected_shape = (1,) * (site == 0) + by_name.shape + (1,) * (site == network.L - 1)
            np.testing.assert_array_equal(core, by_name.reshape(expected_shape))
        # tutti -> quimb: the same arrays under quimb's default names.
        back = train.to_quimb()
        assert type(back) is type(original)
        if isinstance(back, qtn.MatrixProductOperator):
            assert (back.upper_ind_id, back.lower_ind_id) == ("k{}", "b{}")
        else:
            assert back.site_ind_id == "k{}"
        assert [back.site_tag(site) for site in range(back.L)] == [
            f"I{site}" for site in range(back.L)
        ]
        for site in range(back.L):
            assert site_array(back, site).dtype == np.dtype(dtype)
            np.testing.assert_array_equal(site_array(back, site), site_array(original, site))
        # tutti -> quimb -> tutti.
        for a, b in zip(tutti.Train(back).cores(), train.cores()):
            np.testing.assert_array_equal(a, b)


def test_single_precision_is_widened(qtn):
    mps = qtn.MPS_rand_state(4, 2, dtype="float32", seed=1)
    assert tutti.Train(mps).dtype == tutti.Dtype.FLOAT64
    mpo = qtn.MPO_rand(4, 2, dtype="complex64", seed=1)
    assert tutti.Train(mpo).dtype == tutti.Dtype.COMPLEX128
    assert site_array(tutti.Train(mpo).to_quimb(), 1).dtype == np.complex128


def test_networks_that_are_not_open_chains_are_refused(qtn):
    def refused(network, words):
        for attempt in (lambda: tutti.Train(network), lambda: tutti.src([network], 4)):
            with pytest.raises(tutti.InvalidArgumentError) as caught:
                attempt()
            assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
            assert words in caught.value.message, caught.value.message

    refused(qtn.MPS_rand_state(4, 2, cyclic=True), "cyclic")
    refused(qtn.MPO_rand(4, 2, cyclic=True), "cyclic")
    # Not marked cyclic, but closed by a bond between the ends.
    closed = qtn.MPS_rand_state(4, 2)
    qtn.new_bond(closed[0], closed[3])
    refused(closed, "neither a physical leg nor the bond")
    doubled = qtn.MPS_rand_state(4, 2)
    qtn.new_bond(doubled[1], doubled[2])
    refused(doubled, "and 2 to site 2")
    # Applied without contracting: two tensors per site.
    lazy = qtn.MPO_rand(4, 2).apply(qtn.MPS_rand_state(4, 2), contract=False)
    refused(lazy, "has 2 tensors")
    refused(qtn.MPO_identity(6, sites=[1, 2]), "has 0 tensors")
    refused(qtn.PEPS.rand(2, 2, 2, seed=1), "not a train")


def test_quimb_is_never_imported_by_tutti(monkeypatch):
    # In a fresh interpreter: making and using trains does not load quimb.
    code = (
        "import sys, numpy as np, tutti\n"
        "train = tutti.Train([np.ones((1, 2, 1))] * 3)\n"
        "assert train.norm() > 0\n"
        "assert 'quimb' not in sys.modules, 'tutti imported quimb'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    # Without quimb, to_quimb says what it needs.
    monkeypatch.setitem(sys.modules, "quimb.tensor", None)
    monkeypatch.setitem(sys.modules, "quimb", None)
    with tutti.Train([np.ones((1, 2, 1))] * 3) as train:
        with pytest.raises(ModuleNotFoundError, match="pip install quimb"):
            train.to_quimb()
