//! The XYZ parser. Oracle: no panic, no abort, and no more atoms than the text has lines
//! (an atom count in the header never sizes an allocation by itself).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tutti_adjoint::Molecule;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(molecule) = Molecule::from_xyz(text) {
        assert!(molecule.atoms().len() <= text.lines().count());
        assert!(molecule.nuclear_repulsion().is_finite() || molecule.atoms().len() < 2);
    }
});
