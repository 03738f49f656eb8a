//! Restricted (closed-shell) Hartree–Fock with DIIS.
//!
//! `F = H + J[P] - K[P]/2` with `P = 2 C_occ C_occ^T`; E = tr(P (H + F)) / 2 + E_nuc. The AO
//! basis is orthogonalized canonically (X = U s^(-1/2), eigenvalues of S below
//! [`ScfOptions::linear_dependence`] dropped). Guess: the core Hamiltonian. DIIS
//! extrapolates F from the last [`ScfOptions::diis_vectors`] Fock matrices with the error
//! X^T (F P S - S P F) X. Converged when, between two iterations, the energy changes by less
//! than [`ScfOptions::energy_tolerance`] and no density element by more than
//! [`ScfOptions::density_tolerance`].

use std::time::Instant;

use faer::{Mat, MatRef, Side};

use crate::basis::Basis;
use crate::error::{invalid, AdjointError, Result};
use crate::fock::{CoulombExchange, FockBuilder};
use crate::integrals::{kinetic, nuclear_attraction, overlap, EriEngine};
use crate::molecule::Molecule;

/// SCF settings. Defaults: energy 1e-10 Eh, density 1e-8, 128 iterations, 8 DIIS vectors,
/// Schwarz threshold 1e-14, linear dependence 1e-9, `threads = 0` (the global rayon pool),
/// threaded Fock build.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ScfOptions {
    /// Largest energy change between the last two iterations at convergence, hartree.
    pub energy_tolerance: f64,
    /// Largest change of any density-matrix element between the last two iterations.
    pub density_tolerance: f64,
    /// Iteration limit; [`AdjointError::NotConverged`] beyond it.
    pub max_iterations: usize,
    /// DIIS subspace size (0 or 1 disables DIIS).
    pub diis_vectors: usize,
    /// Quartets with Schwarz bound Q_ab Q_cd below this are skipped.
    pub schwarz_threshold: f64,
    /// Eigenvalues of S below this are dropped from the orthogonal basis.
    pub linear_dependence: f64,
    /// Threads of the Fock build: 0 = the global rayon pool (`RAYON_NUM_THREADS` applies),
    /// n >= 1 = a dedicated pool of n threads, at most [`max_threads`] (more is
    /// [`AdjointError::TooManyThreads`]).
    pub threads: usize,
    /// Use the serial reference Fock build instead of the threaded one.
    pub serial_fock: bool,
}

impl Default for ScfOptions {
    fn default() -> Self {
        Self {
            energy_tolerance: 1e-10,
            density_tolerance: 1e-8,
            max_iterations: 128,
            diis_vectors: 8,
            schwarz_threshold: 1e-14,
            linear_dependence: 1e-9,
            threads: 0,
            serial_fock: false,
        }
    }
}

impl ScfOptions {
    /// The defaults with `threads` set.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
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
}

/// Wall-clock times of an RHF run, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    /// One-electron integrals, shell-pair data and Schwarz bounds.
    pub setup: f64,
    /// All Fock (J/K) builds together.
    pub fock: f64,
    /// The whole SCF including setup.
    pub total: f64,
    /// Number of J/K builds.
    pub fock_builds: usize,
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
    /// Last energy change, hartree.
    pub delta_energy: f64,
    /// Last largest density change.
    pub delta_density: f64,
    /// Where the time went.
    pub timings: Timings,
}

/// Runs closed-shell RHF for `molecule` in `basis`.
///
/// Errors: an odd electron count, more occupied orbitals than independent functions, bad
/// options, a failed eigendecomposition, or [`AdjointError::NotConverged`].
pub fn rhf(molecule: &Molecule, basis: &Basis, options: &ScfOptions) -> Result<RhfResult> {
    validate(options)?;
    let pool = thread_pool(options.threads)?;
    run(molecule, basis, options, pool.as_ref())
}

/// The most threads a dedicated pool may have: 4 per core the system reports
/// (`std::thread::available_parallelism`, 1 if unknown), and never fewer than 64, so that a
/// thread count portable across machines of modest size is always accepted. More threads only
/// oversubscribe the cores; thousands cost seconds to start and can exhaust the process's
/// thread limit.
pub fn max_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    cores.saturating_mul(4).max(64)
}

/// The pool that `threads` asks for: `None` (the current/global pool) for 0, else a dedicated
/// pool of that many threads.
///
/// Errors: [`AdjointError::TooManyThreads`] above [`max_threads`], or the pool failing to
/// start.
pub(crate) fn thread_pool(threads: usize) -> Result<Option<rayon::ThreadPool>> {
    let limit = max_threads();
    match threads {
        0 => Ok(None),
        n if n > limit => Err(AdjointError::TooManyThreads {
            requested: n,
            limit,
        }),
        n => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map(Some)
            .map_err(|err| AdjointError::ThreadPool(err.to_string())),
    }
}

/// [`rhf`] with the threaded Fock build on a caller's pool (e.g. a device's,
/// `tutti_backend::Device::thread_pool`); `options.threads` is ignored.
pub fn rhf_on_pool(
    molecule: &Molecule,
    basis: &Basis,
    options: &ScfOptions,
    pool: &rayon::ThreadPool,
) -> Result<RhfResult> {
    validate(options)?;
    run(molecule, basis, options, Some(pool))
}

fn run(
    molecule: &Molecule,
    basis: &Basis,
    options: &ScfOptions,
    pool: Option<&rayon::ThreadPool>,
) -> Result<RhfResult> {
    let start = Instant::now();
    let electrons = molecule.electron_count();
    if !electrons.is_multiple_of(2) {
        return Err(invalid(
            "molecule",
            format!("{electrons} electrons; closed-shell RHF needs an even count"),
        ));
    }
    let occupied = electrons / 2;
    let s = overlap(basis);
    let h = kinetic(basis) + nuclear_attraction(basis, molecule);
    let engine = EriEngine::new(basis);
    let builder = FockBuilder::new(&engine, options.schwarz_threshold);
    let x = orthogonalizer(s.as_ref(), options.linear_dependence)?;
    if occupied > x.ncols() {
        return Err(invalid(
            "basis",
            format!(
                "{occupied} occupied orbitals but only {} independent functions",
                x.ncols()
            ),
        ));
    }
    let nuclear_repulsion = molecule.nuclear_repulsion();
    let mut timings = Timings {
        setup: start.elapsed().as_secs_f64(),
        ..Timings::default()
    };

    let (_, guess) = diagonalize(h.as_ref(), x.as_ref())?;
    let mut density = density_of(guess.as_ref(), occupied);
    let mut diis = Diis::new(options.diis_vectors);
    let mut previous_energy = f64::NAN;
    let mut delta_energy = f64::INFINITY;
    let mut delta_density = f64::INFINITY;
    for iteration in 1..=options.max_iterations {
        let fock_start = Instant::now();
        let CoulombExchange { coulomb, exchange } = if options.serial_fock {
            builder.serial(density.as_ref())
        } else {
            builder.threaded(density.as_ref(), pool)
        };
        timings.fock += fock_start.elapsed().as_secs_f64();
        timings.fock_builds += 1;
        let fock = &h + &coulomb - exchange * 0.5;
        let electronic_energy = 0.5 * trace_product(density.as_ref(), (&h + &fock).as_ref());
        let energy = electronic_energy + nuclear_repulsion;
        if iteration > 1 {
            delta_energy = (energy - previous_energy).abs();
        }
        if delta_energy < options.energy_tolerance && delta_density < options.density_tolerance {
            let (orbital_energies, coefficients) = diagonalize(fock.as_ref(), x.as_ref())?;
            timings.total = start.elapsed().as_secs_f64();
            return Ok(RhfResult {
                energy,
                electronic_energy,
                nuclear_repulsion,
                orbital_energies,
                coefficients,
                density,
                occupied,
                nao: basis.nao(),
                iterations: iteration,
                delta_energy,
                delta_density,
                timings,
            });
        }
        previous_energy = energy;
        let fps = &fock * &density * &s;
        let commutator = &fps - fps.transpose();
        let error = x.transpose() * &commutator * &x;
        let extrapolated = diis.extrapolate(fock, error);
        let (_, coefficients) = diagonalize(extrapolated.as_ref(), x.as_ref())?;
        let next = density_of(coefficients.as_ref(), occupied);
        delta_density = max_abs_difference(next.as_ref(), density.as_ref());
        density = next;
    }
    Err(AdjointError::NotConverged {
        iterations: options.max_iterations,
        delta_energy,
        delta_density,
        energy_tolerance: options.energy_tolerance,
        density_tolerance: options.density_tolerance,
    })
}

fn validate(options: &ScfOptions) -> Result<()> {
    let positive = |name: &'static str, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(invalid(name, format!("{value}; expected finite and > 0")))
        }
    };
    positive("energy_tolerance", options.energy_tolerance)?;
    positive("density_tolerance", options.density_tolerance)?;
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
    Ok(())
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

fn trace_product(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut sum = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            sum += a[(i, j)] * b[(j, i)];
        }
    }
    sum
}

fn max_abs_difference(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    let mut largest: f64 = 0.0;
    for i in 0..a.nrows() {
        for j in 0..a.ncols() {
            largest = largest.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    largest
}

/// Pulay's DIIS over the last few (Fock, error) pairs.
struct Diis {
    capacity: usize,
    focks: Vec<Mat<f64>>,
    errors: Vec<Mat<f64>>,
}

impl Diis {
    fn new(capacity: usize) -> Self {
        Self {
            capacity,
            focks: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Stores the pair and returns the extrapolated Fock matrix (the given one while fewer
    /// than two pairs are stored or the DIIS equations are singular).
    fn extrapolate(&mut self, fock: Mat<f64>, error: Mat<f64>) -> Mat<f64> {
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
