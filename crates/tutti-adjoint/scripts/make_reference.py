#!/usr/bin/env python3
"""Make the PySCF reference files of crates/tutti-adjoint/tests/data that are not copies of
the shared references:

- h2o_def2tzvp.json: water (same geometry as the shared h2o cases) in def2-TZVP, with the
  basis read from the crate's own shipped file data/basis/def2-tzvp.nw (so the test compares
  the same numbers); RHF energy (conv_tol 1e-12), S, T, V and a sample of ERIs.
- h2o_631gs_cart.json: water in 6-31G* with Cartesian d functions (PySCF cart=True), basis
  read from the crate's data/basis/6-31g_star.nw; RHF energy only.
- atoms_ccpvdz.json: RHF energies of the He and Ar atoms in the crate's cc-pVDZ file.
- h2o_ccpvtz.json: water in the crate's cc-pVTZ (f on O, d on H): RHF energy, S, T, V and a
  sample of ERIs including every unique integral among O's f functions.
- high_l.json: a made-up basis with f and g shells (one contracted g) on O and d on H, in
  both spherical and Cartesian form: S, T, V and a sample of ERIs (every unique integral of a
  few all-g quartets plus a random sample), and PySCF's cart2sph tables for l = 0..4.

Same JSON layout as the shared references: molecule.symbols / coords_bohr, basis[atom].shells
with l, exponents, coefficients (raw library values; one shell per contraction column, shells
sorted by l within an atom), S/T/V as nested lists, eri.indices / eri.values (chemists'
notation, 0-based AO indices).

Usage: python3 -m venv /tmp/venv && /tmp/venv/bin/pip install pyscf
       /tmp/venv/bin/python crates/tutti-adjoint/scripts/make_reference.py
"""
import json
import os

import numpy as np
import pyscf
from pyscf import gto, scf

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data")
BASIS_DIR = os.path.join(HERE, "..", "data", "basis")

WATER = [
    ("O", (0.0, 0.0, 0.0)),
    ("H", (0.0, 1.4304288084282137, 1.107157044045246)),
    ("H", (0.0, -1.4304288084282137, 1.107157044045246)),
]


def split_columns(pyscf_shells):
    """PySCF basis entries [l, [e, c1, c2, ...], ...] -> one shell per column, sorted by l."""
    out = []
    for entry in pyscf_shells:
        l = entry[0]
        rows = [r for r in entry[1:] if not isinstance(r, (int, float))]
        exps = [r[0] for r in rows]
        for col in range(1, len(rows[0])):
            out.append({"l": l, "exponents": exps, "coefficients": [r[col] for r in rows]})
    out.sort(key=lambda s: s["l"])  # stable
    return out


def to_pyscf(shells):
    return [[s["l"]] + [[e, c] for e, c in zip(s["exponents"], s["coefficients"])] for s in shells]


def make_mol(atoms, per_element_shells, cart):
    mol = gto.Mole()
    mol.atom = [(sym, xyz) for sym, xyz in atoms]
    mol.unit = "Bohr"
    mol.basis = {sym: to_pyscf(shells) for sym, shells in per_element_shells.items()}
    mol.cart = cart
    mol.spin = 0
    mol.charge = 0
    mol.verbose = 0
    mol.build()
    return mol


def eri_sample(mol, rng, count, forced=()):
    n = mol.nao
    eri = mol.intor("int2e", aosym="s1").reshape(n, n, n, n)
    picked = set()
    for quad in forced:
        picked.add(quad)
    while len(picked) < count + len(forced):
        i, j, k, l = sorted(rng.integers(0, n, size=2)), None, None, None
        i, j = max(i), min(i)
        k, l = sorted(rng.integers(0, n, size=2))[::-1]
        if (i * (i + 1) // 2 + j) < (k * (k + 1) // 2 + l):
            i, j, k, l = k, l, i, j
        picked.add((int(i), int(j), int(k), int(l)))
    picked = sorted(picked)
    return {
        "note": "a sample of (ij|kl), chemists' notation, 0-based AO indices",
        "indices": [list(q) for q in picked],
        "values": [float(eri[q]) for q in picked],
    }


def molecule_block(atoms):
    return {
        "symbols": [a for a, _ in atoms],
        "coords_bohr": [list(x) for _, x in atoms],
        "charge": 0,
        "spin_2S": 0,
    }


def common(mol):
    return {
        "nao": mol.nao,
        "ao_labels": mol.ao_labels(),
        "e_nuc": float(mol.energy_nuc()),
        "S": mol.intor("int1e_ovlp").tolist(),
        "T": mol.intor("int1e_kin").tolist(),
        "V": mol.intor("int1e_nuc").tolist(),
    }


def water_in(stem, basis_name, rng, sample, forced_shell_l=None):
    """Water in the crate's basis file data/basis/<stem>.nw: RHF energy (conv_tol 1e-12),
    S, T, V and `sample` random ERIs, plus, with `forced_shell_l`, every unique integral
    among the functions of O's first shell of that l."""
    with open(os.path.join(BASIS_DIR, stem + ".nw")) as handle:
        text = handle.read()
    per_element = {sym: split_columns(gto.basis.parse(text, sym)) for sym in ("O", "H")}
    mol = make_mol(WATER, per_element, cart=False)
    mf = scf.RHF(mol)
    mf.conv_tol = 1e-12
    mf.conv_tol_grad = 1e-9
    e = mf.kernel()
    assert mf.converged
    name = "h2o_" + stem.replace("-", "")
    out = {
        "name": name,
        "units": {"length": "bohr", "energy": "hartree"},
        "basis_name": basis_name,
        "basis_source": f"crates/tutti-adjoint/data/basis/{stem}.nw (basis_set_exchange export), parsed by pyscf.gto.basis.parse",
        "spherical": True,
        "molecule": molecule_block(WATER),
        "basis": [
            {"atom": i, "symbol": sym, "shells": per_element[sym]} for i, (sym, _) in enumerate(WATER)
        ],
        "e_rhf": float(e),
        "versions": {"pyscf": pyscf.__version__, "numpy": np.__version__},
    }
    out.update(common(mol))
    forced = []
    if forced_shell_l is not None:
        shell = [i for i in range(mol.nbas) if mol.bas_atom(i) == 0 and mol.bas_angular(i) == forced_shell_l][0]
        start, end = mol.ao_loc[shell], mol.ao_loc[shell + 1]
        for i in range(start, end):
            for j in range(start, i + 1):
                for k in range(start, i + 1):
                    for l in range(start, k + 1):
                        if (k * (k + 1) // 2 + l) <= (i * (i + 1) // 2 + j):
                            forced.append((i, j, k, l))
    out["eri"] = eri_sample(mol, rng, sample, forced)
    return out


def def2tzvp(rng):
    return water_in("def2-tzvp", "def2-tzvp", rng, 3000)


def h2o_ccpvtz(rng):
    """cc-pVTZ: f on O, d on H; general contractions split one shell per column."""
    return water_in("cc-pvtz", "cc-pvtz", rng, 2000, forced_shell_l=3)


def h2o_631gs_cart(rng):
    with open(os.path.join(BASIS_DIR, "6-31g_star.nw")) as handle:
        text = handle.read()
    per_element = {sym: split_columns(gto.basis.parse(text, sym)) for sym in ("O", "H")}
    mol = make_mol(WATER, per_element, cart=True)
    mf = scf.RHF(mol)
    mf.conv_tol = 1e-12
    mf.conv_tol_grad = 1e-9
    e = mf.kernel()
    assert mf.converged
    return {
        "name": "h2o_631gs_cart",
        "units": {"length": "bohr", "energy": "hartree"},
        "basis_name": "6-31g*",
        "basis_source": "crates/tutti-adjoint/data/basis/6-31g_star.nw (basis_set_exchange export), parsed by pyscf.gto.basis.parse",
        "cart": True,
        "molecule": molecule_block(WATER),
        "basis": [
            {"atom": i, "symbol": sym, "shells": per_element[sym]} for i, (sym, _) in enumerate(WATER)
        ],
        "nao": mol.nao,
        "e_nuc": float(mol.energy_nuc()),
        "e_rhf": float(e),
        "versions": {"pyscf": pyscf.__version__, "numpy": np.__version__},
    }


def atoms_ccpvdz(rng):
    with open(os.path.join(BASIS_DIR, "cc-pvdz.nw")) as handle:
        text = handle.read()
    energies = {}
    for sym in ("He", "Ar"):
        mol = gto.M(atom=f"{sym} 0 0 0", basis={sym: gto.basis.parse(text, sym)}, verbose=0)
        mf = scf.RHF(mol)
        mf.conv_tol = 1e-12
        energies[sym] = {"nao": mol.nao, "e_rhf": float(mf.kernel())}
    return {
        "name": "atoms_ccpvdz",
        "basis_name": "cc-pvdz",
        "basis_source": "crates/tutti-adjoint/data/basis/cc-pvdz.nw, parsed by pyscf.gto.basis.parse",
        "energies": energies,
        "versions": {"pyscf": pyscf.__version__},
    }


def high_l(rng):
    per_element = {
        "O": [
            {"l": 0, "exponents": [5.0, 1.2], "coefficients": [0.4, 0.7]},
            {"l": 1, "exponents": [2.5, 0.6], "coefficients": [0.5, 0.6]},
            {"l": 2, "exponents": [1.3], "coefficients": [1.0]},
            {"l": 3, "exponents": [0.9], "coefficients": [1.0]},
            {"l": 4, "exponents": [1.1], "coefficients": [1.0]},
            {"l": 4, "exponents": [2.2, 0.5], "coefficients": [0.6, 0.5]},
        ],
        "H": [
            {"l": 0, "exponents": [1.5, 0.3], "coefficients": [0.3, 0.8]},
            {"l": 1, "exponents": [0.8], "coefficients": [1.0]},
            {"l": 2, "exponents": [0.7], "coefficients": [1.0]},
        ],
    }
    out = {
        "name": "high_l",
        "units": {"length": "bohr", "energy": "hartree"},
        "basis_name": "made up: s, p, d, f, g and a contracted g on O; s, p, d on H",
        "molecule": molecule_block(WATER),
        "basis": [
            {"atom": i, "symbol": sym, "shells": per_element[sym]} for i, (sym, _) in enumerate(WATER)
        ],
        "cart2sph": {str(l): gto.cart2sph(l).tolist() for l in range(5)},
        "versions": {"pyscf": pyscf.__version__, "numpy": np.__version__},
    }
    for cart in (False, True):
        mol = make_mol(WATER, per_element, cart=cart)
        block = common(mol)
        # Force every unique integral among the first g shell's functions on O.
        g_start = mol.ao_loc[4]
        g_end = mol.ao_loc[5]
        forced = []
        for i in range(g_start, g_end):
            for j in range(g_start, i + 1):
                for k in range(g_start, i + 1):
                    for l in range(g_start, k + 1):
                        if (k * (k + 1) // 2 + l) <= (i * (i + 1) // 2 + j) and len(forced) < 400:
                            forced.append((i, j, k, l))
        block["eri"] = eri_sample(mol, rng, 2500, forced)
        out["cartesian" if cart else "spherical"] = block
    return out


def main():
    rng = np.random.default_rng(20261130)
    # New cases go last: the earlier ones keep their random samples.
    for make in (def2tzvp, high_l, h2o_631gs_cart, atoms_ccpvdz, h2o_ccpvtz):
        data = make(rng)
        path = os.path.join(DATA, data["name"] + ".json")
        with open(path, "w") as handle:
            json.dump(data, handle)
        print(path, data.get("e_rhf", ""))


if __name__ == "__main__":
    main()
