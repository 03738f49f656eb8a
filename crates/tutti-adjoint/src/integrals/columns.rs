//! General contractions: shells that are columns of one contraction (cc-pVXZ writes several
//! coefficient columns over one list of exponents, and the basis splits them into one shell
//! per column). Columns that share their centre, angular functions, exponents and non-zero
//! primitives make the same Gaussian products with any other shell, so a kernel can do the
//! primitive work of their quartets once ([`super::EriEngine::column_pair`]).

use super::EriEngine;

/// The basis's shells grouped into the columns of general contractions: shells whose centre,
/// angular functions (monomials and transform), exponents and set of non-zero primitives
/// are the same, with at least two non-zero primitives (a one-primitive column has no work to
/// share). Every shell is in exactly one group; each group is in ascending shell order and the
/// groups are in the order of their first shells. A segmented basis gives one group per shell.
pub fn general_contractions(engine: &EriEngine) -> Vec<Vec<usize>> {
    let shells = engine.shell_count();
    let mut group_of: Vec<Option<usize>> = vec![None; shells];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for shell in 0..shells {
        if group_of[shell].is_some() {
            continue;
        }
        let group = groups.len();
        let mut members = vec![shell];
        group_of[shell] = Some(group);
        if shares_primitives(engine, shell) {
            for (other, slot) in group_of.iter_mut().enumerate().skip(shell + 1) {
                if slot.is_none() && same_columns(engine, shell, other) {
                    *slot = Some(group);
                    members.push(other);
                }
            }
        }
        groups.push(members);
    }
    groups
}

/// Whether shell `shell` has at least two non-zero primitives.
fn shares_primitives(engine: &EriEngine, shell: usize) -> bool {
    engine
        .set(shell)
        .weights
        .iter()
        .filter(|w| **w != 0.0)
        .count()
        >= 2
}

/// Whether shells `a` and `b` are columns of one general contraction (see
/// [`general_contractions`]).
fn same_columns(engine: &EriEngine, a: usize, b: usize) -> bool {
    let (x, y) = (engine.set(a), engine.set(b));
    let support = |weights: &[f64]| weights.iter().map(|w| *w != 0.0).collect::<Vec<_>>();
    x.center == y.center
        && x.degree == y.degree
        && x.monomials == y.monomials
        && x.transform == y.transform
        && x.diagonal_scale == y.diagonal_scale
        && x.exponents == y.exponents
        && support(&x.weights) == support(&y.weights)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AngularKind, Basis, BasisSet, Molecule};

    fn engine_of(xyz: &str, basis: &str) -> EriEngine {
        let molecule = Molecule::from_xyz(xyz).expect("xyz");
        let basis_set = BasisSet::load(basis).expect("basis set");
        EriEngine::new(&Basis::new(&molecule, &basis_set, AngularKind::Spherical).expect("basis"))
    }

    const WATER: &str =
        "3\nwater, angstrom\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n";

    /// Oxygen's cc-pVTZ s block has two columns over all ten primitives (and two
    /// one-primitive columns); everything else in water is a column of its own.
    #[test]
    fn water_in_cc_pvtz_has_one_group_of_two_columns() {
        let engine = engine_of(WATER, "cc-pvtz");
        let groups = general_contractions(&engine);
        let shared: Vec<&Vec<usize>> = groups.iter().filter(|g| g.len() > 1).collect();
        assert_eq!(shared, vec![&vec![0, 2]]);
        assert_eq!(
            groups.iter().map(Vec::len).sum::<usize>(),
            engine.shell_count()
        );
    }

    /// A segmented basis has no shared columns.
    #[test]
    fn def2_tzvp_has_none() {
        let engine = engine_of(WATER, "def2-tzvp");
        assert!(general_contractions(&engine).iter().all(|g| g.len() == 1));
    }
}
