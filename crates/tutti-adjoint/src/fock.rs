//! Coulomb (J) and exchange (K) matrices of a density, from ERIs computed on the fly (direct
//! SCF) over unique shell quartets with 8-fold permutational symmetry and Schwarz screening.
//!
//! J_ij = sum_kl (ij|kl) P_kl and K_ij = sum_kl (ik|jl) P_kl for a symmetric P. Paths:
//! - [`FockBuilder::serial`]: the reference, one loop over the units' quartets in order;
//! - [`FockBuilder::partial`]: one rank's share of a build split among `ranks`: the bra units
//!   sorted by estimated cost (largest first) are dealt to the least loaded rank by that
//!   cost, and a rank's share round-robin into [`task_lists`] task lists, run on the
//!   current rayon pool (install a device's pool to choose it); rayon's work stealing
//!   runs the lists, each folding into its own private J/K accumulators, which are then
//!   summed in list order. The ranks' [`PartialCoulombExchange`]s are summed in rank order
//!   (a group's `allreduce_sum` over [`PartialCoulombExchange::as_mut_slice`]) and
//!   [`PartialCoulombExchange::finish`]ed;
//! - [`FockBuilder::threaded`]: the whole build on the current pool (one rank's share of a
//!   group of one).
//!
//! The bras and kets are units: a canonical shell pair, or all the canonical pairs over the
//! columns of one or two general contractions (cc-pVXZ shells that share their primitives,
//! [`crate::integrals::columns`]), whose quartets the kernel computes together
//! ([`EriEngine::column_pair`]). A segmented basis has one unit per canonical pair.
//!
//! Every path skips quartets whose Schwarz bound Q_ab Q_cd is below the builder's threshold;
//! a builder made [`FockBuilder::with_density_screening`] also skips those whose bound times
//! the largest |P| element the quartet's J and K terms read is below it (the SCF's
//! incremental builds, whose density change is small, skip most quartets so).
//!
//! The number of task lists, and so every sum, depends on the basis and the rank count
//! only, not on the threads: a build has the same bits on any pool, and repeated runs are
//! bitwise identical. Across rank counts the results differ by rounding.

use faer::{Mat, MatRef};
use rayon::prelude::*;

use crate::basis::MAX_L;
use crate::integrals::columns::{pair_units, PairUnit};
use crate::integrals::{EriEngine, EriWorkspace};

/// Coulomb and exchange matrices (nao x nao, symmetric, hartree).
#[derive(Clone, Debug)]
pub struct CoulombExchange {
    /// J.
    pub coulomb: Mat<f64>,
    /// K.
    pub exchange: Mat<f64>,
}

/// Unsymmetrized J/K sums of part of a build: `[A | B]`, each row-major nao x nao, with
/// J = (A + A^T) / 4 and K = (B + B^T) / 8 once every part is added (each unique quartet is
/// added with its degeneracy, 1, 2, 4 or 8, to one of its symmetric partners).
#[derive(Clone, Debug, PartialEq)]
pub struct PartialCoulombExchange {
    nao: usize,
    values: Vec<f64>,
}

impl PartialCoulombExchange {
    /// All zero, for `nao` AOs.
    pub fn zeros(nao: usize) -> Self {
        Self {
            nao,
            values: vec![0.0; 2 * nao * nao],
        }
    }

    /// The `2 nao^2` sums (A then B), to be added element by element across parts.
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.values
    }

    /// Adds another part, element by element.
    pub fn add(&mut self, other: &PartialCoulombExchange) {
        for (a, b) in self.values.iter_mut().zip(&other.values) {
            *a += b;
        }
    }

    /// J and K of the sum of all parts.
    pub fn finish(self) -> CoulombExchange {
        let nao = self.nao;
        let (j, k) = self.values.split_at(nao * nao);
        let coulomb = Mat::from_fn(nao, nao, |a, b| 0.25 * (j[a * nao + b] + j[b * nao + a]));
        let exchange = Mat::from_fn(nao, nao, |a, b| 0.125 * (k[a * nao + b] + k[b * nao + a]));
        CoulombExchange { coulomb, exchange }
    }
}

/// Builds J and K for densities of one basis.
#[derive(Debug)]
pub struct FockBuilder<'e> {
    engine: &'e EriEngine,
    threshold: f64,
    /// Also screen quartets by the density ([`FockBuilder::with_density_screening`]).
    density_screening: bool,
    /// The bras and kets of the build (`pair_units`).
    units: Vec<PairUnit>,
    /// Bra units, largest estimated cost first.
    order: Vec<usize>,
    /// The estimated cost of each entry of `order`.
    costs: Vec<f64>,
}

impl<'e> FockBuilder<'e> {
    /// A builder skipping quartets with Schwarz bound Q_ab Q_cd below `schwarz_threshold`
    /// (0 keeps every quartet).
    pub fn new(engine: &'e EriEngine, schwarz_threshold: f64) -> Self {
        Self::with_units(engine, schwarz_threshold, pair_units(engine, true))
    }

    /// This builder with the columns of general contractions shared (`true`, the default
    /// of [`FockBuilder::new`]: quartets over columns with the same primitives are computed
    /// together) or split (one quartet at a time, as for a segmented basis). Both give J and
    /// K to rounding; splitting is the reference the shared kernel is checked against.
    pub fn with_shared_columns(self, share: bool) -> Self {
        let units = pair_units(self.engine, share);
        Self::with_units(self.engine, self.threshold, units)
            .with_density_screening(self.density_screening)
    }

    /// A builder over `units`, bras ordered by estimated cost.
    fn with_units(engine: &'e EriEngine, schwarz_threshold: f64, units: Vec<PairUnit>) -> Self {
        let pairs = engine.pairs();
        let counts = engine.function_counts();
        // A quartet (ab|cd) costs about its primitive quartets times its functions (times its
        // members): the product of a weight per unit. A bra unit's cost is its weight times
        // the sum of the weights of its kets (the units up to it), a prefix sum.
        let weight = |unit: &PairUnit| {
            let pair = unit.kernel_pair(pairs);
            (pair.primitive_count() * counts[pair.a] * counts[pair.b] * unit.members.len()) as f64
        };
        let mut kets = 0.0;
        let cost: Vec<f64> = units
            .iter()
            .map(|unit| {
                kets += weight(unit);
                weight(unit) * kets
            })
            .collect();
        let mut order: Vec<usize> = (0..units.len()).collect();
        order.sort_by(|x, y| cost[*y].total_cmp(&cost[*x]).then(x.cmp(y)));
        let costs = order.iter().map(|&index| cost[index]).collect();
        Self {
            engine,
            threshold: schwarz_threshold,
            density_screening: false,
            units,
            order,
            costs,
        }
    }

    /// This builder, also skipping (when `on`) every quartet (ab|cd) whose Schwarz bound
    /// Q_ab Q_cd times the largest |P| element over the shell blocks ab, cd, ac, ad, bc and
    /// bd (every density element its J and K terms read) is below the threshold: each
    /// skipped quartet changes any J or K element by less than the threshold times its
    /// degeneracy (at most 8). Meant for builds from a density change, where most quartets
    /// fall below it; a threshold of 0 still keeps every quartet.
    pub fn with_density_screening(mut self, on: bool) -> Self {
        self.density_screening = on;
        self
    }

    /// The serial reference: every canonical quartet (bra >= ket) in order.
    pub fn serial(&self, density: MatRef<'_, f64>) -> CoulombExchange {
        let nao = self.engine.nao();
        let density = flatten(density);
        let bounds = self.density_bounds(&density);
        let mut accumulator = PartialCoulombExchange::zeros(nao);
        let mut workspace = EriWorkspace::new();
        for bra in 0..self.units.len() {
            self.bra_unit(
                bra,
                &density,
                bounds.as_deref(),
                &mut accumulator,
                &mut workspace,
            );
        }
        accumulator.finish()
    }

    /// The whole build on the current rayon pool: [`FockBuilder::partial`] of a group of one,
    /// finished.
    pub fn threaded(&self, density: MatRef<'_, f64>) -> CoulombExchange {
        self.partial(density, 0, 1).finish()
    }

    /// Rank `rank`'s share of a build split among `ranks` (the bra pairs of `bra_order()`
    /// dealt largest first to the least loaded rank by estimated cost), in [`task_lists`]
    /// task lists run on the current rayon pool.
    /// Summing the parts of ranks `0..ranks` and finishing gives J and K. A `rank` at or
    /// beyond `ranks` has an empty share (all zero).
    pub fn partial(
        &self,
        density: MatRef<'_, f64>,
        rank: usize,
        ranks: usize,
    ) -> PartialCoulombExchange {
        let nao = self.engine.nao();
        let density = flatten(density);
        let bounds = self.density_bounds(&density);
        let share: Vec<usize> = crate::split::rank_share(&self.costs, rank, ranks)
            .into_iter()
            .map(|position| self.order[position])
            .collect();
        let lists = task_lists(nao).clamp(1, share.len().max(1));
        let partials: Vec<PartialCoulombExchange> = (0..lists)
            .into_par_iter()
            .map(|list| {
                let mut accumulator = PartialCoulombExchange::zeros(nao);
                let mut workspace = EriWorkspace::new();
                for &bra in share.iter().skip(list).step_by(lists) {
                    self.bra_unit(
                        bra,
                        &density,
                        bounds.as_deref(),
                        &mut accumulator,
                        &mut workspace,
                    );
                }
                accumulator
            })
            .collect();
        let mut partials = partials.into_iter();
        let mut total = partials
            .next()
            .unwrap_or_else(|| PartialCoulombExchange::zeros(nao));
        for partial in partials {
            total.add(&partial);
        }
        total
    }

    /// With density screening, the largest |P| element of each shell block
    /// ([`shell_block_maxima`]); `None` without.
    fn density_bounds(&self, density: &[f64]) -> Option<Vec<f64>> {
        self.density_screening
            .then(|| shell_block_maxima(self.engine, density))
    }

    /// Adds every quartet (bra | ket), ket <= bra, of one bra unit (of the members of both
    /// units; of one unit with itself, each member quartet once); `bounds` are the density
    /// screening's shell-block maxima ([`FockBuilder::density_bounds`]).
    fn bra_unit(
        &self,
        bra: usize,
        density: &[f64],
        bounds: Option<&[f64]>,
        accumulator: &mut PartialCoulombExchange,
        workspace: &mut EriWorkspace,
    ) {
        let engine = self.engine;
        let pairs = engine.pairs();
        let shells = engine.shell_count();
        let bra_unit = &self.units[bra];
        // Whether the member quartet (ab|cd) of canonical pairs `ab`, `cd` passes the
        // screening.
        let keep = |ab: usize, cd: usize, [a, b]: [usize; 2], [c, d]: [usize; 2]| {
            let schwarz = pairs[ab].schwarz * pairs[cd].schwarz;
            if schwarz < self.threshold {
                return false;
            }
            let Some(bounds) = bounds else {
                return true;
            };
            let block = |s: usize, t: usize| bounds[s * shells + t];
            let largest = block(a, b)
                .max(block(c, d))
                .max(block(a, c))
                .max(block(a, d))
                .max(block(b, c))
                .max(block(b, d));
            schwarz * largest >= self.threshold
        };
        for (ket, ket_unit) in self.units.iter().enumerate().take(bra + 1) {
            // Member quartets (x, y), of one unit with itself only y <= x: each once.
            let quartets = || {
                (0..bra_unit.members.len()).flat_map(move |x| {
                    (0..ket_unit.members.len())
                        .filter(move |&y| ket < bra || y <= x)
                        .map(move |y| (x, y))
                })
            };
            let kept = |(x, y): (usize, usize)| {
                keep(
                    bra_unit.members[x],
                    ket_unit.members[y],
                    bra_unit.shells[x],
                    ket_unit.shells[y],
                )
            };
            if !quartets().any(kept) {
                continue;
            }
            let block = engine.pair_block(
                bra_unit.kernel_pair(pairs),
                ket_unit.kernel_pair(pairs),
                workspace,
            );
            let size = block.len() / (bra_unit.members.len() * ket_unit.members.len());
            for (x, y) in quartets().filter(|&quartet| kept(quartet)) {
                let [a, b] = bra_unit.shells[x];
                let [c, d] = ket_unit.shells[y];
                let degeneracy = (if a == b { 1.0 } else { 2.0 })
                    * (if c == d { 1.0 } else { 2.0 })
                    * (if bra_unit.members[x] == ket_unit.members[y] {
                        1.0
                    } else {
                        2.0
                    });
                let member = &block[(x * ket_unit.members.len() + y) * size..][..size];
                self.digest(member, [a, b, c, d], degeneracy, density, accumulator);
            }
        }
    }

    /// Adds the block (ab|cd), row-major `[na][nb][nc][nd]`, times `degeneracy`, to the J and
    /// K sums. The inner loops run over the last index, so trailing shells of one function
    /// (s) are moved out of the way first: (ab|c s) has the layout of (ab|s c), and (ab|s s)
    /// that of (s s|ab), the same integrals (J and K are symmetrized at the end, so a term
    /// may land in either of its two places). The common lengths of the last index (p, d
    /// and f shells) then run copies where it is a constant, so its loops unroll.
    fn digest(
        &self,
        block: &[f64],
        shells: [usize; 4],
        degeneracy: f64,
        density: &[f64],
        accumulator: &mut PartialCoulombExchange,
    ) {
        let counts = self.engine.function_counts();
        let single = |shell: usize| counts[shell] == 1;
        let [a, b, c, d] = shells;
        let [a, b, c, d] = if single(c) && single(d) {
            [c, d, a, b]
        } else {
            [a, b, c, d]
        };
        let shells = if single(d) {
            [a, b, d, c]
        } else {
            [a, b, c, d]
        };
        let arguments = (block, shells, degeneracy, density, accumulator);
        match counts[shells[3]] {
            1 => self.digest_with::<1>(arguments),
            3 => self.digest_with::<3>(arguments),
            5 => self.digest_with::<5>(arguments),
            7 => self.digest_with::<7>(arguments),
            _ => self.digest_with::<0>(arguments),
        }
    }

    /// [`FockBuilder::digest`] with `ND` functions in shell d, or any number for `ND` = 0.
    #[inline(never)]
    fn digest_with<const ND: usize>(
        &self,
        (block, [a, b, c, d], degeneracy, density, accumulator): (
            &[f64],
            [usize; 4],
            f64,
            &[f64],
            &mut PartialCoulombExchange,
        ),
    ) {
        let engine = self.engine;
        let nao = engine.nao();
        let offsets = engine.offsets();
        let counts = engine.function_counts();
        let nd = if ND == 0 { counts[d] } else { ND };
        let (na, nb, nc) = (counts[a], counts[b], counts[c]);
        debug_assert_eq!(
            block.len(),
            na * nb * nc * nd,
            "one value per function quartet"
        );
        let (oa, ob, oc, od) = (offsets[a], offsets[b], offsets[c], offsets[d]);
        let (j, k) = accumulator.values.split_at_mut(nao * nao);
        // Row slices of length nd from column od: no index checks in the inner loop.
        let row = |r: usize| r * nao + od..r * nao + od + nd;
        let mut blocks = block.chunks_exact(nd);
        let mut spare = [0.0; SHELL_FUNCTIONS];
        for i in oa..oa + na {
            for jj in ob..ob + nb {
                let p_ij = density[i * nao + jj];
                let mut j_ij = 0.0;
                for kk in oc..oc + nc {
                    let Some(values) = blocks.next() else {
                        return;
                    };
                    let p_ik = density[i * nao + kk];
                    let p_jk = density[jj * nao + kk];
                    let (d_kl, d_jl, d_il) = (
                        &density[row(kk)][..nd],
                        &density[row(jj)][..nd],
                        &density[row(i)][..nd],
                    );
                    let (values, j_kl) = (&values[..nd], &mut j[row(kk)][..nd]);
                    let mut k_ik = 0.0;
                    let mut k_jk = 0.0;
                    // K's rows jj and i, or, when they are one row, the row and a spare one
                    // added to it after the loop: the same two terms in the same order.
                    let (k_jl, k_il) = if i == jj {
                        spare[..nd].fill(0.0);
                        (&mut k[row(jj)][..nd], &mut spare[..nd])
                    } else {
                        let (k_jl, k_il) = two_rows(k, row(jj), row(i));
                        (&mut k_jl[..nd], &mut k_il[..nd])
                    };
                    for l in 0..nd {
                        let value = degeneracy * values[l];
                        j_ij += d_kl[l] * value;
                        j_kl[l] += p_ij * value;
                        k_ik += d_jl[l] * value;
                        k_jl[l] += p_ik * value;
                        k_il[l] += p_jk * value;
                        k_jk += d_il[l] * value;
                    }
                    if i == jj {
                        for (slot, term) in k[row(i)].iter_mut().zip(&spare[..nd]) {
                            *slot += term;
                        }
                    }
                    k[i * nao + kk] += k_ik;
                    k[jj * nao + kk] += k_jk;
                }
                j[i * nao + jj] += j_ij;
            }
        }
    }
}

/// The task lists a rank's share of a build is dealt into ([`FockBuilder::partial`]), at
/// most (a share of fewer bra units has one per unit): each list sums its units into its
/// own J/K accumulators (2 nao^2 values), and the lists are added in order, so the count
/// fixes the sums and the bits. It depends on `nao` alone, never on the thread count: 64
/// lists (enough to balance 16 threads by work stealing), fewer where their accumulators
/// would pass [`TASK_LIST_BYTES`], but at least 8. A pool of more threads than lists leaves
/// the rest idle.
pub(crate) fn task_lists(nao: usize) -> usize {
    let accumulator_bytes = nao.saturating_mul(nao).saturating_mul(2 * 8).max(1);
    (TASK_LIST_BYTES / accumulator_bytes).clamp(8, 64)
}

/// The bytes the task lists' accumulators may take before there are fewer of them
/// ([`task_lists`]): 256 MiB, 64 lists up to 512 AOs, 16 at 1024, 8 from 1366 on.
pub(crate) const TASK_LIST_BYTES: usize = 256 << 20;

/// The most functions a basis shell has (Cartesian, l = [`MAX_L`]).
const SHELL_FUNCTIONS: usize = (MAX_L + 1) * (MAX_L + 2) / 2;

/// Two disjoint ranges of `matrix` as mutable slices, in the order asked.
#[inline(always)]
fn two_rows(
    matrix: &mut [f64],
    first: std::ops::Range<usize>,
    second: std::ops::Range<usize>,
) -> (&mut [f64], &mut [f64]) {
    if first.start < second.start {
        let (low, high) = matrix.split_at_mut(second.start);
        (&mut low[first], &mut high[..second.end - second.start])
    } else {
        let (low, high) = matrix.split_at_mut(first.start);
        let second_slice = &mut low[second];
        (&mut high[..first.end - first.start], second_slice)
    }
}

/// The largest |P| element of each shell block of the row-major nao x nao `density`, by
/// shells (row-major, shells x shells): what density screening bounds a quartet's terms by.
pub(crate) fn shell_block_maxima(engine: &EriEngine, density: &[f64]) -> Vec<f64> {
    let (nao, shells) = (engine.nao(), engine.shell_count());
    let (offsets, counts) = (engine.offsets(), engine.function_counts());
    let mut bounds = vec![0.0f64; shells * shells];
    for s in 0..shells {
        for t in 0..shells {
            let mut largest = 0.0f64;
            for i in offsets[s]..offsets[s] + counts[s] {
                for j in offsets[t]..offsets[t] + counts[t] {
                    largest = largest.max(density[i * nao + j].abs());
                }
            }
            bounds[s * shells + t] = largest;
        }
    }
    bounds
}

fn flatten(matrix: MatRef<'_, f64>) -> Vec<f64> {
    let n = matrix.nrows();
    let mut out = vec![0.0; n * matrix.ncols()];
    for i in 0..n {
        for j in 0..matrix.ncols() {
            out[i * matrix.ncols() + j] = matrix[(i, j)];
        }
    }
    out
}
