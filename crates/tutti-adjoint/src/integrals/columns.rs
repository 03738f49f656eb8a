//! General contractions: shells that are columns of one contraction (cc-pVXZ writes several
//! coefficient columns over one list of exponents, and the basis splits them into one shell
//! per column). Columns that share their centre, angular functions, exponents and non-zero
//! primitives make the same Gaussian products with any other shell, so a kernel can do the
//! primitive work of their quartets once ([`super::EriEngine::column_pair`]).

use super::eri::{pair_index, ShellPair};
use super::EriEngine;

/// The basis's shells grouped into the columns of general contractions: shells whose centre,
/// angular functions (monomials and transform), exponents and set of non-zero primitives
/// are the same, with at least two non-zero primitives (a one-primitive column has no work to
/// share). Every shell is in exactly one group; each group is in ascending shell order and the
/// groups are in the order of their first shells. A segmented basis gives one group per shell.
pub fn general_contractions(engine: &EriEngine) -> Vec<Vec<usize>> {
    group_shells(
        engine,
        |shell| shares_primitives(engine, shell),
        |a, b| same_columns(engine, a, b),
    )
}

/// The basis's shells grouped by centre, angular functions and exponents, whatever their
/// coefficients: the columns of one general contraction, each of which carries every
/// exponent of the contraction (a zero coefficient included). Their primitives are the same
/// functions up to each shell's normalization, so a primitive's exponent derivative is too
/// (the basis gradient shares them). Same order conventions as [`general_contractions`].
pub fn shared_exponents(engine: &EriEngine) -> Vec<Vec<usize>> {
    group_shells(
        engine,
        |_| true,
        |a, b| {
            let (x, y) = (engine.set(a), engine.set(b));
            same_functions(engine, a, b) && x.exponents == y.exponents
        },
    )
}

/// Shells grouped by `same`, tried only from shells for which `shares` holds (the others
/// stay alone): each shell joins the group of the first earlier shell it matches.
fn group_shells(
    engine: &EriEngine,
    shares: impl Fn(usize) -> bool,
    same: impl Fn(usize, usize) -> bool,
) -> Vec<Vec<usize>> {
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
        if shares(shell) {
            for (other, slot) in group_of.iter_mut().enumerate().skip(shell + 1) {
                if slot.is_none() && same(shell, other) {
                    *slot = Some(group);
                    members.push(other);
                }
            }
        }
        groups.push(members);
    }
    groups
}

/// Whether shells `a` and `b` have one centre and the same angular functions.
fn same_functions(engine: &EriEngine, a: usize, b: usize) -> bool {
    let (x, y) = (engine.set(a), engine.set(b));
    x.center == y.center
        && x.degree == y.degree
        && x.monomials == y.monomials
        && x.transform == y.transform
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
    same_functions(engine, a, b)
        && x.exponents == y.exponents
        && support(&x.weights) == support(&y.weights)
}

/// What a J/K build or a gradient loops over, as bras or kets: one canonical shell pair, or
/// every canonical pair over the columns of one or two general contractions, whose quartets share
/// their primitive work ([`EriEngine::column_pair`]).
#[derive(Debug)]
pub(crate) struct PairUnit {
    /// The members' sets (a, b) in the order of the kernel's blocks.
    pub shells: Vec<[usize; 2]>,
    /// The members' canonical pair indices, in the same order.
    pub members: Vec<usize>,
    /// The column pair; `None` for a single canonical pair (the engine's own).
    pub columns: Option<ShellPair>,
}

impl PairUnit {
    /// The pair the kernel takes for this unit.
    pub fn kernel_pair<'p>(&'p self, pairs: &'p [ShellPair]) -> &'p ShellPair {
        self.columns.as_ref().unwrap_or(&pairs[self.members[0]])
    }
}

/// The build's units: the canonical pairs in order, except that the first pair over the
/// columns of general contractions stands for every pair over the same contractions (and
/// the others are left out). A segmented basis gives one unit per canonical pair, in order.
/// With `share` false every group is one shell: one unit per canonical pair.
pub(crate) fn pair_units(engine: &EriEngine, share: bool) -> Vec<PairUnit> {
    let groups = if share {
        general_contractions(engine)
    } else {
        (0..engine.shell_count()).map(|shell| vec![shell]).collect()
    };
    let mut group_of = vec![0; engine.shell_count()];
    for (group, shells) in groups.iter().enumerate() {
        for &shell in shells {
            group_of[shell] = group;
        }
    }
    let mut done = std::collections::BTreeSet::new();
    let mut units = Vec::new();
    for (index, pair) in engine.pairs().iter().enumerate() {
        let (first, second) = (group_of[pair.a], group_of[pair.b]);
        if groups[first].len() == 1 && groups[second].len() == 1 {
            units.push(PairUnit {
                shells: vec![[pair.a, pair.b]],
                members: vec![index],
                columns: None,
            });
            continue;
        }
        if !done.insert((first.max(second), first.min(second))) {
            continue;
        }
        let columns = engine.column_pair(&groups[first], &groups[second]);
        let shells = columns.members();
        units.push(PairUnit {
            members: shells.iter().map(|&[a, b]| pair_index(a, b)).collect(),
            shells,
            columns: Some(columns),
        });
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrals::eri::tests::water_in;

    /// Oxygen's cc-pVTZ s block has two columns over all ten primitives (and two
    /// one-primitive columns); everything else in water is a column of its own.
    #[test]
    fn water_in_cc_pvtz_has_one_group_of_two_columns() {
        let engine = water_in("cc-pvtz");
        let groups = general_contractions(&engine);
        let shared: Vec<&Vec<usize>> = groups.iter().filter(|g| g.len() > 1).collect();
        assert_eq!(shared, vec![&vec![0, 2]]);
        assert_eq!(
            groups.iter().map(Vec::len).sum::<usize>(),
            engine.shell_count()
        );
    }

    /// Every column of a cc-pVTZ block carries all of its exponents: oxygen's four s
    /// columns share them, and so do its three p, its two d, and hydrogen's three s and two p.
    #[test]
    fn water_in_cc_pvtz_shares_exponents_by_block() {
        let engine = water_in("cc-pvtz");
        let sizes: Vec<usize> = shared_exponents(&engine).iter().map(Vec::len).collect();
        // O: s, p, d, f; then each H: s, p, d.
        assert_eq!(sizes, vec![4, 3, 2, 1, 3, 2, 1, 3, 2, 1]);
    }

    /// A segmented basis has no shared columns.
    #[test]
    fn def2_tzvp_has_none() {
        let engine = water_in("def2-tzvp");
        assert!(general_contractions(&engine).iter().all(|g| g.len() == 1));
        assert!(shared_exponents(&engine).iter().all(|g| g.len() == 1));
    }
}
