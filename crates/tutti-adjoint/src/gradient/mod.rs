//! The analytic gradient of the converged RHF energy with respect to every primitive exponent
//! and every library contraction coefficient of every shell.
//!
//! `dE = tr(P dH) + 1/2 tr(P dG[P]) - tr(W dS)`, `W = 2 sum_occ e_i C_i C_i^T` the
//! energy-weighted density, each derivative integral analytic. Per primitive i of a shell the
//! work reduces to two numbers, X_i and Y_i, the energy's response to adding the (weighted)
//! bare primitive and r^2 times it to the shell's AOs (module `terms`), from which the chain
//! rule through N_l(alpha_i) and the contraction's renormalization K gives dE/dalpha_i and
//! dE/dc_i (module `normalization`). The r^2 functions are Cartesian shells of l + 2 mapped
//! onto the shell's AOs ([`crate::integrals::functions::FunctionShell`]).
//!
//!
//! On a group of ranks (`scf.resources`) every rank runs the SCF (see [`crate::scf`]), then
//! takes its share of the canonical shell-pair tasks (largest first, dealt round-robin to the
//! ranks) on its device's pool; the partial primitive terms are added in rank order
//! (`allreduce_sum`), so any device count gives the same bits run to run.
//!
//! Public API (the CLI, C ABI and Python wrappers use exactly these names):
//! [`GradientOptions`] (`scf`, `serial`), [`rhf_gradient`],
//! [`RhfGradient`] (`energy`, `shells`, `iterations`, `devices`, `timings`) with
//! [`RhfGradient::per_element`] and [`RhfGradient::to_json`], [`ShellGradient`],
//! [`ElementGradient`], [`GradientTimings`].

mod accumulate;
mod normalization;
mod parallel;
mod report;
mod serial;
mod terms;

use std::time::Instant;

use faer::Mat;
use serde::Serialize;
use tutti_backend::Resources;
use tutti_group::{Comm, Group};

use self::accumulate::PrimitiveTerms;
use self::terms::Inputs;
use crate::basis::Basis;
use crate::error::Result;
use crate::integrals::columns::{pair_units, shared_exponents};
use crate::integrals::eri::EriEngine;
use crate::integrals::functions::FunctionShell;
use crate::integrals::one_electron::point_charges;
use crate::molecule::Molecule;
use crate::scf::{
    first_rank, occupied_orbitals, scf_rank, validate, Fault, FaultPoint, RhfResult, ScfOptions,
    Setup,
};

/// Gradient settings: the SCF's options (its `resources` also run the gradient's loops: the
/// same ranks and device pools) and which implementation runs.
///
/// Default: [`ScfOptions::default`] with the density tolerance tightened to
/// [`GradientOptions::DENSITY_TOLERANCE`] (the gradient is first order in the density's
/// error, unlike the energy), threaded.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GradientOptions {
    /// SCF settings; `scf.resources` are the devices of every loop.
    pub scf: ScfOptions,
    /// Run the serial reference implementation of the gradient's loops (plain loops on each
    /// rank's thread, every rank doing all of it, no split) instead of the split, threaded
    /// one. The SCF before it is the same either way
    /// (`scf.serial_fock` selects its serial Fock build).
    pub serial: bool,
}

impl Default for GradientOptions {
    fn default() -> Self {
        Self {
            scf: ScfOptions {
                density_tolerance: Self::DENSITY_TOLERANCE,
                // The gradient is first order in the density's error: the density criterion.
                gradient_tolerance: None,
                ..ScfOptions::default()
            },
            serial: false,
        }
    }
}

impl GradientOptions {
    /// The default SCF density tolerance of a gradient run. Measured against pyscfad's AD
    /// gradient (water/6-31g, water/cc-pVDZ, methane/def2-SVP), the largest error relative to
    /// max(|g|, 1e-2) is 1.1e-7 with the SCF's own 1e-8, 3e-8 with 1e-9 (one or two more
    /// iterations) and 3e-9 with 1e-10 (three to six more).
    pub const DENSITY_TOLERANCE: f64 = 1e-9;

    /// These options running on `resources` (the SCF's and the gradient's loops).
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.scf.resources = resources;
        self
    }

    /// Selects the serial reference implementation.
    pub fn with_serial(mut self, serial: bool) -> Self {
        self.serial = serial;
        self
    }
}

/// The gradient of one shell of the basis (one placed on an atom), in the shell's primitive
/// order, hartree per unit of the parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShellGradient {
    /// Index of the atom in the molecule.
    pub atom: usize,
    /// Angular momentum.
    pub l: usize,
    /// Exponents alpha_i as in the basis (1/bohr^2).
    pub exponents: Vec<f64>,
    /// Library coefficients c_i as in the basis.
    pub coefficients: Vec<f64>,
    /// dE/dalpha_i.
    pub grad_exponents: Vec<f64>,
    /// dE/dc_i.
    pub grad_coefficients: Vec<f64>,
}

/// The gradient summed over all atoms of one element, per shell of that element's basis:
/// what a basis optimizer varies when one set of parameters serves every atom of the element.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ElementGradient {
    /// Element symbol.
    pub symbol: String,
    /// Nuclear charge.
    pub charge: u32,
    /// How many atoms were summed.
    pub atoms: usize,
    /// One entry per shell of the element (`atom` is the first atom of the element).
    pub shells: Vec<ShellGradient>,
}

/// Wall-clock times of a gradient run, seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GradientTimings {
    /// The SCF (energy) that precedes the gradient.
    pub scf: f64,
    /// Overlap derivatives (the -tr(W dS) term).
    pub overlap: f64,
    /// Kinetic and nuclear-attraction derivatives (the tr(P dH) term).
    pub core_hamiltonian: f64,
    /// Derivative two-electron integrals contracted with the densities.
    pub two_electron: f64,
    /// Fock-like assembly and the final reduction.
    pub fock: f64,
    /// The whole run including the SCF.
    pub total: f64,
}

/// The RHF energy and its gradient with respect to all basis parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct RhfGradient {
    /// Total RHF energy, hartree.
    pub energy: f64,
    /// One entry per shell of the basis, in AO (basis) order.
    pub shells: Vec<ShellGradient>,
    /// SCF iterations.
    pub iterations: usize,
    /// Devices (ranks) the run was split among.
    pub devices: usize,
    /// Where the time went.
    pub timings: GradientTimings,
}

/// Runs RHF for `molecule` in `basis`, then the analytic gradient of its energy with respect
/// to every exponent and library coefficient of every shell, on the devices of
/// `options.scf.resources` (the SCF's J/K builds and every gradient loop split among them).
///
/// Errors: those of [`crate::rhf`]; the plan ([`crate::plan_gradient`]) is checked before any
/// work.
pub fn rhf_gradient(
    molecule: &Molecule,
    basis: &Basis,
    options: &GradientOptions,
) -> Result<RhfGradient> {
    validate_gradient(options)?;
    occupied_orbitals(molecule)?;
    let group = Group::from_resources(&options.scf.resources, crate::GPU_USE)?;
    rhf_gradient_on(&group, molecule, basis, options)
}

/// The SCF's options, and no orbital-gradient criterion: it leaves the density (and so the
/// gradient) accurate only to about its tolerance.
fn validate_gradient(options: &GradientOptions) -> Result<()> {
    validate(&options.scf)?;
    if let Some(tolerance) = options.scf.gradient_tolerance {
        return Err(crate::error::invalid(
            "gradient_tolerance",
            format!(
                "{tolerance:e}: the gradient's SCF converges on the density change (the \
                 orbital-gradient criterion leaves the density too loose for it); set it to \
                 None (`GradientOptions::default()` does)"
            ),
        ));
    }
    Ok(())
}

/// [`rhf_gradient`] on a group made by the caller: the way to run it across processes, on a
/// [`Group::spanning`] group whose other ranks are other MPI processes running the same
/// program on the same inputs. The shell-pair tasks are split among all ranks and summed in
/// rank order, so every process returns the same gradient, that of a group of as many
/// threads. `options.scf.resources` still gives the memory caps; the group the devices.
pub fn rhf_gradient_on(
    group: &Group,
    molecule: &Molecule,
    basis: &Basis,
    options: &GradientOptions,
) -> Result<RhfGradient> {
    // A failure before the run releases the other processes of a spanning group.
    group.before_run(validate_gradient(options).and_then(|()| {
        occupied_orbitals(molecule)?;
        crate::plan::check(
            group,
            &options.scf.resources,
            crate::plan::gradient_objects(basis, options, group.devices()),
        )
    }))?;
    let start = Instant::now();
    let (derivative_sets, first_primitive) = derivative_sets(basis);
    // One engine for both: its basis pairs serve the SCF, its extra sets the gradient.
    let engine = EriEngine::with_sets(basis, derivative_sets);
    let setup = group.before_run(Setup::new(molecule, basis, &options.scf, &engine, start))?;
    let shared = Shared {
        molecule,
        engine: &engine,
        first_primitive: &first_primitive,
        setup: &setup,
        options,
        start,
    };
    let results = group.run(|comm| gradient_rank(comm, &shared))?;
    let (scf, terms, mut timings) = first_rank(results)?;
    let reduction = Instant::now();
    let mut shells = Vec::with_capacity(basis.shells().len());
    let mut first = 0;
    for shell in basis.shells() {
        let n = shell.exponents.len();
        let (grad_exponents, grad_coefficients) = normalization::parameter_gradient(
            shell,
            &terms.plain[first..first + n],
            &terms.raised[first..first + n],
        );
        first += n;
        shells.push(ShellGradient {
            atom: shell.atom,
            l: shell.l,
            exponents: shell.exponents.clone(),
            coefficients: shell.coefficients.clone(),
            grad_exponents,
            grad_coefficients,
        });
    }
    timings.fock += reduction.elapsed().as_secs_f64();
    timings.total = start.elapsed().as_secs_f64();
    Ok(RhfGradient {
        energy: scf.energy,
        shells,
        iterations: scf.iterations,
        devices: group.size(),
        timings,
    })
}

/// What every rank of a gradient run reads.
struct Shared<'a> {
    molecule: &'a Molecule,
    engine: &'a EriEngine,
    first_primitive: &'a [usize],
    setup: &'a Setup<'a>,
    options: &'a GradientOptions,
    start: Instant,
}

/// One derivative set per primitive of every shell (shell order, then primitive order), and
/// the first flat primitive index of each shell (one more entry: the total).
fn derivative_sets(basis: &Basis) -> (Vec<FunctionShell>, Vec<usize>) {
    let mut first_primitive = vec![0];
    let mut derivative_sets = Vec::new();
    for shell in basis.shells() {
        let weights = normalization::primitive_weights(shell);
        for (i, weight) in weights.into_iter().enumerate() {
            derivative_sets.push(FunctionShell::primitive_derivatives(
                shell,
                i,
                weight,
                basis.kind(),
            ));
        }
        first_primitive.push(first_primitive[first_primitive.len() - 1] + shell.exponents.len());
    }
    (derivative_sets, first_primitive)
}

/// One rank of a gradient run: the SCF, then this rank's share of the primitive terms,
/// summed over the ranks in rank order.
fn gradient_rank(
    comm: &Comm<'_>,
    shared: &Shared<'_>,
) -> Result<(RhfResult, PrimitiveTerms, GradientTimings)> {
    let options = shared.options;
    let mut timings = GradientTimings::default();
    // The SCF is the same for both implementations (`scf.serial_fock` chooses its Fock
    // build), so the two gradients differ only by their own rounding.
    let scf = scf_rank(comm, shared.setup, &options.scf)?;
    timings.scf = shared.start.elapsed().as_secs_f64();
    Fault::strike(options.scf.fault, comm.rank(), FaultPoint::Gradient)?;
    let pool = comm.device().thread_pool()?;
    let (rank, ranks) = (comm.rank(), comm.size());
    // The densities' products on a thread of their own, off the device's threads (see
    // `crate::scf::algebra_pool`).
    let clock = Instant::now();
    let densities = crate::scf::algebra_pool()?.install(|| densities_of(&scf));
    timings.fock += clock.elapsed().as_secs_f64();
    let mut terms = if options.serial {
        primitive_terms(shared, densities, None, &mut timings)
    } else {
        pool.install(|| primitive_terms(shared, densities, Some((rank, ranks)), &mut timings))
    };
    if ranks > 1 && !options.serial {
        let clock = Instant::now();
        let count = terms.raised.len();
        let mut flat = std::mem::take(&mut terms.raised);
        flat.append(&mut terms.plain);
        comm.allreduce_sum(&mut flat)?;
        terms.plain = flat.split_off(count);
        terms.raised = flat;
        timings.fock += clock.elapsed().as_secs_f64();
    }
    Ok((scf, terms, timings))
}

/// (Y_i, X_i) of every primitive from the densities P and W ([`densities_of`], row-major):
/// the overlap, core-Hamiltonian and two-electron loops of the chosen implementation, on
/// the current pool: the serial loops when `share` is `None`, else the tasks of rank
/// `share.0` of `share.1` (its part of the sum over the ranks).
fn primitive_terms(
    shared: &Shared<'_>,
    (density, energy_weighted): (Vec<f64>, Vec<f64>),
    share: Option<(usize, usize)>,
    timings: &mut GradientTimings,
) -> PrimitiveTerms {
    let setup = Instant::now();
    let density_bounds = crate::fock::shell_block_maxima(shared.engine, &density);
    let inputs = Inputs {
        engine: shared.engine,
        first_primitive: shared.first_primitive.to_vec(),
        density,
        energy_weighted,
        charges: point_charges(shared.molecule),
        threshold: shared.options.scf.schwarz_threshold,
        density_bounds,
    };
    // The two-electron tasks share the exponent derivatives of a contraction's columns and
    // compute the kets over general contractions' columns together.
    // The serial reference needs neither.
    let (families, kets) = match share {
        None => (Vec::new(), Vec::new()),
        Some(_) => (
            shared_exponents(shared.engine),
            pair_units(shared.engine, true),
        ),
    };
    let share_of = |(order, costs): (Vec<(usize, usize)>, Vec<f64>), (rank, ranks)| {
        crate::split::rank_share(&costs, rank, ranks)
            .into_iter()
            .map(|position| order[position])
            .collect::<Vec<_>>()
    };
    let (order, two_electron_tasks) = match share {
        None => (Vec::new(), Vec::new()),
        Some(share) => (
            share_of(parallel::task_order(&inputs), share),
            share_of(parallel::two_electron_order(&inputs, &families), share),
        ),
    };
    timings.two_electron += setup.elapsed().as_secs_f64();
    let serial = share.is_none();

    let clock = Instant::now();
    let mut totals = if serial {
        serial::one_electron(&inputs, |s, i, b| inputs.overlap(s, i, b))
    } else {
        parallel::one_electron(&inputs, &order, |s, i, b| inputs.overlap(s, i, b))
    };
    timings.overlap = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let core = if serial {
        serial::one_electron(&inputs, |s, i, b| inputs.core_hamiltonian(s, i, b))
    } else {
        parallel::one_electron(&inputs, &order, |s, i, b| inputs.core_hamiltonian(s, i, b))
    };
    timings.core_hamiltonian = clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    let two_electron = if serial {
        serial::two_electron(&inputs)
    } else {
        parallel::two_electron(&inputs, &families, &kets, &two_electron_tasks)
    };
    timings.two_electron += clock.elapsed().as_secs_f64();

    let clock = Instant::now();
    totals.add_all(&core);
    totals.add_all(&two_electron);
    timings.fock += clock.elapsed().as_secs_f64();
    totals
}

/// P = 2 C_occ C_occ^T and W = 2 C_occ diag(e_occ) C_occ^T from the final orbitals,
/// row-major.
fn densities_of(scf: &RhfResult) -> (Vec<f64>, Vec<f64>) {
    let nao = scf.nao;
    let occ = scf.coefficients.subcols(0, scf.occupied);
    let weighted = Mat::from_fn(nao, scf.occupied, |i, k| {
        occ[(i, k)] * scf.orbital_energies[k]
    });
    let p = occ * occ.transpose();
    let w = &weighted * occ.transpose();
    let mut density = vec![0.0; nao * nao];
    let mut energy_weighted = vec![0.0; nao * nao];
    for i in 0..nao {
        for j in 0..nao {
            // Symmetrized: the contractions read both triangles.
            density[i * nao + j] = p[(i, j)] + p[(j, i)];
            energy_weighted[i * nao + j] = w[(i, j)] + w[(j, i)];
        }
    }
    (density, energy_weighted)
}
