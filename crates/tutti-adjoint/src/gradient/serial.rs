//! The serial reference: plain loops over every derivative set (shell s, primitive i) and
//! every partner shell b, in order, accumulating into one set of totals.

use super::accumulate::PrimitiveTerms;
use super::terms::Inputs;
use crate::integrals::eri::EriWorkspace;

/// Sums `term(s, i, b)` over all shells s, their primitives i and all shells b.
pub(super) fn one_electron(
    inputs: &Inputs<'_>,
    term: impl Fn(usize, usize, usize) -> [f64; 2],
) -> PrimitiveTerms {
    let shells = inputs.shell_count();
    let mut totals = PrimitiveTerms::zeros(inputs.first_primitive[shells]);
    for s in 0..shells {
        for i in inputs.primitives(s) {
            for b in 0..shells {
                totals.add(inputs.first_primitive[s] + i, term(s, i, b));
            }
        }
    }
    totals
}

/// The two-electron terms of every derivative pair (D of (s, i), b).
pub(super) fn two_electron(inputs: &Inputs<'_>) -> PrimitiveTerms {
    let shells = inputs.shell_count();
    let mut totals = PrimitiveTerms::zeros(inputs.first_primitive[shells]);
    let mut workspace = EriWorkspace::new();
    for s in 0..shells {
        for i in inputs.primitives(s) {
            for b in 0..shells {
                let pair = inputs.derivative_pair(s, i, b);
                let value = inputs.two_electron(&pair, s, &mut workspace);
                totals.add(inputs.first_primitive[s] + i, value);
            }
        }
    }
    totals
}
