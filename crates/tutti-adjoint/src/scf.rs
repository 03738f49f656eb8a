//! Restricted (closed-shell) Hartree–Fock with DIIS.
//!
//! `F = H + J[P] - K[P]/2` with `P = 2 C_occ C_occ^T`; E = tr(P (H + F)) / 2 + E_nuc. The AO
//! basis is orthogonalized canonically (X = U s^(-1/2), eigenvalues of S below
//! [`ScfOptions::linear_dependence`] dropped). Guess ([`ScfOptions::guess`]): a superposition
//! of spherically averaged atomic densities ([`InitialGuess::Atoms`], the default) or the
//! core Hamiltonian; the first Fock matrix is that of the guess density, and its
//! diagonalization gives the first orbitals. DIIS extrapolates F from the last
//! [`ScfOptions::diis_vectors`] Fock matrices (from iteration [`ScfOptions::diis_start`] on)
//! with the error X^T (F P S - S P F) X.
//!
//! J and K are built incrementally: from the density change since the previous iteration,
//! added to the previous J and K, with density-weighted Schwarz screening
//! ([`FockBuilder::with_density_screening`]); every [`ScfOptions::full_rebuild_every`]-th
//! build is from the whole density, which bounds the drift of the sums. Converged when,
//! between two iterations, the energy changes by less than [`ScfOptions::energy_tolerance`]
//! and the orbital gradient of the iteration's Fock matrix and density is below
//! [`ScfOptions::gradient_tolerance`] (PySCF's criterion, the default), or, with no gradient
//! tolerance, when the energy changes that little and no density element by more than
//! [`ScfOptions::density_tolerance`] (what the basis-set gradient uses). The density change is known before an iteration's build, and a build after a
//! change within the tolerance (or after an orbital gradient within ten times its
//! tolerance) is always a full one; an iteration that meets the criteria on an incremental
//! build does not stop the SCF but makes the next build a full one. So the converged energy
//! and orbitals are always those of a full build.
//!
//! On a group of ranks ([`ScfOptions::resources`]) every rank runs this driver, replicated;
//! each J/K build is split among the ranks ([`FockBuilder::partial`]: its share of the bra
//! pairs, largest first, on its device's thread pool) and the partial sums are added in rank
//! order (`allreduce_sum`), so every rank holds the same J and K bits. Each new density (and
//! the final orbitals) is then taken from rank 0, so the ranks follow one trajectory even
//! where their pools' sizes, and so their dense linear algebra's rounding, differ. The guess
//! is computed once before the ranks start, serially, so it is the same bits for any rank or
//! thread count.

use std::time::Instant;

use faer::{Mat, MatRef, Side};
use tutti_backend::{Progress, ProgressFn, Resources};
use tutti_group::{Comm, Group};

use crate::basis::Basis;
use crate::error::{invalid, AdjointError, Result};
use crate::fock::{CoulombExchange, FockBuilder};
use crate::integrals::{kinetic, nuclear_attraction, overlap, EriEngine};
use crate::molecule::Molecule;

/// With [`ScfOptions::gradient_tolerance`], an iteration whose orbital gradient is within
/// this many times the tolerance makes the next build a full one: the gradient falls about
/// tenfold per DIIS iteration near convergence, so the build that converges is full.
const GRADIENT_LOOKAHEAD: f64 = 10.0;

/// SCF settings. Defaults: energy 1e-10 Eh and orbital gradient 1e-5 (PySCF's criterion at
/// its `conv_tol` 1e-10; density 1e-8 when the gradient tolerance is unset), 128 iterations,
/// the atomic-density
/// guess, 8 DIIS vectors from the first iteration, a full J/K rebuild every 8th build
/// (incremental builds in between), Schwarz threshold 1e-14, linear dependence 1e-9,
/// [`Resources::default`] (every GPU, else one simulated device owning all cores), threaded
/// Fock build.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ScfOptions {
    /// Largest energy change between the last two iterations at convergence, hartree.
    pub energy_tolerance: f64,
    /// Largest change of any density-matrix element between the last two iterations, when
    /// [`ScfOptions::gradient_tolerance`] is `None` (default 1e-8).
    pub density_tolerance: f64,
    /// When set (the default, [`ScfOptions::DEFAULT_GRADIENT_TOLERANCE`]), the SCF converges
    /// on the orbital gradient: when the energy changes by less than
    /// [`ScfOptions::energy_tolerance`] and the orbital gradient is below this. The orbital
    /// gradient is the norm PySCF's `conv_tol_grad` bounds: the Frobenius norm of the
    /// occupied-virtual block of the MO Fock matrix times two,
    /// `|X^T (F P S - S P F) X|_F / sqrt(2)`. PySCF's default, `sqrt(conv_tol)`, is 1e-5 for
    /// `conv_tol` 1e-10: the energy is then within about 1e-12 Eh of the tightly converged
    /// one (the error is quadratic in the gradient), but orbitals and density only to about
    /// the gradient, too loose for a basis-set gradient, which sets `None`: converge on the
    /// density change ([`ScfOptions::density_tolerance`]) instead.
    pub gradient_tolerance: Option<f64>,
    /// Iteration limit; [`AdjointError::NotConverged`] beyond it.
    pub max_iterations: usize,
    /// DIIS subspace size (0 or 1 disables DIIS).
    pub diis_vectors: usize,
    /// The first iteration whose Fock matrix enters the DIIS subspace (at least 1; default
    /// 1); earlier iterations diagonalize their own Fock matrix. (Leaving out the Fock matrix
    /// of the atomic guess, 2, measured the same iteration counts; 3 one more.)
    pub diis_start: usize,
    /// The starting density (default [`InitialGuess::Atoms`]).
    pub guess: InitialGuess,
    /// Every this many J/K builds one is from the whole density; the others are from the
    /// density change since the previous iteration, added to the previous J and K (at least
    /// 1; 1 makes every build a full one; default 8). Whatever the setting, the first build
    /// and every build after a density change within [`ScfOptions::density_tolerance`] (so
    /// the converged iteration's) are full ones.
    pub full_rebuild_every: usize,
    /// Quartets with Schwarz bound Q_ab Q_cd below this are skipped, and so are those whose
    /// bound times the largest element of the density (or, in an incremental build, of the
    /// density change) over the quartet's shell blocks is below it.
    pub schwarz_threshold: f64,
    /// Eigenvalues of S below this are dropped from the orthogonal basis.
    pub linear_dependence: f64,
    /// Where the run goes: one rank per selected device, each J/K build split among them
    /// and threaded on each device's pool. Device-selection errors are
    /// [`AdjointError::Group`]; a cap that cannot hold the run's objects
    /// ([`crate::plan`]) is [`AdjointError::Plan`], before any work.
    pub resources: Resources,
    /// Use the serial reference Fock build (the whole build on every rank, on the rank's
    /// thread, no split) instead of the split, threaded one.
    pub serial_fock: bool,
    /// Called by rank 0 after each iteration's energy: task `"scf"`, stage `"iteration"`,
    /// `done` the iteration, `total` the limit, `value` the energy (hartree). Default `None`.
    pub progress: Option<ProgressFn>,
    /// Test hook: make one rank fail or panic at a chosen point (see [`Fault`]). Always
    /// `None` outside tests of the failure paths.
    #[doc(hidden)]
    pub fault: Option<Fault>,
}

/// A failure injected on one rank, for tests that an error or panic on one rank surfaces as
/// itself with no hang. Not part of the stable API.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The rank that fails.
    pub rank: usize,
    /// Where it fails.
    pub at: FaultPoint,
    /// Panic instead of returning [`AdjointError::InjectedFault`].
    pub panic: bool,
}

/// Where a [`Fault`] strikes.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultPoint {
    /// Before the SCF's n-th J/K build (1-based), while the other ranks enter it.
    FockBuild(usize),
    /// Before the gradient's loops, after the SCF.
    Gradient,
}

impl Fault {
    /// Fails (or panics) when `rank` and `at` are this fault's.
    pub(crate) fn strike(fault: Option<Fault>, rank: usize, at: FaultPoint) -> Result<()> {
        match fault {
            Some(fault) if fault.rank == rank && fault.at == at => {
                if fault.panic {
                    panic!("injected panic on rank {rank}");
                }
                Err(AdjointError::InjectedFault { rank })
            }
            _ => Ok(()),
        }
    }
}

/// Where the SCF starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitialGuess {
    /// The orbitals of the core Hamiltonian H = T + V, occupied by aufbau.
    Core,
    /// A superposition of atomic densities (SAD): for each distinct atom (element and
    /// shells), a spherically averaged RHF of the neutral atom alone in its own shells of the
    /// molecule's basis, with the electrons of each angular momentum of the element's
    /// ground-state configuration spread evenly over the functions of its partially filled
    /// shell; the molecular guess is the block-diagonal sum of the atomic densities, not
    /// rescaled (its trace with S is the neutral atoms' electron count, which the first
    /// diagonalization corrects for a charged molecule). Falls back to [`InitialGuess::Core`]
    /// when an atom's shells cannot hold its configuration (too few functions of some l).
    #[default]
    Atoms,
}

impl Default for ScfOptions {
    fn default() -> Self {
        Self {
            energy_tolerance: 1e-10,
            density_tolerance: 1e-8,
            gradient_tolerance: Some(Self::DEFAULT_GRADIENT_TOLERANCE),
            max_iterations: 128,
            diis_vectors: 8,
            diis_start: 1,
            guess: InitialGuess::default(),
            full_rebuild_every: 8,
            schwarz_threshold: 1e-14,
            linear_dependence: 1e-9,
            resources: Resources::default(),
            serial_fock: false,
            progress: None,
            fault: None,
        }
    }
}

impl ScfOptions {
    /// The default orbital-gradient tolerance, PySCF's `conv_tol_grad` at its `conv_tol`
    /// 1e-10 (`sqrt(conv_tol)`).
    pub const DEFAULT_GRADIENT_TOLERANCE: f64 = 1e-5;

    /// These options running on `resources`.
    pub fn with_resources(mut self, resources: Resources) -> Self {
        self.resources = resources;
        self
    }

    /// These options with a progress callback (see [`ScfOptions::progress`]).
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// These options with a test fault (see [`Fault`]).
    #[doc(hidden)]
    pub fn with_fault(mut self, fault: Option<Fault>) -> Self {
        self.fault = fault;
        self
    }

    /// The defaults with the serial reference Fock build.
    pub fn with_serial_fock(mut self, serial: bool) -> Self {
        self.serial_fock = serial;
        self
    }

    /// The defaults with another iteration limit.
    pub fn with_max_iterations(mut self, iterations: usize) -> Self {
        self.max_iterations = iterations;
        self
    }

    /// These options converging on the orbital gradient (see
    /// [`ScfOptions::gradient_tolerance`]; `None` converges on the density change,
    /// [`ScfOptions::density_tolerance`]).
    pub fn with_gradient_tolerance(mut self, tolerance: Option<f64>) -> Self {
        self.gradient_tolerance = tolerance;
        self
    }

    /// These options starting from `guess` (see [`ScfOptions::guess`]).
    pub fn with_guess(mut self, guess: InitialGuess) -> Self {
        self.guess = guess;
        self
    }

    /// These options with a full J/K rebuild every `builds` builds (see
    /// [`ScfOptions::full_rebuild_every`]).
    pub fn with_full_rebuild_every(mut self, builds: usize) -> Self {
        self.full_rebuild_every = builds;
        self
    }

    /// These options with `vectors` DIIS vectors, the first from iteration `start` (see
    /// [`ScfOptions::diis_vectors`] and [`ScfOptions::diis_start`]).
    pub fn with_diis(mut self, vectors: usize, start: usize) -> Self {
        self.diis_vectors = vectors;
        self.diis_start = start;
        self
    }
}

/// Wall-clock times of an RHF run, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    /// One-electron integrals, shell-pair data and Schwarz bounds, and the initial guess.
    pub setup: f64,
    /// The initial guess's atomic SCFs (part of `setup`; 0 for the core guess, which each
    /// rank diagonalizes in its first iteration).
    pub guess: f64,
    /// All Fock (J/K) builds together.
    pub fock: f64,
    /// The whole SCF including setup.
    pub total: f64,
    /// Number of J/K builds.
    pub fock_builds: usize,
    /// How many of them were from the whole density (the others from a density change).
    pub full_fock_builds: usize,
}

/// A converged RHF calculation.
#[derive(Clone, Debug)]
pub struct RhfResult {
    /// Total energy E_el + E_nuc, hartree.
    pub energy: f64,
    /// Electronic energy, hartree.
    pub electronic_energy: f64,
    /// Nuclear repulsion, hartree.
    pub nuclear_repulsion: f64,
    /// Orbital energies, ascending, hartree (nmo of them).
    pub orbital_energies: Vec<f64>,
    /// MO coefficients (nao x nmo), columns in the order of `orbital_energies`.
    pub coefficients: Mat<f64>,
    /// Total density P = 2 C_occ C_occ^T (nao x nao).
    pub density: Mat<f64>,
    /// Doubly occupied orbitals.
    pub occupied: usize,
    /// Number of AOs.
    pub nao: usize,
    /// SCF iterations (Fock builds).
    pub iterations: usize,
    /// Devices (ranks) the run was split among.
    pub devices: usize,
    /// Last energy change, hartree.
    pub delta_energy: f64,
    /// Last largest density change.
    pub delta_density: f64,
    /// The orbital gradient of the converged iteration's Fock matrix and density (the norm
    /// of [`ScfOptions::gradient_tolerance`]).
    pub orbital_gradient: f64,
    /// Where the time went.
    pub timings: Timings,
}

/// Runs closed-shell RHF for `molecule` in `basis` on the devices of `options.resources`.
///
/// Errors: an odd electron count, more occupied orbitals than independent functions, bad
/// options, the devices ([`AdjointError::Group`]), a plan that does not fit the caps
/// ([`AdjointError::Plan`], before any work), a failed eigendecomposition, or
/// [`AdjointError::NotConverged`]. An error on one rank is returned as that rank's error.
pub fn rhf(molecule: &Molecule, basis: &Basis, options: &ScfOptions) -> Result<RhfResult> {
    validate(options)?;
    occupied_orbitals(molecule)?;
    let group = Group::from_resources(&options.resources, crate::GPU_USE)?;
    rhf_on(&group, molecule, basis, options)
}

/// [`rhf`] on a group made by the caller: the way to run the SCF across processes, on a
/// [`Group::spanning`] group whose other ranks are other MPI processes running the same
/// program on the same molecule, basis and options. The J/K builds are split among all
/// ranks and reduced in rank order, and rank 0's density is broadcast each cycle, so every
/// process returns the same result, that of a group of as many threads.
/// `options.resources` still gives the memory caps the plan is checked against; the group
/// gives the devices.
pub fn rhf_on(
    group: &Group,
    molecule: &Molecule,
    basis: &Basis,
    options: &ScfOptions,
) -> Result<RhfResult> {
    // A failure before the run releases the other processes of a spanning group.
    group.before_run(validate(options).and_then(|()| {
        occupied_orbitals(molecule)?;
        crate::plan::check(
            group,
            &options.resources,
            crate::plan::scf_objects(basis, options, group.devices()),
        )
    }))?;
    let start = Instant::now();
    let engine = EriEngine::new(basis);
    let setup = group.before_run(Setup::new(molecule, basis, options, &engine, start))?;
    let results = group.run(|comm| scf_rank(comm, &setup, options))?;
    first_rank(results)
}

/// The density (nao x nao) the SCF of `molecule` in `basis` starts from under
/// `options.guess`: for [`InitialGuess::Atoms`] the block-diagonal superposition of atomic
/// densities (computed serially before any rank starts, so the same bits whatever
/// `options.resources`; the core guess where it falls back); for [`InitialGuess::Core`] the
/// aufbau density P = 2 C_occ C_occ^T of the core Hamiltonian's orbitals (which the SCF
/// computes on rank 0's pool, so equal to this up to the dense linear algebra's rounding).
///
/// Errors: bad options, an odd electron count, more occupied orbitals than independent
/// functions, a failed eigendecomposition.
pub fn initial_density(
    molecule: &Molecule,
    basis: &Basis,
    options: &ScfOptions,
) -> Result<Mat<f64>> {
    validate(options)?;
    let occupied = occupied_orbitals(molecule)?;
    if options.guess == InitialGuess::Atoms {
        if let Some(density) = crate::guess::atomic_densities(molecule, basis, options)? {
            return Ok(density);
        }
    }
    let s = overlap(basis);
    let h = kinetic(basis) + nuclear_attraction(basis, molecule);
    let x = orthogonalizer_for(s.as_ref(), options.linear_dependence, occupied)?;
    let (_, orbitals) = diagonalize(h.as_ref(), x.as_ref())?;
    Ok(density_of(orbitals.as_ref(), occupied))
}

/// Rank 0's result of a group run (every rank returns the same bits).
pub(crate) fn first_rank<R>(results: Vec<R>) -> Result<R> {
    results.into_iter().next().ok_or_else(|| {
        // A group has at least one rank (Group::new refuses none).
        invalid("resources", "no rank returned a result")
    })
}

/// Doubly occupied orbitals of a closed-shell `molecule`; an odd electron count is an error.
pub(crate) fn occupied_orbitals(molecule: &Molecule) -> Result<usize> {
    let electrons = molecule.electron_count();
    if !electrons.is_multiple_of(2) {
        return Err(invalid(
            "molecule",
            format!("{electrons} electrons; closed-shell RHF needs an even count"),
        ));
    }
    Ok(electrons / 2)
}

/// What every rank's SCF reads, built once before the ranks start: one-electron matrices,
/// the orthogonalizer, the atomic-density guess and the J/K builder over a shared ERI engine.
pub(crate) struct Setup<'e> {
    s: Mat<f64>,
    h: Mat<f64>,
    x: Mat<f64>,
    /// The starting density when it does not come from the core Hamiltonian.
    guess: Option<Mat<f64>>,
    /// Seconds spent on `guess`.
    guess_seconds: f64,
    builder: FockBuilder<'e>,
    occupied: usize,
    nuclear_repulsion: f64,
    nao: usize,
    /// When the run started (before the engine was built).
    start: Instant,
    /// Seconds spent in setup (the engine included).
    seconds: f64,
}

impl<'e> Setup<'e> {
    /// The setup of `molecule` in `basis` over `engine` (whose basis shells are `basis`'s),
    /// the run having started at `start`.
    pub(crate) fn new(
        molecule: &Molecule,
        basis: &Basis,
        options: &ScfOptions,
        engine: &'e EriEngine,
        start: Instant,
    ) -> Result<Self> {
        let occupied = occupied_orbitals(molecule)?;
        let s = overlap(basis);
        let h = kinetic(basis) + nuclear_attraction(basis, molecule);
        let builder =
            FockBuilder::new(engine, options.schwarz_threshold).with_density_screening(true);
        let x = orthogonalizer_for(s.as_ref(), options.linear_dependence, occupied)?;
        let guess_start = Instant::now();
        let guess = match options.guess {
            InitialGuess::Core => None,
            InitialGuess::Atoms => crate::guess::atomic_densities(molecule, basis, options)?,
        };
        let guess_seconds = guess_start.elapsed().as_secs_f64();
        Ok(Self {
            s,
            h,
            x,
            guess,
            guess_seconds,
            builder,
            occupied,
            nuclear_repulsion: molecule.nuclear_repulsion(),
            nao: basis.nao(),
            start,
            seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// A pool of one thread for the SCF's dense linear algebra (faer, with its SIMD code).
///
/// Kept off the device's threads on purpose: faer's AVX code leaves the upper halves of the
/// vector registers in use, and on such a thread the integral kernels' SSE instructions then
/// ran 1.7x slower for the rest of the run (c2h6/def2-TZVP: 0.51 s per J/K build on the
/// device's two threads after a diagonalization had run on them, 0.30 s on two fresh
/// threads; measured, and gone when the kernels were compiled to AVX encodings). The
/// matrices are small (nao x nao), so one thread loses nothing, and the results no longer
/// depend on the device's thread count.
pub(crate) fn algebra_pool() -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "tutti-scf-algebra".into())
        .build()
        .map_err(|err| {
            AdjointError::LinearAlgebra(format!("building the SCF's algebra thread: {err}"))
        })
}

/// Makes every rank's `matrix` a copy of rank 0's (a no-op on a group of one).
fn agree(comm: &Comm<'_>, matrix: &mut Mat<f64>) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    let (rows, cols) = (matrix.nrows(), matrix.ncols());
    let mut values: Vec<f64> = (0..cols)
        .flat_map(|j| (0..rows).map(move |i| (i, j)))
        .map(|(i, j)| matrix[(i, j)])
        .collect();
    comm.broadcast_slice(0, &mut values)?;
    *matrix = Mat::from_fn(rows, cols, |i, j| values[j * rows + i]);
    Ok(())
}

/// One rank's SCF: the replicated driver, with each J/K build split among the ranks of
/// `comm` and threaded on the rank's device pool.
pub(crate) fn scf_rank(
    comm: &Comm<'_>,
    setup: &Setup<'_>,
    options: &ScfOptions,
) -> Result<RhfResult> {
    let pool = comm.device().thread_pool()?;
    let algebra = algebra_pool()?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let Setup {
        s,
        h,
        x,
        guess,
        builder,
        occupied,
        nuclear_repulsion,
        ..
    } = setup;
    let (occupied, nuclear_repulsion) = (*occupied, *nuclear_repulsion);
    let mut timings = Timings {
        setup: setup.seconds,
        guess: setup.guess_seconds,
        ..Timings::default()
    };
    let rebuild_every = options.full_rebuild_every.max(1);

    let mut density = match guess {
        Some(guess) => guess.clone(),
        None => algebra.install(|| {
            diagonalize(h.as_ref(), x.as_ref())
                .map(|(_, guess)| density_of(guess.as_ref(), occupied))
        })?,
    };
    agree(comm, &mut density)?;
    let mut diis = Diis::new(options.diis_vectors);
    // J and K of the previous iteration and the density they are of: the base of the next
    // incremental build.
    let mut built: Option<(CoulombExchange, Mat<f64>)> = None;
    let mut incremental_builds = 0usize;
    let mut previous_energy = f64::NAN;
    let mut delta_energy = f64::INFINITY;
    let mut delta_density = f64::INFINITY;
    let mut orbital_gradient = f64::INFINITY;
    // The last iteration met the criteria on an incremental build: the next is a full one.
    let mut confirm = false;
    for iteration in 1..=options.max_iterations {
        Fault::strike(options.fault, rank, FaultPoint::FockBuild(iteration))?;
        let fock_start = Instant::now();
        // An iteration can only converge when the density change that led to it is within
        // tolerance, known before the build: such an iteration's build is a full one, so the
        // final energy is always that of a full build.
        let near_convergence = match options.gradient_tolerance {
            None => delta_density < options.density_tolerance,
            Some(tolerance) => {
                delta_density < options.density_tolerance
                    || orbital_gradient < GRADIENT_LOOKAHEAD * tolerance
            }
        };
        let full = built.is_none()
            || incremental_builds + 1 >= rebuild_every
            || near_convergence
            || confirm
            // The last allowed iteration cannot confirm on a next one.
            || iteration == options.max_iterations;
        let build = |matrix: MatRef<'_, f64>| -> Result<CoulombExchange> {
            if options.serial_fock {
                return Ok(builder.serial(matrix));
            }
            let mut partial = pool.install(|| builder.partial(matrix, rank, ranks));
            comm.allreduce_sum(partial.as_mut_slice())?;
            Ok(partial.finish())
        };
        let jk = match built.take() {
            Some((previous, previous_density)) if !full => {
                let change = &density - &previous_density;
                let CoulombExchange { coulomb, exchange } = build(change.as_ref())?;
                CoulombExchange {
                    coulomb: previous.coulomb + coulomb,
                    exchange: previous.exchange + exchange,
                }
            }
            _ => build(density.as_ref())?,
        };
        if full {
            incremental_builds = 0;
            timings.full_fock_builds += 1;
        } else {
            incremental_builds += 1;
        }
        timings.fock += fock_start.elapsed().as_secs_f64();
        timings.fock_builds += 1;
        let fock = h + &jk.coulomb - &jk.exchange * 0.5;
        let electronic_energy = 0.5 * trace_product(density.as_ref(), (h + &fock).as_ref());
        let energy = electronic_energy + nuclear_repulsion;
        if iteration > 1 {
            delta_energy = (energy - previous_energy).abs();
        }
        if rank == 0 {
            tutti_backend::progress::report(
                options.progress.as_ref(),
                Progress {
                    task: "scf",
                    stage: "iteration",
                    done: iteration as u64,
                    total: options.max_iterations as u64,
                    value: Some(energy),
                },
            );
        }
        // The DIIS error, the commutator in the orthogonal basis: its norm is the orbital
        // gradient.
        let error = algebra.install(|| {
            let fps = &fock * &density * s;
            let commutator = &fps - fps.transpose();
            x.transpose() * &commutator * x
        });
        orbital_gradient = error.norm_l2() / std::f64::consts::SQRT_2;
        let converged = delta_energy < options.energy_tolerance
            && match options.gradient_tolerance {
                None => delta_density < options.density_tolerance,
                Some(tolerance) => orbital_gradient < tolerance,
            };
        confirm = converged && !full;
        if converged && full {
            let (orbital_energies, mut coefficients) =
                algebra.install(|| diagonalize(fock.as_ref(), x.as_ref()))?;
            agree(comm, &mut coefficients)?;
            // The density of the orbitals returned (the energy is that of the density that
            // built this Fock matrix: they differ by about the orbital gradient, the energy by
            // its square).
            let density = algebra.install(|| density_of(coefficients.as_ref(), occupied));
            let mut orbital_energies = orbital_energies;
            if ranks > 1 {
                comm.broadcast_slice(0, &mut orbital_energies)?;
            }
            timings.total = setup.start.elapsed().as_secs_f64();
            return Ok(RhfResult {
                energy,
                electronic_energy,
                nuclear_repulsion,
                orbital_energies,
                coefficients,
                density,
                occupied,
                nao: setup.nao,
                iterations: iteration,
                devices: ranks,
                delta_energy,
                delta_density,
                orbital_gradient,
                timings,
            });
        }
        previous_energy = energy;
        let diis_iteration = iteration >= options.diis_start;
        let mut next = algebra.install(|| {
            let extrapolated = if diis_iteration {
                diis.extrapolate(fock, error)
            } else {
                fock
            };
            diagonalize(extrapolated.as_ref(), x.as_ref())
                .map(|(_, coefficients)| density_of(coefficients.as_ref(), occupied))
        })?;
        agree(comm, &mut next)?;
        delta_density = max_abs_difference(next.as_ref(), density.as_ref());
        built = Some((jk, std::mem::replace(&mut density, next)));
    }
    Err(AdjointError::NotConverged {
        iterations: options.max_iterations,
        delta_energy,
        delta_density,
        orbital_gradient,
        energy_tolerance: options.energy_tolerance,
        density_tolerance: options.density_tolerance,
        gradient_tolerance: options.gradient_tolerance,
    })
}

pub(crate) fn validate(options: &ScfOptions) -> Result<()> {
    let positive = |name: &'static str, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(invalid(name, format!("{value}; expected finite and > 0")))
        }
    };
    positive("energy_tolerance", options.energy_tolerance)?;
    positive("density_tolerance", options.density_tolerance)?;
    if let Some(tolerance) = options.gradient_tolerance {
        positive("gradient_tolerance", tolerance)?;
    }
    positive("linear_dependence", options.linear_dependence)?;
    if !(options.schwarz_threshold.is_finite() && options.schwarz_threshold >= 0.0) {
        return Err(invalid(
            "schwarz_threshold",
            format!("{}; expected finite and >= 0", options.schwarz_threshold),
        ));
    }
    if options.max_iterations == 0 {
        return Err(invalid("max_iterations", "0; expected at least 1"));
    }
    if options.diis_start == 0 {
        return Err(invalid("diis_start", "0; expected at least 1"));
    }
    if options.full_rebuild_every == 0 {
        return Err(invalid("full_rebuild_every", "0; expected at least 1"));
    }
    Ok(())
}

/// [`orthogonalizer`], refused when it leaves fewer independent functions than `occupied`
/// orbitals.
fn orthogonalizer_for(s: MatRef<'_, f64>, threshold: f64, occupied: usize) -> Result<Mat<f64>> {
    let x = orthogonalizer(s, threshold)?;
    if occupied > x.ncols() {
        return Err(invalid(
            "basis",
            format!(
                "{occupied} occupied orbitals but only {} independent functions",
                x.ncols()
            ),
        ));
    }
    Ok(x)
}

/// X = U s^(-1/2) over the eigenvalues of S above `threshold` (nao x nmo).
fn orthogonalizer(s: MatRef<'_, f64>, threshold: f64) -> Result<Mat<f64>> {
    let evd = s.self_adjoint_eigen(Side::Lower).map_err(|err| {
        AdjointError::LinearAlgebra(format!("overlap eigendecomposition: {err:?}"))
    })?;
    let values: Vec<f64> = evd.S().column_vector().iter().copied().collect();
    let kept: Vec<usize> = (0..values.len())
        .filter(|&i| values[i] > threshold)
        .collect();
    let u = evd.U();
    Ok(Mat::from_fn(s.nrows(), kept.len(), |i, k| {
        u[(i, kept[k])] / values[kept[k]].sqrt()
    }))
}

/// Eigenvalues (ascending) and AO coefficients C = X C' of X^T F X.
fn diagonalize(fock: MatRef<'_, f64>, x: MatRef<'_, f64>) -> Result<(Vec<f64>, Mat<f64>)> {
    let transformed = x.transpose() * fock * x;
    // Symmetrize against round-off before the self-adjoint solver reads one triangle.
    let symmetric = Mat::from_fn(transformed.nrows(), transformed.ncols(), |i, j| {
        0.5 * (transformed[(i, j)] + transformed[(j, i)])
    });
    let evd = symmetric
        .self_adjoint_eigen(Side::Lower)
        .map_err(|err| AdjointError::LinearAlgebra(format!("Fock eigendecomposition: {err:?}")))?;
    let values = evd.S().column_vector().iter().copied().collect();
    Ok((values, x * evd.U()))
}

/// P = 2 C_occ C_occ^T.
fn density_of(coefficients: MatRef<'_, f64>, occupied: usize) -> Mat<f64> {
    let occ = coefficients.subcols(0, occupied);
    let mut density = occ * occ.transpose();
    density *= faer::Scale(2.0);
    density
}

/// tr(A B), summed in row-major order of A.
pub(crate) fn trace_product(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut sum = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            sum += a[(i, j)] * b[(j, i)];
        }
    }
    sum
}

/// max |A - B| over the elements.
pub(crate) fn max_abs_difference(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut largest: f64 = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            largest = largest.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    largest
}

/// Pulay's DIIS over the last few (Fock, error) pairs.
pub(crate) struct Diis {
    capacity: usize,
    focks: Vec<Mat<f64>>,
    errors: Vec<Mat<f64>>,
}

impl Diis {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            focks: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Stores the pair and returns the extrapolated Fock matrix (the given one while fewer
    /// than two pairs are stored or the DIIS equations are singular).
    pub(crate) fn extrapolate(&mut self, fock: Mat<f64>, error: Mat<f64>) -> Mat<f64> {
        if self.capacity < 2 {
            return fock;
        }
        if self.focks.len() == self.capacity {
            self.focks.remove(0);
            self.errors.remove(0);
        }
        self.focks.push(fock);
        self.errors.push(error);
        while self.focks.len() >= 2 {
            let n = self.focks.len();
            let mut system = vec![0.0; (n + 1) * (n + 1)];
            let mut rhs = vec![0.0; n + 1];
            for i in 0..n {
                for j in 0..=i {
                    let value = trace_product(self.errors[i].as_ref(), self.errors[j].transpose());
                    system[i * (n + 1) + j] = value;
                    system[j * (n + 1) + i] = value;
                }
                system[i * (n + 1) + n] = -1.0;
                system[n * (n + 1) + i] = -1.0;
            }
            // Scale the error overlaps to a largest diagonal of 1: the weights do not change,
            // and near convergence (errors of 1e-7, overlaps of 1e-14) the singularity test
            // of `solve` then still tells dependent errors from small ones.
            let largest = (0..n).fold(0.0f64, |m, i| m.max(system[i * (n + 1) + i]));
            if largest > 0.0 {
                for i in 0..n {
                    for j in 0..n {
                        system[i * (n + 1) + j] /= largest;
                    }
                }
            }
            rhs[n] = -1.0;
            if let Some(weights) = solve(&mut system, &mut rhs, n + 1) {
                let mut out = Mat::<f64>::zeros(self.focks[0].nrows(), self.focks[0].ncols());
                for (weight, fock) in weights.iter().zip(&self.focks) {
                    out += fock * faer::Scale(*weight);
                }
                return out;
            }
            // Singular: forget the oldest pair and try again.
            self.focks.remove(0);
            self.errors.remove(0);
        }
        self.focks[self.focks.len() - 1].clone()
    }
}

/// Solves a small dense system by Gaussian elimination with partial pivoting; `None` when
/// a pivot vanishes relative to the matrix scale.
fn solve(matrix: &mut [f64], rhs: &mut [f64], n: usize) -> Option<Vec<f64>> {
    let scale = matrix.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for column in 0..n {
        let pivot = (column..n).max_by(|&a, &b| {
            matrix[a * n + column]
                .abs()
                .total_cmp(&matrix[b * n + column].abs())
        })?;
        if matrix[pivot * n + column].abs() <= 1e-14 * scale {
            return None;
        }
        if pivot != column {
            for k in 0..n {
                matrix.swap(pivot * n + k, column * n + k);
            }
            rhs.swap(pivot, column);
        }
        for row in (column + 1)..n {
            let factor = matrix[row * n + column] / matrix[column * n + column];
            for k in column..n {
                matrix[row * n + k] -= factor * matrix[column * n + k];
            }
            rhs[row] -= factor * rhs[column];
        }
    }
    let mut out = vec![0.0; n];
    for row in (0..n).rev() {
        let mut value = rhs[row];
        for k in (row + 1)..n {
            value -= matrix[row * n + k] * out[k];
        }
        out[row] = value / matrix[row * n + row];
    }
    out.truncate(n - 1);
    Some(out)
}
