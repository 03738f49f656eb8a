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
    /// Quartets whose Schwarz bound Q(D b) Q(c d) is below this are skipped.
    pub threshold: f64,
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
    /// target, equal to [`Inputs::two_electron`] of (s, b) to rounding.
    pub fn shared_two_electron(
        &self,
        pair: &ShellPair,
        targets: &[(usize, f64)],
        kets: &[PairUnit],
        workspace: &mut EriWorkspace,
    ) -> Vec<[f64; 2]> {
        let engine = self.engine;
        let pairs = engine.pairs();
        let mut out = vec![[0.0; 2]; targets.len()];
        for unit in kets {
            let kept = |member: &usize| {
                pair.schwarz * pairs[unit.members[*member]].schwarz >= self.threshold
            };
            if !(0..unit.members.len()).any(|member| kept(&member)) {
                continue;
            }
            let values = engine.pair_block(pair, unit.kernel_pair(pairs), workspace);
            let size = values.len() / unit.members.len();
            for member in (0..unit.members.len()).filter(kept) {
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
        out
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
