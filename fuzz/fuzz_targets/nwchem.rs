//! The NWChem basis parser, then the basis placed on H2 and on one atom of every element
//! the file covers. Oracle: no panic, no abort.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_adjoint::{AngularKind, Basis, BasisSet, Molecule};

fuzz_target!(|data: &[u8]| {
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
});
