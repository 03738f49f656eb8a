//! The NWChem basis parser, then the basis placed on H2, spherical and Cartesian.
//! Oracle: no panic, no abort; a basis built on H2 has functions.

use tutti_adjoint::{AngularKind, Basis, BasisSet, Molecule};

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(basis_set) = BasisSet::from_nwchem(text, "fuzz") else {
        return;
    };
    let _ = basis_set.covered();
    if let Ok(h2) = Molecule::from_bohr(&[("H", [0.0, 0.0, 0.0]), ("H", [0.0, 0.0, 1.4])]) {
        for kind in [AngularKind::Spherical, AngularKind::Cartesian] {
            if let Ok(basis) = Basis::new(&h2, &basis_set, kind) {
                assert!(basis.nao() > 0);
            }
        }
    }
}
