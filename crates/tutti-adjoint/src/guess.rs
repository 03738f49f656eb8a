//! The SCF's atomic-density guess: a superposition of atomic densities (SAD).
//!
//! For each distinct atom of the molecule (nuclear charge and shells), an RHF of the neutral
//! atom alone, in its own shells of the molecule's basis taken as spherical functions,
//! spherically averaged with fractional occupations (PySCF's `init_guess='atom'`): the
//! electrons of each angular momentum l of the element's ground-state configuration
//! ([`CONFIGURATION`]) fill the atom's radial orbitals of that l in ascending energy,
//! 2 (2l + 1) each, the last one partially, each spread evenly over the 2l + 1 functions of
//! its shell. The Fock matrix F = H + J - K/2 of that density is averaged over m within each
//! l, so the density stays spherical; DIIS on the averaged blocks. Only the shells of the
//! occupied l enter (the others hold no density, and their Fock blocks are not needed), and
//! the two-electron part is contracted from radial coupling matrices computed once per atom
//! from the ERI tensor of those shells, so an atomic SCF costs one pass over their unique
//! quartets. The
//! molecular guess is the block-diagonal sum of the atomic densities on each atom's AOs
//! (transformed to Cartesian functions, which span the spherical ones, when the basis is
//! Cartesian), not rescaled.
//!
//! Deterministic: everything runs serially in a fixed order (sequential dense linear
//! algebra), so the guess is the same bits for any rank or thread count.

use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self_adjoint_evd, self_adjoint_evd_scratch, ComputeEigenvectors};
use faer::{Mat, MatRef, Par};

use crate::basis::{function_count, AngularKind, Basis, ShellData};
use crate::error::{AdjointError, Result};
use crate::integrals::cartesian::transform;
use crate::integrals::{kinetic, nuclear_attraction, overlap, EriEngine};
use crate::molecule::{Atom, Molecule};
use crate::scf::{max_abs_difference, trace_product, Diis, ScfOptions};

/// Electrons per angular momentum (s, p, d, f) of each element's ground-state configuration,
/// indexed by nuclear charge (PySCF's `elements.CONFIGURATION`, H to Kr).
pub(crate) const CONFIGURATION: [[u8; 4]; 37] = [
    [0, 0, 0, 0],   // (no element)
    [1, 0, 0, 0],   // H
    [2, 0, 0, 0],   // He
    [3, 0, 0, 0],   // Li
    [4, 0, 0, 0],   // Be
    [4, 1, 0, 0],   // B
    [4, 2, 0, 0],   // C
    [4, 3, 0, 0],   // N
    [4, 4, 0, 0],   // O
    [4, 5, 0, 0],   // F
    [4, 6, 0, 0],   // Ne
    [5, 6, 0, 0],   // Na
    [6, 6, 0, 0],   // Mg
    [6, 7, 0, 0],   // Al
    [6, 8, 0, 0],   // Si
    [6, 9, 0, 0],   // P
    [6, 10, 0, 0],  // S
    [6, 11, 0, 0],  // Cl
    [6, 12, 0, 0],  // Ar
    [7, 12, 0, 0],  // K
    [8, 12, 0, 0],  // Ca
    [8, 12, 1, 0],  // Sc
    [8, 12, 2, 0],  // Ti
    [8, 12, 3, 0],  // V
    [7, 12, 5, 0],  // Cr
    [8, 12, 5, 0],  // Mn
    [8, 12, 6, 0],  // Fe
    [8, 12, 7, 0],  // Co
    [8, 12, 8, 0],  // Ni
    [7, 12, 10, 0], // Cu
    [8, 12, 10, 0], // Zn
    [8, 13, 10, 0], // Ga
    [8, 14, 10, 0], // Ge
    [8, 15, 10, 0], // As
    [8, 16, 10, 0], // Se
    [8, 17, 10, 0], // Br
    [8, 18, 10, 0], // Kr
];

/// The atomic SCFs stop when the energy changes by less than this (hartree) and no element
/// of the radial densities by more than [`ATOM_DENSITY_TOLERANCE`]; a guess needs no more.
const ATOM_ENERGY_TOLERANCE: f64 = 1e-8;
/// See [`ATOM_ENERGY_TOLERANCE`].
const ATOM_DENSITY_TOLERANCE: f64 = 1e-6;
/// Beyond this many iterations an atomic SCF's last density is used as it is.
const ATOM_MAX_ITERATIONS: usize = 64;
/// DIIS subspace of the atomic SCFs.
const ATOM_DIIS_VECTORS: usize = 8;

/// One distinct atom of the molecule and its density (`None`: its shells cannot hold its
/// configuration).
struct AtomKind {
    charge: u32,
    shells: Vec<ShellData>,
    density: Option<AtomicDensity>,
}

/// An atom's density over the spherical functions of its occupied shells.
struct AtomicDensity {
    /// The shells it covers (indices into the atom's shells, in order).
    shells: Vec<usize>,
    /// Over the spherical AOs of `shells`, in order.
    density: Mat<f64>,
}

/// The superposition of atomic densities of `molecule` in `basis` (nao x nao), or `None`
/// when some atom's shells cannot hold its ground-state configuration (the caller then falls
/// back to the core guess). Each distinct atom's SCF runs once.
///
/// Errors: a failed eigendecomposition of an atomic SCF.
pub(crate) fn atomic_densities(
    molecule: &Molecule,
    basis: &Basis,
    options: &ScfOptions,
) -> Result<Option<Mat<f64>>> {
    let shells = basis.shells();
    let mut kinds: Vec<AtomKind> = Vec::new();
    let mut density = Mat::<f64>::zeros(basis.nao(), basis.nao());
    for (index, atom) in molecule.atoms().iter().enumerate() {
        let own: Vec<usize> = (0..shells.len())
            .filter(|&s| shells[s].atom == index)
            .collect();
        let data: Vec<ShellData> = own
            .iter()
            .map(|&s| ShellData {
                l: shells[s].l,
                exponents: shells[s].exponents.clone(),
                coefficients: shells[s].coefficients.clone(),
            })
            .collect();
        let kind = match kinds
            .iter()
            .position(|kind| kind.charge == atom.charge && kind.shells == data)
        {
            Some(kind) => kind,
            None => {
                let density = atomic_density(atom.charge, &data, options)?;
                kinds.push(AtomKind {
                    charge: atom.charge,
                    shells: data,
                    density,
                });
                kinds.len() - 1
            }
        };
        let Some(atomic) = &kinds[kind].density else {
            return Ok(None);
        };
        let covered: Vec<usize> = atomic.shells.iter().map(|&k| own[k]).collect();
        place(&mut density, atomic.density.as_ref(), basis, &covered);
    }
    Ok(Some(density))
}

/// The functions of one angular momentum of an atom that its configuration occupies.
struct RadialBlock {
    l: usize,
    /// The atom's occupied shells of this l (indices into its occupied shells).
    shells: Vec<usize>,
    /// Electrons in this l.
    electrons: f64,
    /// The radial overlap (shells x shells).
    overlap: Mat<f64>,
    /// Its canonical orthogonalizer (shells x independent combinations).
    orthogonalizer: Mat<f64>,
    /// The radial core Hamiltonian.
    core: Mat<f64>,
}

/// The spherically averaged, fractionally occupied RHF of one neutral atom: the atom's
/// occupied shells as a basis, its radial blocks and their two-electron coupling.
struct AtomicScf {
    /// The occupied shells (indices into the atom's shells).
    occupied: Vec<usize>,
    /// The occupied shells placed at the origin, spherical functions.
    basis: Basis,
    blocks: Vec<RadialBlock>,
    /// [`two_electron_coupling`] of `blocks`.
    coupling: Vec<Vec<Mat<f64>>>,
}

impl AtomicScf {
    /// The SCF of the neutral atom of nuclear `charge` in `shells`, or `None` when the
    /// shells cannot hold its configuration.
    fn new(charge: u32, shells: &[ShellData], options: &ScfOptions) -> Result<Option<Self>> {
        let Some(configuration) = CONFIGURATION.get(charge as usize) else {
            return Ok(None);
        };
        let electrons_in = |l: usize| configuration.get(l).copied().unwrap_or(0);
        let occupied: Vec<usize> = (0..shells.len())
            .filter(|&k| electrons_in(shells[k].l) > 0)
            .collect();
        if occupied.is_empty() {
            return Ok(None);
        }
        let atom = Molecule::new(
            vec![Atom {
                charge,
                position: [0.0; 3],
            }],
            0,
        )?;
        let occupied_shells: Vec<ShellData> = occupied.iter().map(|&k| shells[k].clone()).collect();
        let basis = Basis::from_atom_shells(&atom, &[occupied_shells], AngularKind::Spherical)?;
        let s = overlap(&basis);
        let h = kinetic(&basis) + nuclear_attraction(&basis, &atom);
        let mut blocks = Vec::new();
        for (l, &electrons) in configuration.iter().enumerate() {
            if electrons == 0 {
                continue;
            }
            let own: Vec<usize> = (0..occupied.len())
                .filter(|&k| shells[occupied[k]].l == l)
                .collect();
            if own.is_empty() {
                return Ok(None);
            }
            let radial_overlap = average(s.as_ref(), &basis, l, &own);
            let orthogonalizer =
                orthogonalizer(radial_overlap.as_ref(), options.linear_dependence)?;
            if f64::from(electrons) > (orthogonalizer.ncols() * 2 * (2 * l + 1)) as f64 {
                return Ok(None);
            }
            blocks.push(RadialBlock {
                l,
                core: average(h.as_ref(), &basis, l, &own),
                shells: own,
                electrons: f64::from(electrons),
                overlap: radial_overlap,
                orthogonalizer,
            });
        }
        let coupling = two_electron_coupling(&basis, &blocks);
        Ok(Some(Self {
            occupied,
            basis,
            blocks,
            coupling,
        }))
    }

    /// Runs the SCF from the core Hamiltonian's orbitals: at most [`ATOM_MAX_ITERATIONS`],
    /// until the energy changes by less than [`ATOM_ENERGY_TOLERANCE`] and the radial
    /// densities by less than [`ATOM_DENSITY_TOLERANCE`]; the last density either way.
    fn density(&self) -> Result<AtomicDensity> {
        let blocks = &self.blocks;
        let core: Vec<Mat<f64>> = blocks.iter().map(|block| block.core.clone()).collect();
        let mut radial = occupy(blocks, &core)?;
        let mut diis = Diis::new(ATOM_DIIS_VECTORS);
        let mut previous_energy = f64::NAN;
        for _ in 0..ATOM_MAX_ITERATIONS {
            let fock = radial_fock(blocks, &self.coupling, &radial);
            // E = tr(P (H + F)) / 2 over all 2l + 1 functions of each block.
            let energy: f64 = blocks
                .iter()
                .zip(&radial)
                .zip(&fock)
                .map(|((block, p), f)| {
                    let sum = &block.core + f;
                    0.5 * (2 * block.l + 1) as f64 * trace_product(p.as_ref(), sum.as_ref())
                })
                .sum();
            let errors: Vec<Mat<f64>> = blocks
                .iter()
                .zip(&fock)
                .zip(&radial)
                .map(|((block, f), p)| commutator_error(block, f.as_ref(), p.as_ref()))
                .collect();
            let extrapolated = unstack(&diis.extrapolate(stack(&fock), stack(&errors)), blocks);
            let next = occupy(blocks, &extrapolated)?;
            let change = next
                .iter()
                .zip(&radial)
                .map(|(a, b)| max_abs_difference(a.as_ref(), b.as_ref()))
                .fold(0.0f64, f64::max);
            radial = next;
            if (energy - previous_energy).abs() < ATOM_ENERGY_TOLERANCE
                && change < ATOM_DENSITY_TOLERANCE
            {
                break;
            }
            previous_energy = energy;
        }
        Ok(AtomicDensity {
            shells: self.occupied.clone(),
            density: expand(&self.basis, blocks, &radial),
        })
    }
}

/// The spherically averaged, fractionally occupied RHF density of the neutral atom of
/// nuclear `charge` in `shells`, or `None` when the shells cannot hold the configuration.
fn atomic_density(
    charge: u32,
    shells: &[ShellData],
    options: &ScfOptions,
) -> Result<Option<AtomicDensity>> {
    match AtomicScf::new(charge, shells, options)? {
        Some(scf) => scf.density().map(Some),
        None => Ok(None),
    }
}

/// The radial two-electron coupling of each pair of blocks (L, L'): G[(s t), (u v)] =
/// (1 / (2L + 1)) sum_{m, m'} [(s m t m | u m' v m') - (s m u m' | t m v m') / 2], rows
/// s n_L + t, columns u n_L' + v, so that the m-averaged J - K/2 of block L is
/// sum_L' G R_L' for radial densities R_L' (the same on every m').
fn two_electron_coupling(basis: &Basis, blocks: &[RadialBlock]) -> Vec<Vec<Mat<f64>>> {
    // The occupied shells of an atom are few (s and p up to Ar): their whole ERI tensor is
    // small, and computing it visits each unique quartet once.
    let tensor = EriEngine::new(basis).full_tensor();
    let n = basis.nao();
    let offsets = basis.offsets();
    let eri = |i: usize, j: usize, k: usize, l: usize| tensor[((i * n + j) * n + k) * n + l];
    blocks
        .iter()
        .map(|bra| {
            let (nb, fb) = (bra.shells.len(), 2 * bra.l + 1);
            blocks
                .iter()
                .map(|ket| {
                    let (nk, fk) = (ket.shells.len(), 2 * ket.l + 1);
                    Mat::from_fn(nb * nb, nk * nk, |row, column| {
                        let (s, t) = (offsets[bra.shells[row / nb]], offsets[bra.shells[row % nb]]);
                        let (u, v) = (
                            offsets[ket.shells[column / nk]],
                            offsets[ket.shells[column % nk]],
                        );
                        let mut sum = 0.0;
                        for m in 0..fb {
                            for k in 0..fk {
                                sum += eri(s + m, t + m, u + k, v + k)
                                    - 0.5 * eri(s + m, u + k, t + m, v + k);
                            }
                        }
                        sum / fb as f64
                    })
                })
                .collect()
        })
        .collect()
}

/// The m-averaged radial Fock blocks H + J - K/2 of radial densities `radial`.
fn radial_fock(
    blocks: &[RadialBlock],
    coupling: &[Vec<Mat<f64>>],
    radial: &[Mat<f64>],
) -> Vec<Mat<f64>> {
    blocks
        .iter()
        .zip(coupling)
        .map(|(bra, row)| {
            let nb = bra.shells.len();
            Mat::from_fn(nb, nb, |i, j| {
                let mut value = bra.core[(i, j)];
                for ((ket, g), p) in blocks.iter().zip(row).zip(radial) {
                    let nk = ket.shells.len();
                    for k in 0..nk {
                        for l in 0..nk {
                            value += g[(i * nb + j, k * nk + l)] * p[(k, l)];
                        }
                    }
                }
                value
            })
        })
        .collect()
}

/// The radial block of `matrix` for angular momentum `l` over the atom's `shells` of that l:
/// element (i, j) is the mean over m of matrix[(shell i, m), (shell j, m)].
fn average(matrix: MatRef<'_, f64>, basis: &Basis, l: usize, shells: &[usize]) -> Mat<f64> {
    let offsets = basis.offsets();
    let functions = 2 * l + 1;
    Mat::from_fn(shells.len(), shells.len(), |i, j| {
        let mut sum = 0.0;
        for m in 0..functions {
            sum += matrix[(offsets[shells[i]] + m, offsets[shells[j]] + m)];
        }
        sum / functions as f64
    })
}

/// The atom's AO density (spherical functions) of radial densities `radial` (one per block,
/// for each of the 2l + 1 functions of every shell of its l).
fn expand(basis: &Basis, blocks: &[RadialBlock], radial: &[Mat<f64>]) -> Mat<f64> {
    let offsets = basis.offsets();
    let mut density = Mat::<f64>::zeros(basis.nao(), basis.nao());
    for (block, p) in blocks.iter().zip(radial) {
        for (i, &a) in block.shells.iter().enumerate() {
            for (j, &b) in block.shells.iter().enumerate() {
                for m in 0..2 * block.l + 1 {
                    density[(offsets[a] + m, offsets[b] + m)] = p[(i, j)];
                }
            }
        }
    }
    density
}

/// The radial densities of the orbitals of the radial Fock blocks `fock`: each block's
/// electrons fill its orbitals in ascending energy, 2 (2l + 1) per orbital, and the density
/// per function is sum_k n_k / (2l + 1) c_k c_k^T.
fn occupy(blocks: &[RadialBlock], fock: &[Mat<f64>]) -> Result<Vec<Mat<f64>>> {
    let mut out = Vec::with_capacity(blocks.len());
    for (block, f) in blocks.iter().zip(fock) {
        let x = block.orthogonalizer.as_ref();
        let transformed = product(product(x.transpose(), f.as_ref()).as_ref(), x);
        let (_, vectors) = eigen(transformed.as_ref())?;
        let orbitals = product(x, vectors.as_ref());
        let functions = (2 * block.l + 1) as f64;
        let mut remaining = block.electrons;
        let n = block.shells.len();
        let mut p = Mat::<f64>::zeros(n, n);
        for k in 0..orbitals.ncols() {
            if remaining <= 0.0 {
                break;
            }
            let occupation = remaining.min(2.0 * functions);
            remaining -= occupation;
            let weight = occupation / functions;
            for i in 0..n {
                for j in 0..n {
                    p[(i, j)] += weight * orbitals[(i, k)] * orbitals[(j, k)];
                }
            }
        }
        out.push(p);
    }
    Ok(out)
}

/// The DIIS error of one radial block: X^T (F P S - S P F) X.
fn commutator_error(
    block: &RadialBlock,
    fock: MatRef<'_, f64>,
    density: MatRef<'_, f64>,
) -> Mat<f64> {
    let s = block.overlap.as_ref();
    let fps = product(product(fock, density).as_ref(), s);
    let commutator = Mat::from_fn(fps.nrows(), fps.ncols(), |i, j| fps[(i, j)] - fps[(j, i)]);
    let x = block.orthogonalizer.as_ref();
    product(product(x.transpose(), commutator.as_ref()).as_ref(), x)
}

/// The blocks as one block-diagonal matrix (what the DIIS extrapolates).
fn stack(blocks: &[Mat<f64>]) -> Mat<f64> {
    let n: usize = blocks.iter().map(Mat::nrows).sum();
    let mut out = Mat::<f64>::zeros(n, n);
    let mut start = 0;
    for block in blocks {
        for i in 0..block.nrows() {
            for j in 0..block.ncols() {
                out[(start + i, start + j)] = block[(i, j)];
            }
        }
        start += block.nrows();
    }
    out
}

/// The diagonal blocks of a [`stack`] of radial matrices, one per block.
fn unstack(stacked: &Mat<f64>, blocks: &[RadialBlock]) -> Vec<Mat<f64>> {
    let mut start = 0;
    blocks
        .iter()
        .map(|block| {
            let n = block.shells.len();
            let out = Mat::from_fn(n, n, |i, j| stacked[(start + i, start + j)]);
            start += n;
            out
        })
        .collect()
}

/// Adds the atomic density `atomic` (spherical functions of the atom's shells in order) to
/// `density` on the AOs of the molecule's shells `own` (the same shells, in the same order),
/// through the Cartesian-to-spherical map when the basis is Cartesian.
fn place(density: &mut Mat<f64>, atomic: MatRef<'_, f64>, basis: &Basis, own: &[usize]) {
    let shells = basis.shells();
    let offsets = basis.offsets();
    let kind = basis.kind();
    // The basis's functions of each shell as combinations of the spherical ones: row c is
    // AO c, column m spherical function m. Spherical AOs, and Cartesian s and p, are the
    // spherical functions themselves; a Cartesian d or higher AO g_c relates to them by
    // spherical m = sum_c T[c][m] g_c, so a density P over them is T P T^T over the g_c.
    let maps: Vec<Option<(usize, Vec<f64>)>> = own
        .iter()
        .map(|&s| {
            let l = shells[s].l;
            (kind == AngularKind::Cartesian && l >= 2)
                .then(|| (l, transform(l, AngularKind::Spherical)))
        })
        .collect();
    let mut atomic_offset = Vec::with_capacity(own.len());
    let mut next = 0;
    for &s in own {
        atomic_offset.push(next);
        next += function_count(shells[s].l, AngularKind::Spherical);
    }
    for (i, &a) in own.iter().enumerate() {
        for (j, &b) in own.iter().enumerate() {
            let (la, lb) = (shells[a].l, shells[b].l);
            let (na, nb) = (
                function_count(la, AngularKind::Spherical),
                function_count(lb, AngularKind::Spherical),
            );
            let block = Mat::from_fn(na, nb, |m, n| {
                atomic[(atomic_offset[i] + m, atomic_offset[j] + n)]
            });
            let left = to_basis(&maps[i], block.as_ref());
            let both = to_basis(&maps[j], left.transpose()).transpose().to_owned();
            for r in 0..both.nrows() {
                for c in 0..both.ncols() {
                    density[(offsets[a] + r, offsets[b] + c)] += both[(r, c)];
                }
            }
        }
    }
}

/// T B (rows of B indexed by spherical functions, of the result by the shell's AOs) for a
/// Cartesian map (l, T row-major `cartesian_count(l)` x `2l + 1`), or B itself.
fn to_basis(map: &Option<(usize, Vec<f64>)>, block: MatRef<'_, f64>) -> Mat<f64> {
    match map {
        None => block.to_owned(),
        Some((l, t)) => {
            let spherical = 2 * l + 1;
            let cartesian = t.len() / spherical;
            Mat::from_fn(cartesian, block.ncols(), |c, n| {
                let mut sum = 0.0;
                for m in 0..spherical {
                    sum += t[c * spherical + m] * block[(m, n)];
                }
                sum
            })
        }
    }
}

/// A B, summed in a fixed order (these matrices are atom-sized).
fn product(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), b.ncols(), |i, j| {
        let mut sum = 0.0;
        for k in 0..a.ncols() {
            sum += a[(i, k)] * b[(k, j)];
        }
        sum
    })
}

/// Eigenvalues (ascending) and eigenvectors of a symmetric matrix (its lower triangle read
/// after symmetrizing), on this thread.
fn eigen(matrix: MatRef<'_, f64>) -> Result<(Vec<f64>, Mat<f64>)> {
    let n = matrix.nrows();
    if n == 0 {
        return Ok((Vec::new(), Mat::zeros(0, 0)));
    }
    let symmetric = Mat::from_fn(n, n, |i, j| 0.5 * (matrix[(i, j)] + matrix[(j, i)]));
    let mut values = Diag::<f64>::zeros(n);
    let mut vectors = Mat::<f64>::zeros(n, n);
    let par = Par::Seq;
    let mut buffer = MemBuffer::new(self_adjoint_evd_scratch::<f64>(
        n,
        ComputeEigenvectors::Yes,
        par,
        Default::default(),
    ));
    self_adjoint_evd(
        symmetric.as_ref(),
        values.as_mut(),
        Some(vectors.as_mut()),
        par,
        MemStack::new(&mut buffer),
        Default::default(),
    )
    .map_err(|err| {
        AdjointError::LinearAlgebra(format!("atomic guess eigendecomposition: {err:?}"))
    })?;
    Ok((values.column_vector().iter().copied().collect(), vectors))
}

/// X = U s^(-1/2) over the eigenvalues of the radial overlap above `threshold`.
fn orthogonalizer(overlap: MatRef<'_, f64>, threshold: f64) -> Result<Mat<f64>> {
    let (values, vectors) = eigen(overlap)?;
    let kept: Vec<usize> = (0..values.len())
        .filter(|&i| values[i] > threshold)
        .collect();
    Ok(Mat::from_fn(overlap.nrows(), kept.len(), |i, k| {
        vectors[(i, kept[k])] / values[kept[k]].sqrt()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basis::BasisSet;
    use crate::fock::FockBuilder;

    fn shell(l: usize, exponents: &[f64]) -> ShellData {
        ShellData {
            l,
            exponents: exponents.to_vec(),
            coefficients: vec![1.0; exponents.len()],
        }
    }

    /// A made-up scandium basis (4 s, 2 p, 1 d shells and an unoccupied f): enough for
    /// [8, 12, 1] electrons, so the d block is occupied.
    fn scandium() -> Vec<ShellData> {
        vec![
            shell(0, &[900.0, 130.0]),
            shell(0, &[30.0]),
            shell(0, &[4.0]),
            shell(0, &[0.6, 0.1]),
            shell(1, &[40.0, 8.0]),
            shell(1, &[1.5, 0.3]),
            shell(2, &[2.0, 0.4]),
            shell(3, &[0.8]),
        ]
    }

    /// The radial coupling contracted with radial densities is the m-average of the full
    /// J - K/2 of the expanded density, block by block (s, p and d).
    #[test]
    fn radial_fock_is_the_averaged_full_fock() {
        let options = ScfOptions::default();
        let tzvp = BasisSet::named("def2-tzvp").expect("shipped");
        let oxygen = tzvp.shells_for(8).expect("covers O").to_vec();
        for (charge, shells) in [(8, oxygen), (21, scandium())] {
            let scf = AtomicScf::new(charge, &shells, &options)
                .expect("atomic set-up")
                .expect("the shells hold the configuration");
            let core: Vec<Mat<f64>> = scf.blocks.iter().map(|b| b.core.clone()).collect();
            let radial = occupy(&scf.blocks, &core).expect("eigendecomposition");
            let density = expand(&scf.basis, &scf.blocks, &radial);
            let engine = EriEngine::new(&scf.basis);
            let jk = FockBuilder::new(&engine, 0.0).serial(density.as_ref());
            let two_electron = &jk.coulomb - &jk.exchange * 0.5;
            let radial_two = radial_fock(&scf.blocks, &scf.coupling, &radial);
            for (block, f) in scf.blocks.iter().zip(&radial_two) {
                let full = average(two_electron.as_ref(), &scf.basis, block.l, &block.shells);
                let difference = max_abs_difference((f - &block.core).as_ref(), full.as_ref());
                assert!(
                    difference < 1e-12,
                    "Z = {charge}, l = {}: {difference:e}",
                    block.l
                );
            }
            // Only the occupied l enter: oxygen's d and f, scandium's f are left out.
            assert!(scf.blocks.iter().all(|b| b.l <= 2));
            assert_eq!(
                scf.basis.nao(),
                scf.occupied
                    .iter()
                    .map(|&k| 2 * shells[k].l + 1)
                    .sum::<usize>()
            );
        }
    }

    /// The atomic density holds the atom's electrons: tr(P S) = Z.
    #[test]
    fn atomic_density_holds_the_electrons() {
        let options = ScfOptions::default();
        for (charge, shells) in [
            (1, vec![shell(0, &[3.0, 0.5]), shell(0, &[0.12])]),
            (21, scandium()),
        ] {
            let scf = AtomicScf::new(charge, &shells, &options)
                .expect("atomic set-up")
                .expect("fits");
            let density = scf.density().expect("converges");
            let s = overlap(&scf.basis);
            let electrons = trace_product(density.density.as_ref(), s.as_ref());
            assert!(
                (electrons - f64::from(charge)).abs() < 1e-10,
                "Z = {charge}: {electrons}"
            );
        }
    }

    /// Shells that cannot hold the configuration (carbon with s functions only) give no
    /// atomic density: the caller falls back to the core guess.
    #[test]
    fn a_configuration_the_shells_cannot_hold_gives_none() {
        let options = ScfOptions::default();
        let s_only = vec![shell(0, &[10.0]), shell(0, &[1.0]), shell(0, &[0.2])];
        assert!(AtomicScf::new(6, &s_only, &options)
            .expect("set-up")
            .is_none());
        // Two s shells hold carbon's four s electrons, one p shell its two p electrons.
        let enough = vec![shell(0, &[10.0]), shell(0, &[1.0]), shell(1, &[0.5])];
        assert!(AtomicScf::new(6, &enough, &options)
            .expect("set-up")
            .is_some());
    }
}
