"""tutti.splu / SparseLU / spsolve on scipy.sparse matrices, against scipy's own splu, and
on complex matrices against scipy's spsolve.

scipy comes with quimb into CI's test virtualenv (xtask/src/python.rs); these tests skip
without it, except where TUTTI_EXPECT_INSTALLED=1, where a missing scipy fails them.

Tolerances: the matrices are well conditioned (cond ~1e2-1e3), so both solvers' solutions
agree with the exact one to about cond * eps ~ 1e-13; 1e-11 leaves margin while a misread
array (a transposed matrix, a lost duplicate) gives an O(1) error.

Complex: a damped time-harmonic convection-diffusion operator (2-norm cond 18 on 15 x 11);
both solvers are backward stable, so their solutions differ by about cond * eps ~ 4e-15
relative (measured 8e-16); 1e-12 leaves margin, while swapped real and imaginary parts or a
dropped imaginary part give O(1).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tutti

TOL = 1e-11
COMPLEX_TOL = 1e-12


@pytest.fixture(scope="module")
def sp():
    """scipy.sparse; its absence fails under TUTTI_EXPECT_INSTALLED=1, else skips."""
    if os.environ.get("TUTTI_EXPECT_INSTALLED") == "1":
        try:
            import scipy.sparse
            import scipy.sparse.linalg  # noqa: F401
        except ImportError as error:
            pytest.fail(f"TUTTI_EXPECT_INSTALLED=1 but scipy is not importable: {error}")
        return scipy.sparse
    pytest.importorskip("scipy.sparse.linalg")
    import scipy.sparse

    return scipy.sparse


def convection_diffusion(sp, nx: int, ny: int, c: float = 0.8):
    """The 5-point Laplacian of an nx x ny grid plus an upwind first difference along x:
    unsymmetric, so a transposed reading shows."""
    ex, ey = np.ones(nx), np.ones(ny)
    dx = sp.diags([-(1 + c) * ex[1:], (2 + c) * ex, -ex[1:]], [-1, 0, 1])
    dy = sp.diags([-ey[1:], 2 * ey, -ey[1:]], [-1, 0, 1])
    return (sp.kron(sp.eye(ny), dx) + sp.kron(dy, sp.eye(nx))).tocsr()


def cpu(devices: int) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices)


def test_csr_csc_and_coo_agree_with_scipy_on_any_device_count(sp) -> None:
    import scipy.sparse.linalg as spla

    a = convection_diffusion(sp, 17, 12)
    n = a.shape[0]
    rng = np.random.default_rng(7)
    b = rng.standard_normal((n, 3))
    reference = spla.splu(a.tocsc()).solve(b)
    first = None
    for devices in (1, 2, 4):
        for matrix in (a, a.tocsc(), a.tocoo()):
            lu = tutti.splu(matrix, resources=cpu(devices))
            x, info = lu.solve(b, info=True)
            assert x.shape == b.shape
            assert np.max(np.abs(x - reference)) < TOL * np.max(np.abs(reference))
            assert info["backward_error"] < 1e-15
            # One right-hand side at a time gives the same bits as all three together.
            assert np.array_equal(lu.solve(b[:, 1]), x[:, 1])
            if first is None:
                first = x
            else:
                assert np.array_equal(x, first), f"{devices} devices, {matrix.format}"
            facts = lu.info
            assert facts["unknowns"] == n and facts["devices"] == devices
            assert facts["factored"] and facts["perturbed_pivots"] == 0
            assert facts["factor_nnz"] >= a.nnz
            lu.close()


def test_refactor_reuses_the_analysis(sp) -> None:
    a = convection_diffusion(sp, 10, 9)
    x_exact = np.arange(1, a.shape[0] + 1, dtype=float)
    b = a @ x_exact
    with tutti.splu(a, resources=cpu(3), grid=(10, 9)) as lu:
        assert np.max(np.abs(lu.solve(b) - x_exact)) < TOL * a.shape[0]
        fronts = lu.info["fronts"]
        # A matrix with the same pattern (new values), then the raw data array.
        lu.refactor(a * 2.0)
        assert np.max(np.abs(lu.solve(b) - x_exact / 2)) < TOL * a.shape[0]
        lu.refactor(a.data * 4.0)
        assert np.max(np.abs(lu.solve(b) - x_exact / 4)) < TOL * a.shape[0]
        assert lu.info["fronts"] == fronts
        with pytest.raises(tutti.InvalidArgumentError, match="pattern or format"):
            lu.refactor(a.tocsc())
        bad = a.data.copy()
        bad[3] = np.nan
        with pytest.raises(tutti.InvalidArgumentError, match="NaN"):
            lu.refactor(bad)
        # No stale factors after a failed refactorization.
        assert not lu.info["factored"]
        with pytest.raises(tutti.InvalidArgumentError, match="no factorization"):
            lu.solve(b)
    with pytest.raises(tutti.InvalidArgumentError, match="closed"):
        lu.solve(b)


def test_duplicates_in_coo_input_are_summed(sp) -> None:
    # The 1-D Laplacian of 5 points with each diagonal entry given as 1.5 + 0.5.
    rows, cols, vals = [], [], []
    for i in range(5):
        rows += [i, i]
        cols += [i, i]
        vals += [1.5, 0.5]
        for j in (i - 1, i + 1):
            if 0 <= j < 5:
                rows.append(i)
                cols.append(j)
                vals.append(-1.0)
    coo = sp.coo_matrix((vals, (rows, cols)), shape=(5, 5))
    x = tutti.spsolve(coo, coo.toarray() @ np.arange(1.0, 6.0))
    assert np.max(np.abs(x - np.arange(1.0, 6.0))) < 1e-13


def test_bad_input_raises_its_error(sp) -> None:
    with pytest.raises(tutti.InvalidArgumentError, match="square"):
        tutti.splu(sp.random(3, 4, density=0.5, format="csr"))
    with pytest.raises(tutti.InvalidArgumentError, match="scipy.sparse"):
        tutti.splu(np.eye(3))
    with pytest.raises(tutti.SingularError, match="structurally singular"):
        tutti.splu(sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 0.0]])))
    singular = tutti.splu(sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(tutti.SingularError, match="numerically singular") as caught:
        singular.solve(np.array([1.0, 2.0]))
    assert caught.value.status == tutti.Status.ERROR_SINGULAR
    assert isinstance(caught.value, ArithmeticError)
    lu = tutti.splu(sp.eye(4, format="csr") * 2.0)
    with pytest.raises(tutti.InvalidArgumentError, match="shape"):
        lu.solve(np.ones(3))
    with pytest.raises(tutti.InvalidArgumentError, match="finite"):
        lu.solve(np.array([1.0, np.inf, 1.0, 1.0]))
    with pytest.raises(tutti.InvalidArgumentError, match="grid"):
        tutti.splu(sp.eye(4, format="csr"), grid=(3,))
    with pytest.raises(tutti.InvalidArgumentError, match="periodic"):
        tutti.splu(sp.eye(4, format="csr"), periodic=(True,))


def test_a_memory_cap_refuses_one_device_and_fits_four(sp) -> None:
    n = 12
    one_d = sp.diags([-np.ones(n - 1), 2 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1])
    eye = sp.eye(n)
    a = (
        sp.kron(sp.kron(eye, eye), one_d)
        + sp.kron(sp.kron(eye, one_d), eye)
        + sp.kron(sp.kron(one_d, eye), eye)
    ).tocsr()
    one = tutti.splu(a, resources=cpu(1)).info["device_bytes"]
    four = tutti.splu(a, resources=cpu(4)).info["device_bytes"]
    assert four < one
    cap_mib = (one + four) / 2 / 2**20
    with pytest.raises(tutti.OutOfMemoryError):
        tutti.splu(a, resources=tutti.Resources(kind="cpu", devices=1, device_memory_mib=cap_mib))
    lu = tutti.splu(a, resources=tutti.Resources(kind="cpu", devices=4, device_memory_mib=cap_mib))
    b = a @ np.ones(a.shape[0])
    assert np.max(np.abs(lu.solve(b) - 1.0)) < 1e-10


def time_harmonic(sp, nx: int, ny: int, omega: float = 0.7):
    """convection_diffusion + i omega I - 0.3 I: unsymmetric and complex, with a complex
    coupling to the upwind neighbour so the imaginary part is not only on the diagonal."""
    a = convection_diffusion(sp, nx, ny).astype(np.complex128)
    upwind = sp.diags([np.full(nx * ny - 1, 0.2j)], [-1])
    return (a + (1j * omega - 0.3) * sp.eye(nx * ny) + upwind).tocsr()


def relative_difference(x, reference) -> float:
    return float(np.max(np.abs(x - reference)) / np.max(np.abs(reference)))


def test_complex_matrices_agree_with_scipy_spsolve(sp) -> None:
    import scipy.sparse.linalg as spla

    a = time_harmonic(sp, 15, 11)
    n = a.shape[0]
    rng = np.random.default_rng(3)
    b = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    reference = spla.spsolve(a.tocsc(), b)
    first = None
    for devices in (1, 2):
        for matrix in (a, a.tocsc(), a.tocoo()):
            with tutti.splu(matrix, resources=cpu(devices)) as lu:
                assert lu.dtype == np.complex128
                x, info = lu.solve(b, info=True)
                assert x.dtype == np.complex128 and x.shape == b.shape
                difference = relative_difference(x, reference)
                assert difference <= COMPLEX_TOL, f"{difference:.2e}"
                assert info["backward_error"] < 1e-15
                assert lu.info["factored"] and lu.info["perturbed_pivots"] == 0
                if first is None:
                    first = x
                else:
                    assert np.array_equal(x, first), f"{devices} devices, {matrix.format}"
    # complex64 input is factored in complex128 (its values exactly as given).
    a64 = a.astype(np.complex64)
    x = tutti.splu(a64).solve(b)
    assert x.dtype == np.complex128
    reference64 = spla.spsolve(a64.astype(np.complex128).tocsc(), b)
    assert relative_difference(x, reference64) <= COMPLEX_TOL


def test_complex_factorizations_promote_real_input_and_keep_their_dtype(sp) -> None:
    import scipy.sparse.linalg as spla

    a = time_harmonic(sp, 9, 8)
    n = a.shape[0]
    b_real = np.linspace(-1.0, 2.0, n)
    with tutti.splu(a, resources=cpu(2)) as lu:
        # A real b is promoted: the bits of the same b given as complex.
        x = lu.solve(b_real)
        assert x.dtype == np.complex128
        assert np.array_equal(x, lu.solve(b_real.astype(np.complex128)))
        # New values keep the dtype: a complex matrix, then real data, promoted.
        lu.refactor(a * 2.0)
        assert relative_difference(lu.solve(b_real), x / 2) <= COMPLEX_TOL
        real_part = a.copy()
        real_part.data = real_part.data.real.copy()
        lu.refactor(real_part.data)
        assert lu.dtype == np.complex128
        reference = spla.spsolve(real_part.tocsc(), b_real)
        assert relative_difference(lu.solve(b_real), reference) <= COMPLEX_TOL
        bad = a.data.copy()
        bad[4] = complex(1.0, np.nan)
        with pytest.raises(tutti.InvalidArgumentError, match="NaN"):
            lu.refactor(bad)
        assert not lu.info["factored"]
    # A real matrix factored in complex128 on request, and spsolve's promotion (as scipy's).
    r = convection_diffusion(sp, 9, 8)
    b = b_real + 1j * b_real[::-1]
    reference = spla.spsolve(r.tocsc().astype(np.complex128), b)
    lu = tutti.splu(r, dtype=np.complex128)
    assert lu.dtype == np.complex128
    assert relative_difference(lu.solve(b), reference) <= COMPLEX_TOL
    x = tutti.spsolve(r, b)
    assert x.dtype == np.complex128
    assert relative_difference(x, reference) <= COMPLEX_TOL


def test_complex_misuse_raises_invalid_argument(sp) -> None:
    real = tutti.splu(sp.eye(4, format="csr") * 2.0)
    assert real.dtype == np.float64
    # A complex b for a real factorization: InvalidArgumentError, a ValueError.
    with pytest.raises(tutti.InvalidArgumentError, match="complex") as caught:
        real.solve(np.ones(4, dtype=np.complex128))
    assert isinstance(caught.value, ValueError)
    with pytest.raises(tutti.InvalidArgumentError, match="imaginary parts would be lost"):
        real.refactor(np.ones(4, dtype=np.complex128))
    with pytest.raises(tutti.InvalidArgumentError, match="imaginary parts would be lost"):
        tutti.splu(sp.eye(3, dtype=complex, format="csr"), dtype=np.float64)
    with pytest.raises(tutti.InvalidArgumentError, match="expected float64 or complex128"):
        tutti.splu(sp.eye(3, format="csr"), dtype=np.complex64)
    with pytest.raises(tutti.InvalidArgumentError, match="expected float64 or complex128"):
        tutti.splu(sp.eye(3, format="csr"), dtype="not a dtype")
    # The real factorization still solves after the refusals.
    assert np.array_equal(real.solve(np.ones(4)), np.full(4, 0.5))
