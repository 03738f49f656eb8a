//! The threaded path: one task per canonical shell pair (a, b), a >= b, covering the
//! derivative pairs (D of a primitive of a, b) and, when a != b, (D of a primitive of b, a).
//! Tasks are emitted largest estimated cost first to rayon's work stealing (one task per
//! steal), each returns its own contributions (private accumulators), and the contributions
//! are added in emission order, which does not depend on the scheduling: runs are bitwise
//! repeatable, at any thread count.

use rayon::prelude::*;

use super::accumulate::PrimitiveTerms;
use super::terms::Inputs;
use crate::integrals::cartesian::cartesian_count;
use crate::integrals::columns::PairUnit;
use crate::integrals::eri::EriWorkspace;

/// Canonical shell pairs (a, b), a >= b, largest estimated cost first (ties by pair order),
/// and their estimated costs (for the ranks' shares, `crate::split`).
pub(super) fn task_order(inputs: &Inputs<'_>) -> (Vec<(usize, usize)>, Vec<f64>) {
    let shells = inputs.shell_count();
    let cost =
        |(a, b): (usize, usize)| side(inputs, a, b) + if a == b { 0.0 } else { side(inputs, b, a) };
    let mut order: Vec<(usize, usize)> = (0..shells)
        .flat_map(|a| (0..=a).map(move |b| (a, b)))
        .collect();
    order.sort_by(|x, y| cost(*y).total_cmp(&cost(*x)).then(x.cmp(y)));
    let costs = order.iter().map(|&pair| cost(pair)).collect();
    (order, costs)
}

/// The estimated cost of the derivative pairs (D of each primitive of s, b): their
/// primitive pairs times their Cartesian products (l + 2 and l monomials of D against b's).
fn side(inputs: &Inputs<'_>, s: usize, b: usize) -> f64 {
    let engine = inputs.engine;
    let ls = engine.set(s).degree;
    let primitives = inputs.primitives(s).len() * engine.set(b).exponents.len();
    (primitives * (cartesian_count(ls + 2) + cartesian_count(ls)) * engine.set(b).monomials.len())
        as f64
}

/// Contributions of one task: (flat primitive index, [raised, plain]).
type Contributions = Vec<(usize, [f64; 2])>;

/// Runs `task` over `order` on the current pool and adds the results in emission order.
fn run_tasks(
    inputs: &Inputs<'_>,
    order: &[(usize, usize)],
    task: impl Fn((usize, usize)) -> Contributions + Sync,
) -> PrimitiveTerms {
    let partials: Vec<Contributions> = order
        .par_iter()
        .with_max_len(1)
        .map(|&pair| task(pair))
        .collect();
    let mut totals = PrimitiveTerms::zeros(inputs.first_primitive[inputs.shell_count()]);
    for contributions in &partials {
        for &(index, value) in contributions {
            totals.add(index, value);
        }
    }
    totals
}

/// The derivative pairs of task (a, b): (s, b') with s the differentiated shell.
fn sides((a, b): (usize, usize)) -> impl Iterator<Item = (usize, usize)> {
    std::iter::once((a, b)).chain((a != b).then_some((b, a)))
}

/// `term(s, i, b)` summed by tasks.
pub(super) fn one_electron(
    inputs: &Inputs<'_>,
    order: &[(usize, usize)],
    term: impl Fn(usize, usize, usize) -> [f64; 2] + Sync,
) -> PrimitiveTerms {
    run_tasks(inputs, order, |pair| {
        let mut out = Vec::new();
        for (s, b) in sides(pair) {
            for i in inputs.primitives(s) {
                out.push((inputs.first_primitive[s] + i, term(s, i, b)));
            }
        }
        out
    })
}

/// The two-electron tasks: (family f, partner shell b) for every family of shells that
/// share their exponents (`families`, [`crate::integrals::columns::shared_exponents`]) and
/// every shell b, largest estimated cost first (ties by task order), and their costs.
pub(super) fn two_electron_order(
    inputs: &Inputs<'_>,
    families: &[Vec<usize>],
) -> (Vec<(usize, usize)>, Vec<f64>) {
    let shells = inputs.shell_count();
    let cost = |(family, b): (usize, usize)| side(inputs, families[family][0], b);
    let mut order: Vec<(usize, usize)> = (0..families.len())
        .flat_map(|family| (0..shells).map(move |b| (family, b)))
        .collect();
    order.sort_by(|x, y| cost(*y).total_cmp(&cost(*x)).then(x.cmp(y)));
    let costs = order.iter().map(|&task| cost(task)).collect();
    (order, costs)
}

/// The two-electron terms by tasks ([`two_electron_order`]): for each primitive i of the
/// family, one derivative pair (D of its first shell's primitive i, b) against the ket units
/// `kets`, giving the terms of every shell of the family (their derivative functions are D's
/// times the ratio of their weights).
pub(super) fn two_electron(
    inputs: &Inputs<'_>,
    families: &[Vec<usize>],
    kets: &[PairUnit],
    tasks: &[(usize, usize)],
) -> PrimitiveTerms {
    let engine = inputs.engine;
    let weight = |s: usize, i: usize| engine.set(inputs.derivative_set(s, i)).weights[0];
    run_tasks(inputs, tasks, |(family, b)| {
        let mut workspace = EriWorkspace::new();
        let mut out = Vec::new();
        let shells = &families[family];
        let first = shells[0];
        for i in inputs.primitives(first) {
            let derivative = inputs.derivative_pair(first, i, b);
            let targets: Vec<(usize, f64)> = shells
                .iter()
                .map(|&s| (s, weight(s, i) / weight(first, i)))
                .collect();
            let (values, _) =
                inputs.shared_two_electron(&derivative, &targets, kets, &mut workspace);
            for (&(s, _), value) in targets.iter().zip(values) {
                out.push((inputs.first_primitive[s] + i, value));
            }
        }
        out
    })
}
