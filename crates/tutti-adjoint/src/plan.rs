//! The memory plan of a run: the large objects of the SCF (and the gradient) for
//! `tutti-plan`, placed on the devices before any work, or refused with the planner's
//! numbers.
//!
//! Every object lives in the rank's (device's) memory while the run works on it, so each is
//! allowed on the device tier only: a cap that cannot hold them is an error up front, never
//! ignored. Objects built once and read by every rank (the ERI engine's shell pairs, S, H,
//! X) are `shared`; each rank's working matrices and partial sums are `per device`.

use std::collections::BTreeMap;

use tutti_backend::{Device, Resources};
use tutti_group::Group;
use tutti_plan::{Budget, ObjectSpec, Plan, Planner, Tier};

use crate::basis::{function_count, AngularKind, Basis};
use crate::error::Result;
use crate::gradient::GradientOptions;
use crate::integrals::functions::FunctionShell;
use crate::integrals::hermite::hermite_indices;
use crate::integrals::pair_rows::PairRows;
use crate::molecule::Molecule;
use crate::scf::{validate, InitialGuess, ScfOptions};

const F64: u64 = std::mem::size_of::<f64>() as u64;

/// The plan of [`crate::rhf`] for `molecule` in `basis` on the devices of
/// `options.resources`: where each large object goes, or the refusal [`crate::rhf`] would
/// give (an [`crate::AdjointError::Plan`] with the numbers). Prints as a table.
///
/// Errors: bad options, the devices ([`crate::AdjointError::Group`]), or the plan not fitting.
pub fn plan(molecule: &Molecule, basis: &Basis, options: &ScfOptions) -> Result<Plan> {
    validate(options)?;
    let _ = molecule;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    check(
        &group,
        &options.resources,
        scf_objects(basis, options, group.devices()),
    )
}

/// The plan of [`crate::rhf_gradient`]: the SCF's objects and the gradient's (see [`plan`]).
pub fn plan_gradient(
    molecule: &Molecule,
    basis: &Basis,
    options: &GradientOptions,
) -> Result<Plan> {
    validate(&options.scf)?;
    let _ = molecule;
    let group = Group::from_resources(&options.scf.resources, crate::GPU_USE)?;
    check(
        &group,
        &options.scf.resources,
        gradient_objects(basis, options, group.devices()),
    )
}

/// Places `objects` on `group`'s devices within `resources`' caps.
pub(crate) fn check(
    group: &Group,
    resources: &Resources,
    objects: Vec<ObjectSpec>,
) -> Result<Plan> {
    let budget = Budget::from_devices(group.devices(), resources)?;
    Ok(Planner::new(budget).plan(&objects)?)
}

/// The SCF's large objects on `devices` (one rank each).
pub(crate) fn scf_objects(
    basis: &Basis,
    options: &ScfOptions,
    devices: &[Device],
) -> Vec<ObjectSpec> {
    let nao = basis.nao() as u64;
    let matrix = nao * nao * F64;
    let ranks = devices.len().max(1) as u64;
    let shells = basis.shells().len() as u64;
    let pairs = shells * (shells + 1) / 2;
    // A rank's share of the bra pairs is dealt into `fock::task_lists` task lists, each
    // with its own J/K accumulators; the serial build has one. A share dealt by cost may
    // hold more than its rank's even part of the pairs, so only the count of all pairs
    // bounds the lists.
    let task_lists = if options.serial_fock {
        1
    } else {
        (crate::fock::task_lists(basis.nao()) as u64).clamp(1, pairs.max(1))
    };
    let device = |object: ObjectSpec| object.no_slower_than(Tier::Device);
    let mut objects = vec![
        device(ObjectSpec::shared(
            "ERI shell-pair data",
            pair_data_bytes(basis),
            1,
        )),
        device(ObjectSpec::shared(
            "one-electron matrices (S, H, X)",
            matrix,
            3,
        )),
        device(ObjectSpec::per_device(
            "SCF matrices (P, next P, F, J, K)",
            matrix,
            5,
        )),
        device(ObjectSpec::per_device(
            "J/K task accumulators",
            2 * matrix,
            task_lists,
        )),
    ];
    if options.diis_vectors >= 2 {
        objects.push(device(ObjectSpec::per_device(
            "DIIS history (Fock and error matrices)",
            matrix,
            2 * options.diis_vectors as u64,
        )));
    }
    if options.full_rebuild_every > 1 {
        objects.push(device(ObjectSpec::per_device(
            "incremental J/K (previous P, J and K; the change of P)",
            matrix,
            4,
        )));
    }
    if options.guess == InitialGuess::Atoms {
        objects.push(device(ObjectSpec::shared(
            "initial guess (atomic densities, the largest atom's SCF)",
            matrix + atomic_scf_bytes(basis),
            1,
        )));
    }
    if ranks > 1 && !options.serial_fock {
        // The rank's partial J/K and, at the reducing rank, one incoming block per rank.
        objects.push(device(ObjectSpec::per_device(
            "J/K rank partial and reduction blocks",
            2 * matrix,
            1 + ranks,
        )));
    }
    objects
}

/// The gradient run's large objects on `devices`: the SCF's, then the gradient's densities,
/// task contributions and per-rank partial sums.
pub(crate) fn gradient_objects(
    basis: &Basis,
    options: &GradientOptions,
    devices: &[Device],
) -> Vec<ObjectSpec> {
    let mut objects = scf_objects(basis, &options.scf, devices);
    let nao = basis.nao() as u64;
    let ranks = devices.len().max(1) as u64;
    let shells = basis.shells().len() as u64;
    let primitives: u64 = basis
        .shells()
        .iter()
        .map(|s| s.exponents.len() as u64)
        .sum();
    let device = |object: ObjectSpec| object.no_slower_than(Tier::Device);
    objects.push(device(
        ObjectSpec::per_device("gradient densities (P, W)", nao * nao * F64, 2).first_used_at(1),
    ));
    // Each canonical shell pair's task returns one (primitive, [raised, plain]) entry per
    // primitive of each side: every primitive against every shell, split among the ranks.
    let entries = if options.serial {
        0
    } else {
        (primitives * shells).div_ceil(ranks)
    };
    if entries > 0 {
        let entry = std::mem::size_of::<(usize, [f64; 2])>() as u64;
        objects.push(device(
            ObjectSpec::per_device("gradient task contributions", entry, entries).first_used_at(1),
        ));
    }
    // Overlap, core-Hamiltonian and two-electron terms, and the reduction's flat buffer and
    // incoming blocks.
    objects.push(device(
        ObjectSpec::per_device("gradient primitive terms", 2 * primitives * F64, 4 + ranks)
            .first_used_at(1),
    ));
    objects
}

/// Bytes of the largest atomic SCF of the atomic-density guess: over the atom's shells of
/// the angular momenta its configuration may occupy (l <= 2 up to Kr; an upper bound), their
/// ERI pair tables, their whole ERI tensor and their atom-sized matrices (S, H, T, V, the
/// density; the radial blocks and their DIIS history are smaller).
fn atomic_scf_bytes(basis: &Basis) -> u64 {
    let shells = basis.shells();
    let atoms = shells.iter().map(|s| s.atom + 1).max().unwrap_or(0);
    (0..atoms)
        .map(|atom| {
            let occupied: Vec<crate::basis::Shell> = shells
                .iter()
                .filter(|s| s.atom == atom && s.l <= 2)
                .cloned()
                .collect();
            let nao: u64 = occupied
                .iter()
                .map(|s| function_count(s.l, AngularKind::Spherical) as u64)
                .sum();
            shell_pair_bytes(&occupied, AngularKind::Spherical) + (nao * nao + 5) * nao * nao * F64
        })
        .max()
        .unwrap_or(0)
}

/// Bytes of the ERI engine's canonical shell-pair tables: per pair the Hermite pattern and
/// row starts, per primitive pair the expansion values twice (plain and signed), its
/// exponent, centre and bound, and the batched kernel's ket lanes.
pub(crate) fn pair_data_bytes(basis: &Basis) -> u64 {
    shell_pair_bytes(basis.shells(), basis.kind())
}

/// [`pair_data_bytes`] of the canonical pairs of `shells`, of functions `kind`.
fn shell_pair_bytes(shells: &[crate::basis::Shell], kind: AngularKind) -> u64 {
    let usize_bytes = std::mem::size_of::<usize>() as u64;
    // The tables' entries and rows ([`PairRows`]) depend on the two angular momenta only.
    let mut layouts: BTreeMap<[usize; 2], (u64, u64)> = BTreeMap::new();
    let mut total = 0u64;
    for (a, shell_a) in shells.iter().enumerate() {
        for (b, shell_b) in shells[..=a].iter().enumerate() {
            let (pattern, rows) = *layouts.entry([shell_a.l, shell_b.l]).or_insert_with(|| {
                let rows = PairRows::new(
                    &FunctionShell::from_shell(shell_a, kind),
                    &FunctionShell::from_shell(shell_b, kind),
                    &hermite_indices(shell_a.l + shell_b.l),
                );
                (rows.pattern.len() as u64, rows.row_starts.len() as u64)
            });
            // The engine drops primitives with a zero weight, and keeps one of (i, j) and
            // (j, i) of a shell with itself.
            let kept = |shell: &crate::basis::Shell| {
                shell.contraction.iter().filter(|d| **d != 0.0).count()
            };
            let (na, nb) = (kept(shell_a), kept(shell_b));
            let primitive_pairs = if a == b { na * (na + 1) / 2 } else { na * nb };
            // exponent, centre, bound, and two vector headers.
            let primitive_fixed = 5 * F64 + 6 * usize_bytes;
            // The ket lanes: chunks of a power of two lanes up to 8, each lane its values,
            // exponent and centre, each chunk a bound; six vector headers.
            let width = primitive_pairs.clamp(1, 8).next_power_of_two();
            let chunks = primitive_pairs.div_ceil(width) as u64;
            let lane_bytes = chunks * width as u64 * (pattern + 4) * F64 + chunks * F64;
            let primitive_pairs = primitive_pairs as u64;
            total += (pattern + rows) * usize_bytes
                + primitive_pairs * (2 * pattern * F64 + primitive_fixed)
                + lane_bytes
                + 18 * usize_bytes;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basis::{AngularKind, BasisSet};
    use crate::integrals::EriEngine;

    #[test]
    fn pair_data_estimate_bounds_the_engine_tables() {
        let water = Molecule::from_xyz(
            "3\nwater\nO 0 0 0\nH 0 0.7569503 0.5858823\nH 0 -0.7569503 0.5858823\n",
        )
        .expect("valid XYZ");
        let basis = Basis::new(
            &water,
            &BasisSet::named("cc-pvdz").expect("shipped"),
            AngularKind::Spherical,
        )
        .expect("covered");
        let estimate = pair_data_bytes(&basis);
        let actual = EriEngine::new(&basis).pair_data_bytes();
        assert!(estimate >= actual, "{estimate} < {actual}");
        // Only vector headers differ.
        assert!(estimate <= actual * 2, "{estimate} vs {actual}");
    }
}
