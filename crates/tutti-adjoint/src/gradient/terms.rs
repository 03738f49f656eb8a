//! The contractions shared by both implementations: for one derivative set D (primitive i of
//! shell s: functions w r^2 g_m, then w g_m, see [`super::normalization`]) and one partner
//! shell b, the contribution of the pair (D, b) to (Y_i, X_i) from each term of
//! dE = tr(P dH) + 1/2 tr(P dG[P]) - tr(W dS).
//!
//! Replacing mu_m by mu_m + e f_m for every AO m of shell s changes
//! - the one-electron energy by 2 e sum_{m, nu} P_{m nu} h(f_m, nu),
//! - the overlap term by -2 e sum_{m, nu} W_{m nu} S(f_m, nu),
//! - the two-electron energy by 2 e sum_{m, nu, la, si} (f_m nu|la si) G_{m nu la si} with
//!   G_{mu nu la si} = P_{mu nu} P_{la si} - (P_{mu la} P_{nu si} + P_{mu si} P_{nu la}) / 4
//!   (the 8-fold symmetric two-particle density of RHF),
//!
//! nu over all AOs: the sum over partners b covers them. Each function returns
//! [raised, plain] = [Y part, X part] of one pair.

use crate::integrals::columns::PairUnit;
use crate::integrals::eri::{EriEngine, EriWorkspace, ShellPair};
use crate::integrals::functions::FunctionShell;
use crate::integrals::one_electron::{block, Operator};

/// Everything the contractions read: the engine (basis shells, then one derivative set per
/// primitive), the densities and the nuclei.
pub(super) struct Inputs<'a> {
    /// Shells then derivative sets; derivative set of (shell s, primitive i) at
    /// `shell_count + first_primitive[s] + i`.
    pub engine: &'a EriEngine,
    /// First flat primitive index of each shell (one more entry: the total).
    pub first_primitive: Vec<usize>,
    /// P (row-major nao x nao).
    pub density: Vec<f64>,
    /// W = 2 sum_occ e_i C_i C_i^T (row-major).
    pub energy_weighted: Vec<f64>,
    /// Nuclei as point charges.
    pub charges: Vec<(f64, [f64; 3])>,
    /// Quartets whose Schwarz bound Q(D b) Q(c d) is below this are skipped (and, in
    /// [`Inputs::shared_two_electron`], those whose bound times the densities' is).
    pub threshold: f64,
    /// The largest |P| of each shell block ([`crate::fock::shell_block_maxima`]).
    pub density_bounds: Vec<f64>,
}

impl Inputs<'_> {
    /// Number of shells of the basis.
    pub fn shell_count(&self) -> usize {
        self.engine.shell_count()
    }

    /// Primitives of shell `s`.
    pub fn primitives(&self, s: usize) -> std::ops::Range<usize> {
        0..(self.first_primitive[s + 1] - self.first_primitive[s])
    }

    /// The engine's set index of the derivative set of (shell `s`, primitive `i`).
    pub fn derivative_set(&self, s: usize, i: usize) -> usize {
        self.shell_count() + self.first_primitive[s] + i
    }

    /// `sum_{m, nu} M_{mu(m) nu} block[m][nu]` over a (2 n) x n_b block, split into the
    /// raised (m < n) and plain halves, times 2.
    fn contract_one_electron(
        &self,
        matrix: &[f64],
        values: &[f64],
        s: usize,
        b: usize,
    ) -> [f64; 2] {
        let nao = self.engine.nao();
        let n = self.engine.function_counts()[s];
        let nb = self.engine.function_counts()[b];
        let (os, ob) = (self.engine.offsets()[s], self.engine.offsets()[b]);
        let mut out = [0.0; 2];
        for (half, slot) in out.iter_mut().enumerate() {
            let mut sum = 0.0;
            for m in 0..n {
                let row = &matrix[(os + m) * nao + ob..(os + m) * nao + ob + nb];
                let block_row = &values[(half * n + m) * nb..(half * n + m + 1) * nb];
                for (p, v) in row.iter().zip(block_row) {
                    sum += p * v;
                }
            }
            *slot = 2.0 * sum;
        }
        out
    }

    fn sets(&self, s: usize, i: usize, b: usize) -> (&FunctionShell, &FunctionShell) {
        (
            self.engine.set(self.derivative_set(s, i)),
            self.engine.set(b),
        )
    }

    /// -2 sum W S(f_m, nu) for (primitive i of shell s, shell b).
    pub fn overlap(&self, s: usize, i: usize, b: usize) -> [f64; 2] {
        let (d, other) = self.sets(s, i, b);
        let values = block(d, other, Operator::Overlap);
        let [raised, plain] = self.contract_one_electron(&self.energy_weighted, &values, s, b);
        [-raised, -plain]
    }

    /// 2 sum P (T + V)(f_m, nu) for (primitive i of shell s, shell b).
    pub fn core_hamiltonian(&self, s: usize, i: usize, b: usize) -> [f64; 2] {
        let (d, other) = self.sets(s, i, b);
        let mut values = block(d, other, Operator::Kinetic);
        for (t, v) in values
            .iter_mut()
            .zip(block(d, other, Operator::Nuclear(&self.charges)))
        {
            *t += v;
        }
        self.contract_one_electron(&self.density, &values, s, b)
    }

    /// The pair (D, b) of primitive i of shell s with shell b, with its own Schwarz bounds.
    pub fn derivative_pair(&self, s: usize, i: usize, b: usize) -> ShellPair {
        self.engine.pair(self.derivative_set(s, i), b)
    }

    /// 2 sum (f_m nu|la si) G over every canonical ket pair, for the derivative pair
    /// `pair` = (D of shell s, b): the reference, one canonical ket pair at a time.
    pub fn two_electron(
        &self,
        pair: &ShellPair,
        s: usize,
        workspace: &mut EriWorkspace,
    ) -> [f64; 2] {
        let engine = self.engine;
        let mut out = [0.0; 2];
        for ket in engine.pairs() {
            if pair.schwarz * ket.schwarz < self.threshold {
                continue;
            }
            let values = engine.pair_block(pair, ket, workspace);
            let [raised, plain] = self.contract_two_electron(values, s, pair.b, [ket.a, ket.b]);
            // (la si) and (si la) are the same integral and G is symmetric in them.
            let degeneracy = if ket.a == ket.b { 2.0 } else { 4.0 };
            out[0] += degeneracy * raised;
            out[1] += degeneracy * plain;
        }
        out
    }

    /// [`Inputs::two_electron`] of every shell of `targets` at once: `pair` = (D, b) is the
    /// derivative pair of one primitive that the target shells share (the columns of one
    /// contraction, [`crate::integrals::columns::shared_exponents`]), and each target is a
    /// shell s with the ratio of its own derivative set's weight to D's (its derivative
    /// functions are D's times that ratio). The kets are `kets`, whose pairs over the
    /// columns of general contractions the kernel computes together. One [raised, plain] per
    /// target, equal to [`Inputs::two_electron`] of (s, b) to rounding, and the number of
    /// member quartets skipped by the density screening.
    ///
    /// Density screening: a member quartet (D b|c d) whose Schwarz bound Q(D b) Q(c d) times
    /// the largest |G| its terms read ([`Inputs::largest_density_product`], times the
    /// target's ratio) is below the threshold for every target is skipped. Each of its
    /// integrals times G is then below the threshold, so it would have changed a target's
    /// [raised, plain] by less than the threshold times its element count and degeneracy.
    pub fn shared_two_electron(
        &self,
        pair: &ShellPair,
        targets: &[(usize, f64)],
        kets: &[PairUnit],
        workspace: &mut EriWorkspace,
    ) -> (Vec<[f64; 2]>, usize) {
        let engine = self.engine;
        let pairs = engine.pairs();
        let mut out = vec![[0.0; 2]; targets.len()];
        let mut screened = 0;
        // The members that pass the Schwarz screening, then those the density keeps too.
        let mut kept: Vec<usize> = Vec::new();
        for unit in kets {
            kept.clear();
            kept.extend((0..unit.members.len()).filter(|&member| {
                pair.schwarz * pairs[unit.members[member]].schwarz >= self.threshold
            }));
            let schwarz_kept = kept.len();
            kept.retain(|&member| {
                let schwarz = pair.schwarz * pairs[unit.members[member]].schwarz;
                targets.iter().any(|&(s, ratio)| {
                    let product = self.largest_density_product(s, pair.b, unit.shells[member]);
                    schwarz * ratio.abs() * product >= self.threshold
                })
            });
            screened += schwarz_kept - kept.len();
            if kept.is_empty() {
                continue;
            }
            let values = engine.pair_block(pair, unit.kernel_pair(pairs), workspace);
            let size = values.len() / unit.members.len();
            for &member in &kept {
                let [c, d] = unit.shells[member];
                let block = &values[member * size..][..size];
                let degeneracy = if c == d { 2.0 } else { 4.0 };
                for (slot, &(s, _)) in out.iter_mut().zip(targets) {
                    let [raised, plain] = self.contract_two_electron(block, s, pair.b, [c, d]);
                    slot[0] += degeneracy * raised;
                    slot[1] += degeneracy * plain;
                }
            }
        }
        for (slot, &(_, ratio)) in out.iter_mut().zip(targets) {
            slot[0] *= ratio;
            slot[1] *= ratio;
        }
        (out, screened)
    }

    /// A bound on |G_{mu nu la si}| over mu in shell s, nu in b, la in c and si in d, from
    /// the shell blocks' largest |P|: P_sb P_cd + (P_sc P_bd + P_sd P_bc) / 4.
    fn largest_density_product(&self, s: usize, b: usize, [c, d]: [usize; 2]) -> f64 {
        let shells = self.shell_count();
        let block = |x: usize, y: usize| self.density_bounds[x * shells + y];
        block(s, b) * block(c, d) + 0.25 * (block(s, c) * block(b, d) + block(s, d) * block(b, c))
    }

    /// `sum (f_m nu|la si) G_{mu(m) nu la si}` over the block `values` of (D b|c d), D's
    /// functions taken as shell s's ([2 n][n_b][n_c][n_d], the raised half first): [raised,
    /// plain].
    fn contract_two_electron(
        &self,
        values: &[f64],
        s: usize,
        b: usize,
        [c, d]: [usize; 2],
    ) -> [f64; 2] {
        let engine = self.engine;
        let nao = engine.nao();
        let counts = engine.function_counts();
        let offsets = engine.offsets();
        let (n, nb) = (counts[s], counts[b]);
        let (os, ob) = (offsets[s], offsets[b]);
        let (nc, nd) = (counts[c], counts[d]);
        let (oc, od) = (offsets[c], offsets[d]);
        let p = &self.density;
        let half = nb * nc * nd;
        let mut raised = 0.0;
        let mut plain = 0.0;
        for m in 0..n {
            let mu = os + m;
            for j in 0..nb {
                let nu = ob + j;
                let p_mu_nu = p[mu * nao + nu];
                let start = (m * nb + j) * nc * nd;
                let mut index = 0;
                for k in 0..nc {
                    let la = oc + k;
                    let p_mu_la = p[mu * nao + la];
                    let p_nu_la = p[nu * nao + la];
                    for l in 0..nd {
                        let si = od + l;
                        let g = p_mu_nu * p[la * nao + si]
                            - 0.25 * (p_mu_la * p[nu * nao + si] + p[mu * nao + si] * p_nu_la);
                        raised += values[start + index] * g;
                        plain += values[n * half + start + index] * g;
                        index += 1;
                    }
                }
            }
        }
        [raised, plain]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fock::shell_block_maxima;
    use crate::integrals::columns::pair_units;
    use crate::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};

    /// The density screening of the threaded path skips member quartets, and only within
    /// its bound: water in def2-SVP with a loose threshold (1e-9, so that it bites), every
    /// derivative pair's terms against the reference's (Schwarz screening alone).
    #[test]
    fn density_screening_skips_quartets_within_its_bound() {
        let molecule = Molecule::from_xyz(
            "3\nwater, angstrom\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n",
        )
        .expect("xyz");
        let basis_set = BasisSet::load("def2-svp").expect("basis set");
        let basis = Basis::new(&molecule, &basis_set, AngularKind::Spherical).expect("basis");
        let scf = rhf(&molecule, &basis, &ScfOptions::default()).expect("SCF");
        let (sets, first_primitive) = super::super::derivative_sets(&basis);
        let engine = EriEngine::with_sets(&basis, sets);
        let (density, energy_weighted) = super::super::densities_of(&scf);
        let threshold = 1e-9;
        let inputs = Inputs {
            engine: &engine,
            first_primitive,
            density_bounds: shell_block_maxima(&engine, &density),
            density,
            energy_weighted,
            charges: Vec::new(),
            threshold,
        };
        let kets = pair_units(&engine, false);
        let counts = engine.function_counts();
        let widest = counts.iter().copied().max().unwrap_or(0) as f64;
        let mut workspace = EriWorkspace::new();
        let (mut screened, mut checked) = (0, 0);
        for s in 0..inputs.shell_count() {
            for i in inputs.primitives(s) {
                for b in 0..inputs.shell_count() {
                    let pair = inputs.derivative_pair(s, i, b);
                    let reference = inputs.two_electron(&pair, s, &mut workspace);
                    let (values, skipped) =
                        inputs.shared_two_electron(&pair, &[(s, 1.0)], &kets, &mut workspace);
                    screened += skipped;
                    checked += 1;
                    // Each skipped quartet: below the threshold per element, times its
                    // elements and degeneracy (at most 4); and the rounding of the sums.
                    let elements = (counts[s] * counts[b]) as f64 * widest * widest;
                    for half in 0..2 {
                        let allowed = skipped as f64 * 4.0 * elements * threshold
                            + 1e-12 * reference[half].abs().max(1e-300);
                        let difference = (values[0][half] - reference[half]).abs();
                        assert!(
                            difference <= allowed,
                            "(s {s}, i {i}, b {b}) half {half}: {difference:e} > {allowed:e}"
                        );
                    }
                }
            }
        }
        println!("{checked} derivative pairs, {screened} member quartets screened by the density");
        assert!(screened > 0, "nothing screened at {threshold:e}");
    }
}
