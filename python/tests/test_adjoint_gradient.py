"""tutti.rhf_gradient: dE/d(exponent) and dE/d(coefficient) against PySCF finite differences,
thread and serial agreement, the JSON document, the C structs against the header, errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import header_struct_fields

import tutti

# References: /work/shared/reference/adjoint/{h2o,h2}_sto3g.json, PySCF 2.14.0 (conv_tol
# 1e-12) with its built-in sto-3g written below as an NWChem file (so that the parameters
# are PySCF's digits): "e_rhf", and "gradient.flat_richardson", central finite differences of
# the energy (exponent step 1e-4 relative, coefficient step 1e-5 absolute) with Richardson
# extrapolation, per atom and shell: the dE/dalpha_i then the dE/dc_i.
PYSCF_STO3G_NWCHEM = """BASIS "ao basis" SPHERICAL
H    S
      3.42525091             0.15432897
      0.62391373             0.53532814
      0.16885540             0.44463454
O    S
    130.70932                0.15432897
     23.808861               0.53532814
      6.4436083              0.44463454
O    SP
      5.0331513             -0.09996723             0.15591627
      1.1695961              0.39951283             0.60768372
      0.3803890              0.70011547             0.39195739
END
"""

# Water, r(OH) = 0.9572 A, angle(HOH) = 104.52 deg: the reference's bohr coordinates times
# 0.52917721092 (PySCF's bohr), in Angstrom.
WATER = """3
water
O 0.0 0.0 0.0
H 0.0 0.7569503272636612 0.585882276618295
H 0.0 -0.7569503272636612 0.585882276618295
"""
WATER_ENERGY = -74.96292824643292
WATER_FD = [
    # O 1s
    -0.00454578252269413, 0.009360970764342292, 0.016171199121206816,
    1.171628446764809, 0.25308802271695185, -0.7113737924650345,
    # O 2s
    -0.006927601369552419, -0.03787756122893911, 0.02833851474853007,
    -0.06869106930669962, -0.033246210999019844, 0.009163384599257066,
    # O 2p
    -0.09035962881441541, 0.0892641506233285, 1.1930220281643462,
    -1.771296897364512, 0.7778341914862114, -0.5013380977914039,
    # H 1s, atom 1
    0.0001222605181735594, -0.006504721318924833, -0.050006811009561676,
    0.01670402625109091, -0.005959731671130914, 0.0013775325176842062,
    # H 1s, atom 2
    0.00012226035567690613, -0.0065047212430016516, -0.050006811009561676,
    0.016704025303700593, -0.005959733092216386, 0.0013775296755132631,
]  # fmt: skip

# H2, R = 1.4 bohr on z (z = -+0.7 bohr, in Angstrom).
H2 = "2\nH2\nH 0 0 -0.370424047644\nH 0 0 0.370424047644\n"
H2_ENERGY = -1.116714325062551
H2_FD = [
    0.0009702490320461712, 0.02753801233085289, 0.06245298329777559,
    0.0875149751777826, 0.004781982939257763, -0.03613310382011292,
    0.0009702490294531395, 0.02753801233619123, 0.062452983282433934,
    0.0875149751777826, 0.0047819829355570205, -0.03613310384601812,
]  # fmt: skip


def assert_matches_fd(got: np.ndarray, reference: list[float]) -> None:
    """Relative 1e-6, absolute 1e-8 where the gradient is tiny."""
    reference = np.asarray(reference)
    assert got.shape == reference.shape
    allowed = np.maximum(1e-6 * np.abs(reference), 1e-8)
    bad = np.flatnonzero(np.abs(got - reference) > allowed)
    assert bad.size == 0, [(int(k), got[k], reference[k]) for k in bad]


@pytest.fixture
def pyscf_sto3g(tmp_path) -> str:
    path = tmp_path / "pyscf-sto3g.nw"
    path.write_text(PYSCF_STO3G_NWCHEM)
    return str(path)


def cpu(devices: int, **caps) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices, **caps)


def test_water_sto3g_matches_pyscf_finite_differences(pyscf_sto3g: str) -> None:
    result = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(1))
    assert result.energy == pytest.approx(WATER_ENERGY, abs=1e-8)
    assert [(s.atom, s.l, len(s.exponents)) for s in result.shells] == [
        (0, 0, 3), (0, 0, 3), (0, 1, 3), (1, 0, 3), (2, 0, 3),
    ]  # fmt: skip
    assert result.shells[2].exponents.tolist() == [5.0331513, 1.1695961, 0.380389]
    assert result.shells[2].coefficients.tolist() == [0.15591627, 0.60768372, 0.39195739]
    assert_matches_fd(result.flat(), WATER_FD)
    # Renormalization: E does not change when one shell's coefficients are scaled.
    for shell in result.shells:
        assert abs(shell.coefficients @ shell.grad_coefficients) < 1e-8
    assert result.devices == 1 and result.iterations > 1
    assert set(result.timings) == {
        "scf", "overlap", "core_hamiltonian", "two_electron", "fock", "total",
    }  # fmt: skip
    assert result.timings["total"] >= result.timings["scf"] > 0.0


def test_the_json_mirrors_the_basis_and_sums_elements(pyscf_sto3g: str) -> None:
    result = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(2))
    summary = result.summary
    assert summary["devices"] == 2
    assert summary["energy"] == result.energy
    assert [atom["symbol"] for atom in summary["basis"]] == ["O", "H", "H"]
    json_flat = [
        value
        for atom in summary["basis"]
        for shell in atom["shells"]
        for value in shell["grad_exponents"] + shell["grad_coefficients"]
    ]
    assert json_flat == result.flat().tolist()
    hydrogen = next(e for e in summary["elements"] if e["symbol"] == "H")
    assert hydrogen["atoms"] == 2
    expected = result.shells[3].grad_exponents + result.shells[4].grad_exponents
    assert np.allclose(hydrogen["shells"][0]["grad_exponents"], expected, rtol=0, atol=1e-15)
    # The H exponents' sum against the sum of the FD references.
    assert_matches_fd(
        np.asarray(hydrogen["shells"][0]["grad_exponents"]),
        [WATER_FD[18 + i] + WATER_FD[24 + i] for i in range(3)],
    )


def test_devices_and_the_serial_path_agree(pyscf_sto3g: str) -> None:
    one = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(1))
    reference = one.flat()
    # The agreement across device counts: 1e-10 relative to max(|g|, 1e-2).
    scale = np.maximum(np.abs(reference), 1e-2)
    for devices in (2, 3, 4):
        other = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(devices))
        assert other.devices == devices
        assert abs((other.energy - one.energy) / one.energy) <= 1e-12
        assert np.max(np.abs(other.flat() - reference) / scale) <= 1e-10
        again = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(devices))
        assert again.flat().tolist() == other.flat().tolist()  # the same bits run to run
    # The serial loops from the same (1-device) SCF: their own rounding only.
    serial = tutti.rhf_gradient(WATER, pyscf_sto3g, resources=cpu(1), serial=True)
    assert serial.energy == one.energy
    assert np.max(np.abs(serial.flat() - reference) / np.maximum(np.abs(reference), 1.0)) <= 1e-12


def test_h2_sto3g_matches_pyscf_finite_differences(pyscf_sto3g: str, tmp_path) -> None:
    xyz = tmp_path / "h2.xyz"
    xyz.write_text(H2)
    result = tutti.rhf_gradient(xyz, pyscf_sto3g)
    assert result.energy == pytest.approx(H2_ENERGY, abs=1e-8)
    assert_matches_fd(result.flat(), H2_FD)


def test_errors_raise_with_status_and_message(pyscf_sto3g: str, tmp_path) -> None:
    cases = [
        (dict(molecule=WATER, basis="no-such-basis"), tutti.Status.ERROR_INVALID_ARGUMENT,
         "unknown basis set `no-such-basis`"),
        (dict(molecule="1\n\nH 0 0 0\n", basis="sto-3g"), tutti.Status.ERROR_INVALID_ARGUMENT,
         "even"),
        (dict(molecule="1\n\nXx 0 0 0\n", basis="sto-3g"), tutti.Status.ERROR_INVALID_ARGUMENT,
         "`Xx`"),
        (dict(molecule=WATER, basis=str(tmp_path / "missing" / "basis.nw")), tutti.Status.ERROR_IO,
         "basis.nw"),
        (dict(molecule=WATER, basis="sto-3g", max_iterations=2), tutti.Status.ERROR_NOT_CONVERGED,
         "did not converge in 2 iterations"),
        (dict(molecule=WATER, basis="sto-3g", resources=tutti.Resources(kind="cpu", ordinals=(100000,))),
         tutti.Status.ERROR_INVALID_ARGUMENT, "100000"),
        (dict(molecule=WATER, basis="sto-3g", resources=cpu(2, device_memory_mib=1 / 1024)),
         tutti.Status.ERROR_OUT_OF_MEMORY, "memory plan"),
    ]  # fmt: skip
    for kwargs, status, words in cases:
        with pytest.raises(tutti.TuttiError) as caught:
            tutti.rhf_gradient(**kwargs)
        assert caught.value.status == status, caught.value.message
        assert caught.value.message.startswith("tutti_rhf_gradient: ")
        assert words in caught.value.message


def test_gradient_structs_match_the_header(header: str) -> None:
    for name, struct in [
        ("TuttiGradientOptions", tutti._CGradientOptions),
        ("TuttiGradientShell", tutti._CGradientShell),
        ("TuttiGradientTimings", tutti._CGradientTimings),
        ("TuttiRhfGradient", tutti._CRhfGradient),
    ]:
        assert header_struct_fields(header, name) == [field for field, _ in struct._fields_]
