//! The XYZ parser. Oracle: no panic, no abort, and no more atoms than the text has lines
//! (an atom count in the header never sizes an allocation by itself).

use tutti_adjoint::Molecule;

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(molecule) = Molecule::from_xyz(text) {
        assert!(molecule.atoms().len() <= text.lines().count());
        assert!(molecule.nuclear_repulsion().is_finite() || molecule.atoms().len() < 2);
    }
}
