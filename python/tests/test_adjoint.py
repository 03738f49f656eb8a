"""tutti.rhf_energy: water against PySCF, thread agreement, the JSON summary, errors."""

from __future__ import annotations

import pytest
from conftest import header_struct_fields

import tutti

# Water, r(OH) = 0.9572 A, angle(HOH) = 104.52 deg: the bohr coordinates of the reference
# files in crates/tutti-adjoint/tests/data, times 0.52917721092 (PySCF's bohr), in Angstrom.
WATER = """3
water
O 0.0 0.0 0.0
H 0.0 0.7569503272636612 0.585882276618295
H 0.0 -0.7569503272636612 0.585882276618295
"""

# PySCF 2.14.0 RHF energies (conv_tol 1e-12) of that water:
# - h2o_sto3g.json "e_rhf", with PySCF's built-in sto-3g, written below as an NWChem file
#   (the shipped basis_set_exchange export differs in the last digits, 2.4e-8 Eh here);
# - h2o_def2tzvp.json "e_rhf", made from the shipped def2-tzvp file itself.
PYSCF_STO3G = -74.96292824643292
PYSCF_DEF2TZVP = -76.05904289524872

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


def cpu(devices: int, **caps) -> tutti.Resources:
    return tutti.Resources(kind="cpu", devices=devices, **caps)


def test_water_sto3g_matches_pyscf_and_devices_agree(tmp_path) -> None:
    basis = tmp_path / "pyscf-sto3g.nw"
    basis.write_text(PYSCF_STO3G_NWCHEM)
    one = tutti.rhf_energy(WATER, str(basis), resources=cpu(1))
    two = tutti.rhf_energy(WATER, str(basis), resources=cpu(2))
    assert one.energy == pytest.approx(PYSCF_STO3G, abs=1e-8)
    # Each Fock build is split among the devices: only the summation order differs.
    for devices in (2, 3, 4):
        many = tutti.rhf_energy(WATER, str(basis), resources=cpu(devices))
        assert abs((many.energy - one.energy) / one.energy) <= 1e-12
        again = tutti.rhf_energy(WATER, str(basis), resources=cpu(devices))
        assert again.energy == many.energy  # the same bits run to run
        assert many.summary["devices"] == devices
    assert (one.nao, one.electrons, one.converged) == (7, 10, True)
    assert one.electronic_energy + one.nuclear_repulsion == pytest.approx(one.energy, abs=1e-10)
    assert two.summary["energy"] == two.energy
    assert two.summary["nao"] == 7 and two.summary["devices"] == 2
    assert two.summary["iterations"] == two.iterations
    assert set(two.summary["timings"]) >= {"setup", "fock", "scf"}


def test_water_def2tzvp_from_a_file_matches_pyscf(tmp_path) -> None:
    xyz = tmp_path / "water.xyz"
    xyz.write_text(WATER)
    result = tutti.rhf_energy(xyz, "def2-tzvp")
    assert result.energy == pytest.approx(PYSCF_DEF2TZVP, abs=1e-8)
    assert result.nao == 43 and result.summary["basis"] == "def2-tzvp"
    assert tutti.rhf_energy(str(xyz), "def2-tzvp").energy == pytest.approx(result.energy, abs=1e-10)


def test_errors_raise_with_status_and_message(tmp_path) -> None:
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy(WATER, "no-such-basis")
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "unknown basis set `no-such-basis`" in caught.value.message
    assert "def2-tzvp" in caught.value.message

    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy("1\n\nXx 0 0 0\n", "sto-3g")
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "`Xx`" in caught.value.message

    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy(WATER, str(tmp_path / "missing" / "basis.nw"))
    assert caught.value.status == tutti.Status.ERROR_IO

    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy(WATER, "sto-3g", max_iterations=2)
    assert caught.value.status == tutti.Status.ERROR_NOT_CONVERGED
    assert "did not converge in 2 iterations" in caught.value.message

    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy(WATER, "sto-3g", resources=tutti.Resources(kind="cpu", ordinals=(100000,)))
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    assert "100000" in caught.value.message

    # 1 KiB per device cannot hold the run's matrices: refused before any work, with the plan.
    with pytest.raises(tutti.TuttiError) as caught:
        tutti.rhf_energy(WATER, "sto-3g", resources=cpu(2, device_memory_mib=1 / 1024))
    assert caught.value.status == tutti.Status.ERROR_OUT_OF_MEMORY
    assert "memory plan" in caught.value.message

    with pytest.raises(TypeError):
        tutti.rhf_energy(WATER, "sto-3g", threads=2)  # the old keyword is gone


def test_the_orbital_gradient_criterion_converges_as_soon_to_the_same_energy() -> None:
    # PySCF's criterion at its default (conv_tol_grad 1e-5 for conv_tol 1e-10), ours too.
    by_density = tutti.rhf_energy(WATER, "6-31g", resources=cpu(1), gradient_tolerance=None)
    by_gradient = tutti.rhf_energy(WATER, "6-31g", resources=cpu(1))
    assert by_gradient.converged
    assert by_gradient.iterations <= by_density.iterations
    assert abs(by_gradient.energy - by_density.energy) < 1e-9
    assert 0 < by_gradient.orbital_gradient < 1e-5
    assert by_gradient.summary["orbital_gradient"] == by_gradient.orbital_gradient
    assert by_density.orbital_gradient < by_gradient.orbital_gradient

    for bad in (-1e-5, float("nan"), float("inf"), 0.0):
        with pytest.raises(tutti.InvalidArgumentError) as caught:
            tutti.rhf_energy(WATER, "6-31g", resources=cpu(1), gradient_tolerance=bad)
        assert "gradient_tolerance" in caught.value.message

    # A run that stops early names the criterion it was using.
    with pytest.raises(tutti.NotConvergedError) as caught:
        tutti.rhf_energy(WATER, "sto-3g", max_iterations=2, gradient_tolerance=1e-5)
    assert "did not converge in 2 iterations" in caught.value.message
    assert "criterion: energy change and orbital gradient" in caught.value.message


def test_rhf_structs_match_the_header(header: str) -> None:
    assert header_struct_fields(header, "TuttiRhfOptions") == [
        name for name, _ in tutti._CRhfOptions._fields_
    ]
    assert header_struct_fields(header, "TuttiRhfResult") == [
        name for name, _ in tutti._CRhfResult._fields_
    ]


# The same water as PySCF writes it (`Mole.atom`), and in bohr as the reference files hold it.
WATER_PYSCF = "O 0 0 0; H 0 0.7569503272636612 0.585882276618295; H 0 -0.7569503272636612 0.585882276618295"
WATER_BOHR = [
    (8, (0.0, 0.0, 0.0)),
    (1, (0.0, 1.4304288084282137, 1.107157044045246)),
    (1, (0.0, -1.4304288084282137, 1.107157044045246)),
]


def test_pyscf_style_molecules_give_the_xyz_energy(tmp_path) -> None:
    basis = tmp_path / "pyscf-sto3g.nw"
    basis.write_text(PYSCF_STO3G_NWCHEM)
    reference = tutti.rhf_energy(WATER, str(basis)).energy
    as_list = [("O", (0, 0, 0)), ["H1", 0, 0.7569503272636612, 0.585882276618295],
               ("h", [0, -0.7569503272636612, 0.585882276618295])]
    forms = [
        (WATER_PYSCF, "angstrom"),
        (WATER_PYSCF.replace("; ", "\n"), "A"),
        (as_list, "Angstrom"),
        (WATER_BOHR, "bohr"),
        ("8 0 0 0; 1 0 1.4304288084282137 1.107157044045246; 1 0 -1.4304288084282137 1.107157044045246", "AU"),
    ]
    for molecule, unit in forms:
        energy = tutti.rhf_energy(molecule, str(basis), unit=unit).energy
        # The same coordinates to the last bit or one rounding (bohr given vs converted):
        # the SCF converges to 1e-10 Eh, and equal inputs give equal energies far below it.
        assert energy == pytest.approx(reference, abs=1e-10), (molecule, unit)
    assert reference == pytest.approx(PYSCF_STO3G, abs=1e-8)
    gradient = tutti.rhf_gradient(WATER_BOHR, str(basis), unit="bohr")
    assert gradient.energy == pytest.approx(reference, abs=1e-9)
    direct = tutti.rhf_gradient(WATER, str(basis))
    assert abs(gradient.flat() - direct.flat()).max() <= 1e-8


@pytest.mark.parametrize(
    "molecule, unit, match",
    [
        ("O 0 0 0; H 0 0 1; Xx 0 0 2", "angstrom", "unknown element"),
        ("O 0 0; H 0 0 1", "angstrom", "symbol x y z"),
        ([("O", (0, 0))], "angstrom", "three coordinates"),
        ([(0, (0, 0, 0))], "angstrom", "outside"),
        ("O 0 0 0", "furlong", "unit"),
        (WATER, "bohr", "Angstrom by its format"),
        ("", "angstrom", "no atoms"),
    ],
)
def test_bad_molecules_raise_invalid_argument(molecule, unit, match) -> None:
    with pytest.raises(tutti.InvalidArgumentError, match=match):
        tutti.rhf_energy(molecule, "sto-3g", unit=unit)


def test_matrices_satisfy_the_roothaan_equations_in_pyscfs_integrals(tmp_path, repo) -> None:
    """The orbitals and density against PySCF's own S, T, V and ERIs of the same water and
    basis (h2o_sto3g.json): orthonormal MOs, 10 electrons, the energy of the density, and
    F C = S C diag(e) with F built from the density here."""
    import json

    import numpy as np

    basis = tmp_path / "pyscf-sto3g.nw"
    basis.write_text(PYSCF_STO3G_NWCHEM)
    result = tutti.rhf_energy(WATER, str(basis), resources=cpu(2), matrices=True)
    reference = json.loads(
        (repo / "crates/tutti-adjoint/tests/data/h2o_sto3g.json").read_text()
    )
    s, h = np.array(reference["S"]), np.array(reference["T"]) + np.array(reference["V"])
    eri = np.zeros((7, 7, 7, 7))
    for (i, j, k, l), value in zip(reference["eri"]["indices"], reference["eri"]["values"]):
        for a, b, c, d in ((i, j, k, l), (j, i, k, l), (i, j, l, k), (j, i, l, k)):
            eri[a, b, c, d] = eri[c, d, a, b] = value
    c, p, e = result.coefficients, result.density, result.orbital_energies
    assert c.shape == (7, 7) and p.shape == (7, 7) and e.shape == (7,)
    assert result.occupied == 5
    occupied = c[:, :5]
    # Measured: orthonormality 1.4e-15, tr(PS) - 10 5e-15, energy 2e-13 Eh, the Roothaan
    # residual 1e-13: PySCF's integrals and tutti's agree to round-off for the same basis
    # digits. The bounds leave room for the SCF's stopping point (density changes below 1e-8,
    # energy second order in them), not for a wrong convention (an AO order or a factor 2
    # in P would miss them by orders of magnitude).
    assert np.abs(c.T @ s @ c - np.eye(7)).max() < 1e-12
    assert np.array_equal(p, p.T)
    assert np.abs(p - 2 * occupied @ occupied.T).max() < 1e-12
    assert np.trace(p @ s) == pytest.approx(10.0, abs=1e-12)
    j = np.einsum("ijkl,kl->ij", eri, p)
    k = np.einsum("ikjl,kl->ij", eri, p)
    fock = h + j - 0.5 * k
    energy = 0.5 * np.sum(p * (h + fock)) + reference["e_nuc"]
    assert energy == pytest.approx(result.energy, abs=1e-10)
    assert np.abs(fock @ c - s @ c * e).max() < 1e-8
    assert np.all(np.diff(e) >= 0)
    assert e[4] == result.summary["homo"] and e[5] == result.summary["lumo"]
    # Without matrices=True nothing is returned.
    plain = tutti.rhf_energy(WATER, str(basis), resources=cpu(1))
    assert plain.coefficients is None and plain.density is None
