//! Coulomb (J) and exchange (K) matrices of a density, from ERIs computed on the fly (direct
//! SCF) over unique shell quartets with 8-fold permutational symmetry and Schwarz screening.
//!
//! J_ij = sum_kl (ij|kl) P_kl and K_ij = sum_kl (ik|jl) P_kl for a symmetric P. Paths:
//! - [`FockBuilder::serial`]: the reference, one loop over canonical quartets in order;
//! - [`FockBuilder::partial`]: one rank's share of a build split among `ranks`: the bra shell
//!   pairs sorted by estimated cost (largest first, [`FockBuilder::bra_order`]) are dealt to
//!   the least loaded rank by that cost, and a rank's share round-robin into `4 * threads` task lists
//!   of the current rayon pool (install a device's pool to choose it); rayon's work stealing
//!   runs the lists, each folding into its own private J/K accumulators, which are then
//!   summed in list order. The ranks' [`PartialCoulombExchange`]s are summed in rank order
//!   (a group's `allreduce_sum` over [`PartialCoulombExchange::as_mut_slice`]) and
//!   [`PartialCoulombExchange::finish`]ed;
//! - [`FockBuilder::threaded`]: the whole build on the current pool (one rank's share of a
//!   group of one).
//!
//! Every path skips quartets whose Schwarz bound Q_ab Q_cd is below the builder's threshold;
//! a builder made [`FockBuilder::with_density_screening`] also skips those whose bound times
//! the largest |P| element the quartet's J and K terms read is below it (the SCF's
//! incremental builds, whose density change is small, skip most quartets so).
//!
//! The result depends on the rank and thread counts only through rounding, and repeated runs
//! with the same counts are bitwise identical.

use faer::{Mat, MatRef};
use rayon::prelude::*;

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
    /// Canonical bra pairs, largest estimated cost first.
    order: Vec<usize>,
    /// The estimated cost of each entry of `order`.
    costs: Vec<f64>,
}

impl<'e> FockBuilder<'e> {
    /// A builder skipping quartets with Schwarz bound Q_ab Q_cd below `schwarz_threshold`
    /// (0 keeps every quartet).
    pub fn new(engine: &'e EriEngine, schwarz_threshold: f64) -> Self {
        let pairs = engine.pairs();
        let counts = engine.function_counts();
        // A quartet (ab|cd) costs about its primitive quartets times its functions: the
        // product of a weight per pair. A bra pair's cost is its weight times the sum of the
        // weights of its kets (the pairs up to it), a prefix sum.
        let weight = |index: usize| {
            let pair = &pairs[index];
            (pair.primitive_count() * counts[pair.a] * counts[pair.b]) as f64
        };
        let mut kets = 0.0;
        let cost: Vec<f64> = (0..pairs.len())
            .map(|index| {
                kets += weight(index);
                weight(index) * kets
            })
            .collect();
        let mut order: Vec<usize> = (0..pairs.len()).collect();
        order.sort_by(|x, y| cost[*y].total_cmp(&cost[*x]).then(x.cmp(y)));
        let costs = order.iter().map(|&index| cost[index]).collect();
        Self {
            engine,
            threshold: schwarz_threshold,
            density_screening: false,
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
        for bra in 0..self.engine.pairs().len() {
            self.bra_pair(
                bra,
                &density,
                bounds.as_deref(),
                &mut accumulator,
                &mut workspace,
            );
        }
        accumulator.finish()
    }

    /// The canonical bra pairs (indices into the engine's pairs), largest estimated cost
    /// first: the order in which they are dealt to ranks and task lists.
    pub fn bra_order(&self) -> &[usize] {
        &self.order
    }

    /// The whole build on the current rayon pool: [`FockBuilder::partial`] of a group of one,
    /// finished.
    pub fn threaded(&self, density: MatRef<'_, f64>) -> CoulombExchange {
        self.partial(density, 0, 1).finish()
    }

    /// Rank `rank`'s share of a build split among `ranks` (the bra pairs of `bra_order()`
    /// dealt largest first to the least loaded rank by estimated cost), on the current rayon
    /// pool in `4 * threads` task lists.
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
        let lists = (4 * rayon::current_num_threads()).clamp(1, share.len().max(1));
        let partials: Vec<PartialCoulombExchange> = (0..lists)
            .into_par_iter()
            .map(|list| {
                let mut accumulator = PartialCoulombExchange::zeros(nao);
                let mut workspace = EriWorkspace::new();
                for &bra in share.iter().skip(list).step_by(lists) {
                    self.bra_pair(
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

    /// With density screening, the largest |P| element of each shell block (row-major,
    /// shells x shells) of the flattened `density`; `None` without.
    fn density_bounds(&self, density: &[f64]) -> Option<Vec<f64>> {
        if !self.density_screening {
            return None;
        }
        let engine = self.engine;
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
        Some(bounds)
    }

    /// Adds every quartet (bra | ket), ket <= bra, of one bra pair; `bounds` are the density
    /// screening's shell-block maxima ([`FockBuilder::density_bounds`]).
    fn bra_pair(
        &self,
        bra: usize,
        density: &[f64],
        bounds: Option<&[f64]>,
        accumulator: &mut PartialCoulombExchange,
        workspace: &mut EriWorkspace,
    ) {
        let engine = self.engine;
        let pairs = engine.pairs();
        let nao = engine.nao();
        let shells = engine.shell_count();
        let offsets = engine.offsets();
        let counts = engine.function_counts();
        let bra_pair = &pairs[bra];
        let (a, b) = (bra_pair.a, bra_pair.b);
        for (ket, ket_pair) in pairs.iter().enumerate().take(bra + 1) {
            let schwarz = bra_pair.schwarz * ket_pair.schwarz;
            if schwarz < self.threshold {
                continue;
            }
            let (c, d) = (ket_pair.a, ket_pair.b);
            if let Some(bounds) = bounds {
                let block = |s: usize, t: usize| bounds[s * shells + t];
                let largest = block(a, b)
                    .max(block(c, d))
                    .max(block(a, c))
                    .max(block(a, d))
                    .max(block(b, c))
                    .max(block(b, d));
                if schwarz * largest < self.threshold {
                    continue;
                }
            }
            let degeneracy = (if a == b { 1.0 } else { 2.0 })
                * (if c == d { 1.0 } else { 2.0 })
                * (if bra == ket { 1.0 } else { 2.0 });
            let block = engine.canonical_quartet(bra, ket, workspace);
            let (na, nb, nc, nd) = (counts[a], counts[b], counts[c], counts[d]);
            let (oa, ob, oc, od) = (offsets[a], offsets[b], offsets[c], offsets[d]);
            let (j, k) = accumulator.values.split_at_mut(nao * nao);
            let mut index = 0;
            for i in oa..oa + na {
                for jj in ob..ob + nb {
                    let p_ij = density[i * nao + jj];
                    let mut j_ij = 0.0;
                    for kk in oc..oc + nc {
                        let p_ik = density[i * nao + kk];
                        let p_jk = density[jj * nao + kk];
                        let mut k_ik = 0.0;
                        let mut k_jk = 0.0;
                        for l in od..od + nd {
                            let value = degeneracy * block[index];
                            index += 1;
                            j_ij += density[kk * nao + l] * value;
                            j[kk * nao + l] += p_ij * value;
                            k_ik += density[jj * nao + l] * value;
                            k[jj * nao + l] += p_ik * value;
                            k[i * nao + l] += p_jk * value;
                            k_jk += density[i * nao + l] * value;
                        }
                        k[i * nao + kk] += k_ik;
                        k[jj * nao + kk] += k_jk;
                    }
                    j[i * nao + jj] += j_ij;
                }
            }
        }
    }
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
