//! Electron-repulsion integrals (ab|cd) over shell quartets, McMurchie–Davidson:
//! (ab|cd) = 2 pi^(5/2) / (p q sqrt(p+q)) sum_{tuv} E^{ab}_{tuv} sum_{t'u'v'} (-1)^(t'+u'+v')
//! E^{cd}_{t'u'v'} R_{t+t',u+u',v+v'}(p q / (p+q), P - Q), contracted over primitives, with
//! the Cartesian-to-AO transforms folded into the E tables. Chemists' notation:
//! (ab|cd) = int int a(1) b(1) 1/r12 c(2) d(2).
//!
//! The engine integrates over function shells ([`FunctionShell`]): the basis's shells first
//! (indices 0..shell_count), then any extra sets a caller adds ([`EriEngine::with_sets`],
//! e.g. the exponent derivatives of the gradient), each with its own Cartesian-to-output map.
//! Shell pairs (a >= b) of the basis are precomputed once ([`EriEngine::new`]); any other pair
//! of sets is built on request ([`EriEngine::pair`]). A pair holds, for each primitive pair,
//! its exponent sum, centre and the expansion table by rows of output-function products and
//! Hermite indices (weights and transforms folded in, stored sparsely: only the Hermite
//! indices that can be non-zero for each row, [`super::pair_rows`]),
//! plus Schwarz bounds, Q_ab = sqrt(max |(ij|ij)|) per pair (the Fock build skips quartets
//! with Q_ab Q_cd below its threshold) and the same per primitive pair (primitive quartets
//! below [`PRIMITIVE_THRESHOLD`] are skipped here). Bounds are always computed from the
//! pair's own functions, so a derivative pair's bound is its own, not its parent shell's.
//! With the transforms in the tables, a kernel's block is over the output functions as it
//! is computed.
//!
//! Two kernels compute a block ([`EriEngine::pair_block`]): the batched one (the default)
//! takes a bra primitive pair with the ket's primitive pairs in lanes of up to 8,
//! its pairs' primitive pairs stored in lane tables and ordered by bound; the reference
//! ([`EriEngine::reference_pair_block`]) takes one primitive quartet at a time, and still
//! runs kets of one primitive pair and the pairs' own set-up.

use super::functions::FunctionShell;
use super::hermite::{
    coulomb_from_boys, coulomb_lanes, expansion, hermite_indices, SCHEDULED_ORDER,
};
use super::pair_rows::{reaches, PairRows};
use crate::basis::Basis;
use crate::boys::{boys, MAX_M};

/// One primitive pair of a shell pair.
#[derive(Clone, Debug)]
struct PrimitivePair {
    /// Exponent sum p = a + b.
    exponent: f64,
    /// Gaussian product centre P, bohr.
    center: [f64; 3],
    /// The non-zero E^{ab}_{tuv} (times both weights) in the order of the pair's `pattern`.
    values: Vec<f64>,
    /// The same times (-1)^(t+u+v), for use on the ket side.
    signed_values: Vec<f64>,
    /// Schwarz bound of this primitive pair alone, sqrt(max |(ij|ij)|) over the pair's
    /// functions restricted to these two primitives: a primitive quartet contributes at most
    /// `schwarz_bra * schwarz_ket` to any integral.
    schwarz: f64,
}

/// Primitive quartets whose Schwarz bound is below this are skipped: at most 6^4 of them per
/// shell quartet, so the neglected part of any integral stays below 1e-13.
pub const PRIMITIVE_THRESHOLD: f64 = 1e-16;

/// Kets of at most this many rows (function products) have the bra side summed as sparse dot
/// products ([`EriEngine::pair_block`]'s inner loops): only an ss ket's rows of W are too
/// short for the row path, whose common widths run as fixed-length arrays ([`add_rows`]).
/// (Measured on the Cartesian-product rows before the transforms were folded into the
/// pair tables; callgrind, one J/K build of water/def2-TZVP: 334.4 M instructions with
/// dots for kets up to 6 products, 327.6 M up to 1, 329.4 M never.)
const DOT_PRODUCT_KET: usize = 1;

/// The cost of entering one of the kernel's inner loops, in multiply-adds: what makes a
/// loop over one or a few Hermite indices dear.
const LOOP_OVERHEAD: usize = 4;

/// The most primitive pairs of a ket the batched kernel takes at once: its lanes.
const LANES: usize = 8;

/// Which kernel computes a block: one primitive quartet at a time (the reference), or the
/// ket's primitive pairs in lanes of up to [`LANES`] at once (the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Each primitive quartet's Hermite integrals on their own, gathered into rows and
    /// contracted with the ket's expansion: the reference.
    PerQuartet,
    /// A bra primitive pair with a chunk of the ket's: the Hermite recursion runs over all
    /// the chunk's lanes at once ([`coulomb_lanes`]), and the ket's expansion is contracted
    /// lane by lane from its lane tables ([`KetLanes`]) without gathering rows.
    Batched,
}

/// A pair's primitive pairs as the batched kernel's ket reads them: chunks of `width` lanes
/// (a power of two, at most [`LANES`]), one primitive pair per lane in the pair's order
/// (largest bound first); the lanes after the last primitive pair are padding, with no Boys
/// values and zero expansion values.
#[derive(Clone, Debug, Default)]
struct KetLanes {
    /// Lanes per chunk.
    width: usize,
    /// Each lane's exponent sum q (1 for padding).
    exponent: Vec<f64>,
    /// Each lane's centre Q by axis (0 for padding), bohr.
    center: [Vec<f64>; 3],
    /// The largest primitive bound of each chunk's lanes (its first, the bounds descending).
    bounds: Vec<f64>,
    /// The signed expansion values ([`PrimitivePair::signed_values`]), times a column
    /// pair's member weights: `[member][chunk][pattern entry][lane]`.
    values: Vec<f64>,
}

impl KetLanes {
    /// The lanes of `pair`, whose primitive pairs are in their final order.
    fn new(pair: &ShellPair) -> Self {
        let count = pair.primitives.len();
        let width = count.clamp(1, LANES).next_power_of_two();
        let chunks = count.div_ceil(width);
        let padded = chunks * width;
        let lane = |k: usize| pair.primitives.get(k);
        let exponent = (0..padded)
            .map(|k| lane(k).map_or(1.0, |p| p.exponent))
            .collect();
        let center = [0, 1, 2].map(|axis| {
            (0..padded)
                .map(|k| lane(k).map_or(0.0, |p| p.center[axis]))
                .collect()
        });
        let bounds = (0..chunks)
            .map(|chunk| {
                pair.primitives[chunk * width..count.min((chunk + 1) * width)]
                    .iter()
                    .map(|p| p.schwarz)
                    .fold(0.0, f64::max)
            })
            .collect();
        let entries = pair.pattern.len();
        let members = pair.member_count();
        let mut values = vec![0.0; members * padded * entries];
        for member in 0..members {
            for (k, primitive) in pair.primitives.iter().enumerate() {
                let weight = pair.columns.as_ref().map_or(1.0, |c| c.weight(member, k));
                let (chunk, slot) = (k / width, k % width);
                let start = (member * chunks + chunk) * entries * width;
                for (entry, value) in primitive.signed_values.iter().enumerate() {
                    values[start + entry * width + slot] = weight * value;
                }
            }
        }
        Self {
            width,
            exponent,
            center,
            bounds,
            values,
        }
    }

    /// Bytes of its tables.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        8 * (self.exponent.len() * 4 + self.bounds.len() + self.values.len()) as u64
    }
}

/// The cost of one step of the reference kernel's recursion, one quartet at a time, in
/// multiply-adds (the batched kernel's steps cost one per lane).
const SCALAR_STEP: usize = 8;

/// A shell pair (for the basis's own pairs, canonical: a >= b) and its primitive pairs.
#[derive(Clone, Debug)]
pub struct ShellPair {
    /// First set index (for canonical pairs the larger shell index).
    pub a: usize,
    /// Second set index.
    pub b: usize,
    /// degree_a + degree_b.
    order: usize,
    /// For each row, a product of output functions (ma * functions_b + mb), the Hermite
    /// indices h (into `hermite_indices(order)`) that can be non-zero, rows concatenated
    /// ([`super::pair_rows`]).
    pattern: Vec<usize>,
    /// Where each row starts in `pattern` (functions_a * functions_b + 1 entries).
    row_starts: Vec<usize>,
    primitives: Vec<PrimitivePair>,
    /// Schwarz bound sqrt(max_{i in a, j in b} |(ij|ij)|).
    pub schwarz: f64,
    /// For a pair over the columns of general contractions ([`EriEngine::column_pair`]):
    /// its member pairs and their weights; `None` for a pair of two sets.
    columns: Option<Columns>,
    /// The primitive pairs in the batched kernel's ket lanes.
    lanes: KetLanes,
}

/// The member pairs of a pair over general-contraction columns: the primitive pairs' tables
/// hold no contraction weights, and member m's block is the pair's expansion with primitive
/// pair k weighted by `weights[m * primitives + k]`.
#[derive(Clone, Debug)]
struct Columns {
    /// The members' set indices (a, b).
    members: Vec<[usize; 2]>,
    /// Each member's weight of each primitive pair, member-major.
    weights: Vec<f64>,
    /// Number of primitive pairs (the row length of `weights`).
    primitives: usize,
}

impl Columns {
    /// Member `member`'s weight of primitive pair `primitive`.
    fn weight(&self, member: usize, primitive: usize) -> f64 {
        self.weights[member * self.primitives + primitive]
    }
}

impl ShellPair {
    /// Number of primitive pairs kept (pairs with a zero weight are dropped).
    pub fn primitive_count(&self) -> usize {
        self.primitives.len()
    }

    /// The pairs of sets this pair computes, in the order of its blocks
    /// ([`EriEngine::pair_block`]): (a, b) for an ordinary pair, the member pairs of a
    /// column pair ([`EriEngine::column_pair`]).
    pub fn members(&self) -> Vec<[usize; 2]> {
        match &self.columns {
            Some(columns) => columns.members.clone(),
            None => vec![[self.a, self.b]],
        }
    }

    /// Number of member pairs (1 for an ordinary pair).
    pub fn member_count(&self) -> usize {
        self.columns.as_ref().map_or(1, |c| c.members.len())
    }

    /// The kernel's work, in multiply-adds, for a quartet with this pair as the bra
    /// (`n_bra` Hermite indices) and `ket` as the ket (`n_ket`), by `kernel`:
    /// - the reference: per primitive quartet, R gathered into rows and the ket's expansion
    ///   applied to them;
    /// - batched: per chunk of the ket's lanes, each lane's recursion, and the ket's
    ///   expansion applied to every bra index, once per ket member;
    ///
    /// then, per bra primitive, the bra's expansion, once per ket member. Every inner loop
    /// also costs [`LOOP_OVERHEAD`]. The Boys values, one per primitive quartet either way
    /// (padding lanes have none), are left out. A column pair's members
    /// ([`EriEngine::column_pair`]) add their weighted copies: of the ket contraction, of
    /// the bra's per bra primitive.
    fn kernel_cost(&self, n_bra: usize, ket: &ShellPair, n_ket: usize, kernel: Kernel) -> usize {
        let rows = |pair: &ShellPair| pair.row_starts.len().saturating_sub(1);
        let ket_members = ket.member_count();
        let mut per_bra_primitive =
            rows(ket) * n_bra + self.pattern.len() * (rows(ket) + LOOP_OVERHEAD);
        per_bra_primitive *= ket_members;
        if let Some(columns) = &self.columns {
            per_bra_primitive += ket_members * columns.members.len() * rows(self) * rows(ket);
        }
        let bra_primitives = self.primitives.len();
        let order = self.order + ket.order;
        // The recursion's steps: the Hermite indices of every order up to the quartet's.
        let steps = (order + 1) * (order + 2) * (order + 3) * (order + 4) / 24;
        if kernel == Kernel::Batched {
            let width = ket.lanes.width;
            let per_chunk = width * (steps + ket_members * ket.pattern.len() * n_bra)
                + ket_members * rows(ket) * n_bra * (width + LOOP_OVERHEAD);
            return bra_primitives * (ket.lanes.bounds.len() * per_chunk + per_bra_primitive);
        }
        let mut per_quartet =
            SCALAR_STEP * steps + n_ket * n_bra + ket.pattern.len() * (n_bra + LOOP_OVERHEAD);
        if ket.columns.is_some() {
            per_quartet += ket_members * rows(ket) * n_bra;
        }
        bra_primitives * (ket.primitives.len() * per_quartet + per_bra_primitive)
    }
}

/// Scratch space of one thread for [`EriEngine::quartet`]; reuse it across calls.
#[derive(Debug, Default)]
pub struct EriWorkspace {
    /// The Boys values F_0..=F_L of each primitive quartet kept, in the kernel's order.
    boys: Vec<f64>,
    r: Vec<f64>,
    r_scratch: Vec<f64>,
    /// Positions in R's cube of the bra's and the ket's Hermite indices.
    bra_offsets: Vec<usize>,
    ket_offsets: Vec<usize>,
    w: Vec<f64>,
    /// W per ket member, summed over the ket primitives: transposed, `[rows_ket][n_herm_bra]`,
    /// from the reference kernel; `[n_herm_bra][rows_ket]` from the batched one.
    w_by_ket: Vec<f64>,
    /// R gathered per ket Hermite index, `[n_herm_ket][n_herm_bra]`.
    r_rows: Vec<f64>,
    /// The ket contraction of one primitive quartet, before a column pair's member weights.
    ket_sum: Vec<f64>,
    /// The bra contraction of one bra primitive, before a column pair's member weights.
    bra_sum: Vec<f64>,
    /// The blocks being summed, one per member quartet, `[na][nb][nc][nd]` each.
    block: Vec<f64>,
    /// The blocks of a swapped orientation, transposed back into the order asked.
    transposed: Vec<f64>,
    /// The finished blocks the kernel returns a view of (swapped with `block` or
    /// `transposed`, so neither is copied).
    out: Vec<f64>,
    /// The batched kernel's scaled Boys values by level, `[n][lane]`.
    lane_levels: Vec<f64>,
    /// The batched kernel's Hermite integrals by cube entry, `[entry][lane]`, and the other
    /// level of their recursion.
    lane_r: Vec<f64>,
    lane_scratch: Vec<f64>,
    /// The batched kernel's cube offset of each entry of the ket's expansion table.
    entry_offsets: Vec<usize>,
}

impl EriWorkspace {
    /// An empty workspace (buffers grow on first use).
    pub fn new() -> Self {
        Self::default()
    }
}

/// The ERI engine of one basis: its function shells (the basis's shells, then any extra
/// sets) and the basis's canonical shell pairs.
#[derive(Clone, Debug)]
pub struct EriEngine {
    sets: Vec<FunctionShell>,
    shell_count: usize,
    pairs: Vec<ShellPair>,
    offsets: Vec<usize>,
    function_counts: Vec<usize>,
    /// Hermite indices per order, up to four times the largest degree of any set.
    hermite: Vec<Vec<[usize; 3]>>,
    nao: usize,
}

/// Index of the canonical pair (a, b), a >= b: a (a + 1) / 2 + b.
pub fn pair_index(a: usize, b: usize) -> usize {
    let (a, b) = if a >= b { (a, b) } else { (b, a) };
    a * (a + 1) / 2 + b
}

impl EriEngine {
    /// Precomputes every canonical shell pair of `basis` and its Schwarz bound.
    pub fn new(basis: &Basis) -> Self {
        Self::with_sets(basis, Vec::new())
    }

    /// [`EriEngine::new`] with `extra` function shells appended after the basis's shells
    /// (set indices `shell_count()..`); pairs involving them are built with
    /// [`EriEngine::pair`].
    pub fn with_sets(basis: &Basis, extra: Vec<FunctionShell>) -> Self {
        let kind = basis.kind();
        let mut sets: Vec<FunctionShell> = basis
            .shells()
            .iter()
            .map(|shell| FunctionShell::from_shell(shell, kind))
            .collect();
        let shell_count = sets.len();
        sets.extend(extra);
        let max_degree = sets.iter().map(|s| s.degree).max().unwrap_or(0);
        let mut engine = Self {
            function_counts: sets[..shell_count].iter().map(|s| s.functions).collect(),
            sets,
            shell_count,
            pairs: Vec::with_capacity(shell_count * (shell_count + 1) / 2),
            offsets: basis.offsets().to_vec(),
            hermite: (0..=4 * max_degree).map(hermite_indices).collect(),
            nao: basis.nao(),
        };
        let mut workspace = EriWorkspace::new();
        for a in 0..shell_count {
            for b in 0..=a {
                let pair = engine.pair_with(a, b, &mut workspace);
                engine.pairs.push(pair);
            }
        }
        engine
    }

    /// The pair (a, b) of any two sets (indices into [`EriEngine::set`]), with its Schwarz
    /// bounds.
    pub fn pair(&self, a: usize, b: usize) -> ShellPair {
        self.pair_with(a, b, &mut EriWorkspace::new())
    }

    fn pair_with(&self, a: usize, b: usize, workspace: &mut EriWorkspace) -> ShellPair {
        let (mut pair, _) = self.pair_tables(a, b, true);
        let bounds = self.primitive_bounds(&pair, workspace);
        // The pair's own bound from every primitive quartet: its primitive bounds are still
        // infinite here. Screening its (ab|ab) by them would be absolute (PRIMITIVE_THRESHOLD)
        // where the bound must be relative: a pair whose primitive bounds are all below 1e-8
        // would get Q_ab = 0, and every quartet with it would be dropped, however large.
        pair.schwarz = self.diagonal_max(
            &pair,
            self.pair_block_with(&pair, &pair, Kernel::PerQuartet, workspace),
        );
        for (primitive, bound) in pair.primitives.iter_mut().zip(bounds) {
            primitive.schwarz = bound;
        }
        finish_pair(&mut pair);
        pair
    }

    /// sqrt(max |(ij|ij)|) over the functions i, j of `pair`'s sets, from its block with
    /// itself.
    fn diagonal_max(&self, pair: &ShellPair, block: &[f64]) -> f64 {
        let (na, nb) = (self.sets[pair.a].functions, self.sets[pair.b].functions);
        let mut largest: f64 = 0.0;
        for i in 0..na {
            for j in 0..nb {
                let ij = i * nb + j;
                largest = largest.max(block[ij * na * nb + ij].abs());
            }
        }
        largest.sqrt()
    }

    /// The Schwarz bound of each primitive pair of `pair` alone (of its tables as they are:
    /// without the members' weights for a table of columns).
    fn primitive_bounds(&self, pair: &ShellPair, workspace: &mut EriWorkspace) -> Vec<f64> {
        (0..pair.primitives.len())
            .map(|primitive| {
                let mut single = pair.clone();
                single.primitives = vec![single.primitives[primitive].clone()];
                single.columns = None;
                let block = self.pair_block_with(&single, &single, Kernel::PerQuartet, workspace);
                self.diagonal_max(&single, block)
            })
            .collect()
    }

    /// The pair over the columns of general contractions (cc-pVXZ's shells that share
    /// their primitives): `first` and `second` each list basis shells with one centre, one
    /// angular momentum, the same exponents and the same non-zero primitives. The same list
    /// twice stands for the member pairs `(first[x], first[y])`, y <= x; two lists for every
    /// `(first[x], second[y])`. Its block with another pair ([`EriEngine::pair_block`]) holds
    /// every member's block, equal to the member's own to rounding, from primitive work
    /// (Boys values, Hermite integrals and their contraction with the expansion) done once
    /// for all members.
    ///
    /// Panics if a list is empty or names a set that is not a shell of the basis.
    pub fn column_pair(&self, first: &[usize], second: &[usize]) -> ShellPair {
        assert!(
            !first.is_empty() && !second.is_empty(),
            "column_pair needs columns on both sides"
        );
        let same = first == second;
        let members: Vec<[usize; 2]> = if same {
            (0..first.len())
                .flat_map(|x| (0..=x).map(move |y| [first[x], first[y]]))
                .collect()
        } else {
            first
                .iter()
                .flat_map(|&a| second.iter().map(move |&b| [a, b]))
                .collect()
        };
        assert!(
            members
                .iter()
                .all(|&[a, b]| a < self.shell_count && b < self.shell_count),
            "column_pair takes shells of the basis"
        );
        let (mut pair, kept) = self.pair_tables(first[0], second[0], false);
        let mut weights = Vec::with_capacity(members.len() * kept.len());
        for &[a, b] in &members {
            let (wa, wb) = (&self.sets[a].weights, &self.sets[b].weights);
            // A list with itself keeps one of the primitive pairs (i, j) and (j, i), which
            // make the same Gaussian product on one centre (`pair_tables`).
            weights.extend(kept.iter().map(|&[i, j]| {
                if same && i != j {
                    wa[i] * wb[j] + wa[j] * wb[i]
                } else {
                    wa[i] * wb[j]
                }
            }));
        }
        let columns = Columns {
            members,
            weights,
            primitives: kept.len(),
        };
        // A primitive quartet's share of a member's integral is its weight times the
        // unweighted tables' integral: bounded by the largest weight times the unweighted
        // bound.
        let bounds = self.primitive_bounds(&pair, &mut EriWorkspace::new());
        for (k, (primitive, bound)) in pair.primitives.iter_mut().zip(bounds).enumerate() {
            let largest = (0..columns.members.len())
                .map(|m| columns.weight(m, k).abs())
                .fold(0.0, f64::max);
            primitive.schwarz = bound * largest;
        }
        pair.schwarz = columns
            .members
            .iter()
            .map(|&[a, b]| self.pairs[pair_index(a, b)].schwarz)
            .fold(0.0, f64::max);
        pair.columns = Some(columns);
        finish_pair(&mut pair);
        pair
    }

    /// The expansion tables of the pair (a, b), Schwarz bounds not yet set (infinite), and
    /// the primitives (i, j) of each primitive pair kept. With `weighted` false the tables
    /// leave out the contraction weights (and the factor 2 of a set paired with itself):
    /// a column pair's members weigh them ([`EriEngine::column_pair`]).
    fn pair_tables(&self, a: usize, b: usize, weighted: bool) -> (ShellPair, Vec<[usize; 2]>) {
        let (set_a, set_b) = (&self.sets[a], &self.sets[b]);
        let (la, lb) = (set_a.degree, set_b.degree);
        let order = la + lb;
        let herm = &self.hermite[order];
        let stride = order + 1;
        let at = |i: usize, j: usize, t: usize| (i * (lb + 1) + j) * stride + t;
        let separation = [
            set_a.center[0] - set_b.center[0],
            set_a.center[1] - set_b.center[1],
            set_a.center[2] - set_b.center[2],
        ];
        let rows = PairRows::new(set_a, set_b, herm);
        let mut e = [Vec::new(), Vec::new(), Vec::new()];
        let mut primitives = Vec::new();
        let mut kept = Vec::new();
        // A set paired with itself: primitives (i, j) and (j, i) make one Gaussian product
        // on one centre, x^(ca + cb) exp(-p x^2) per axis, so one of them, counted twice,
        // stands for both (n (n + 1) / 2 primitive pairs instead of n^2).
        let same_set = a == b;
        for (i, (&ea, &da)) in set_a.exponents.iter().zip(&set_a.weights).enumerate() {
            for (j, (&eb, &db)) in set_b.exponents.iter().zip(&set_b.weights).enumerate() {
                if da == 0.0 || db == 0.0 || (same_set && j > i) {
                    continue;
                }
                let multiplicity = if same_set && j < i { 2.0 } else { 1.0 };
                let p = ea + eb;
                for axis in 0..3 {
                    expansion(la, lb, ea, eb, separation[axis], &mut e[axis]);
                }
                let weight = if weighted {
                    multiplicity * da * db
                } else {
                    1.0
                };
                let mut values = Vec::with_capacity(rows.pattern.len());
                let mut signed_values = Vec::with_capacity(rows.pattern.len());
                for row in 0..rows.len() {
                    let terms = &rows.terms[rows.term_starts[row]..rows.term_starts[row + 1]];
                    for &h in &rows.pattern[rows.row_starts[row]..rows.row_starts[row + 1]] {
                        let [t, u, v] = herm[h];
                        let mut sum = 0.0;
                        for &(ca, cb, factor) in terms {
                            let (ca, cb) = (set_a.monomials[ca], set_b.monomials[cb]);
                            if reaches(ca, cb, herm[h]) {
                                sum += factor
                                    * e[0][at(ca[0], cb[0], t)]
                                    * e[1][at(ca[1], cb[1], u)]
                                    * e[2][at(ca[2], cb[2], v)];
                            }
                        }
                        let value = weight * sum;
                        values.push(value);
                        signed_values.push(if (t + u + v) % 2 == 0 { value } else { -value });
                    }
                }
                primitives.push(PrimitivePair {
                    exponent: p,
                    center: [
                        (ea * set_a.center[0] + eb * set_b.center[0]) / p,
                        (ea * set_a.center[1] + eb * set_b.center[1]) / p,
                        (ea * set_a.center[2] + eb * set_b.center[2]) / p,
                    ],
                    values,
                    signed_values,
                    schwarz: f64::INFINITY,
                });
                kept.push([i, j]);
            }
        }
        let pair = ShellPair {
            a,
            b,
            order,
            pattern: rows.pattern,
            row_starts: rows.row_starts,
            primitives,
            schwarz: f64::INFINITY,
            columns: None,
            lanes: KetLanes::default(),
        };
        (pair, kept)
    }

    /// Bytes held by the canonical pairs' tables (patterns, row starts, per primitive pair
    /// its values, exponent, centre, bound and vector headers, and the ket lanes).
    #[cfg(test)]
    pub(crate) fn pair_data_bytes(&self) -> u64 {
        let word = std::mem::size_of::<usize>() as u64;
        self.pairs
            .iter()
            .map(|pair| {
                let tables = (pair.pattern.len() + pair.row_starts.len()) as u64 * word;
                let primitives: u64 = pair
                    .primitives
                    .iter()
                    .map(|p| (p.values.len() + p.signed_values.len()) as u64 * 8 + 5 * 8 + 6 * word)
                    .sum();
                tables + primitives + pair.lanes.bytes() + 6 * 3 * word
            })
            .sum()
    }

    /// The canonical shell pairs, indexed by [`pair_index`].
    pub fn pairs(&self) -> &[ShellPair] {
        &self.pairs
    }

    /// Number of shells of the basis.
    pub fn shell_count(&self) -> usize {
        self.shell_count
    }

    /// A function shell: the basis's shells, then the extra sets.
    pub fn set(&self, index: usize) -> &FunctionShell {
        &self.sets[index]
    }

    /// Number of AOs.
    pub fn nao(&self) -> usize {
        self.nao
    }

    /// First AO of each shell.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// AOs per shell.
    pub fn function_counts(&self) -> &[usize] {
        &self.function_counts
    }

    /// The AO block of (ab|cd) for two canonical pairs (by [`pair_index`]), row-major
    /// `[na][nb][nc][nd]` with a >= b, c >= d the pairs' shells. Borrowed from the workspace until
    /// its next use.
    pub fn canonical_quartet<'w>(
        &self,
        bra: usize,
        ket: usize,
        workspace: &'w mut EriWorkspace,
    ) -> &'w [f64] {
        self.pair_block(&self.pairs[bra], &self.pairs[ket], workspace)
    }

    /// The block (ab|cd) of two pairs of sets given by reference, row-major `[na][nb][nc][nd]`
    /// over the sets' output functions. Borrowed from the workspace until its next use. For
    /// column pairs ([`EriEngine::column_pair`]) it is every member quartet's block in turn,
    /// bra member major: the block of bra member x and ket member y starts at
    /// `(x * ket_members + y) * na * nb * nc * nd`.
    ///
    /// The kernel's inner loops run over the Hermite indices of the side it calls the bra,
    /// and it contracts the other side's primitives first, several at once (the batched
    /// kernel): the orientation with the fewer multiply-adds (counted from the pairs'
    /// expansion tables) is computed, and the block transposed if it was (cd|ab). The
    /// choice depends on the two pairs only, so the bits do not depend on who asks.
    pub fn pair_block<'w>(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        workspace: &'w mut EriWorkspace,
    ) -> &'w [f64] {
        self.pair_block_with(bra_pair, ket_pair, Kernel::Batched, workspace)
    }

    /// [`EriEngine::pair_block`] by the reference kernel, one primitive quartet at a time
    /// (`Kernel::PerQuartet`): what the batched kernel is tested against.
    pub fn reference_pair_block<'w>(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        workspace: &'w mut EriWorkspace,
    ) -> &'w [f64] {
        self.pair_block_with(bra_pair, ket_pair, Kernel::PerQuartet, workspace)
    }

    /// [`EriEngine::pair_block`] by `kernel` where it applies ([`EriEngine::block_plan`]).
    pub(crate) fn pair_block_with<'w>(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        kernel: Kernel,
        workspace: &'w mut EriWorkspace,
    ) -> &'w [f64] {
        let (swap, oriented_kernel) = self.block_plan(bra_pair, ket_pair, kernel);
        if !swap {
            return self.oriented_block_with(
                bra_pair,
                ket_pair,
                DOT_PRODUCT_KET,
                oriented_kernel,
                workspace,
            );
        }
        self.oriented_block_with(
            ket_pair,
            bra_pair,
            DOT_PRODUCT_KET,
            oriented_kernel,
            workspace,
        );
        // Blocks [ket member][bra member] of [nc][nd][na][nb] -> [bra member][ket member] of
        // [na][nb][nc][nd].
        let rows = self.sets[ket_pair.a].functions * self.sets[ket_pair.b].functions;
        let columns = self.sets[bra_pair.a].functions * self.sets[bra_pair.b].functions;
        let (bra_members, ket_members) = (bra_pair.member_count(), ket_pair.member_count());
        let size = rows * columns;
        let ws = workspace;
        ws.transposed.clear();
        ws.transposed.resize(size * bra_members * ket_members, 0.0);
        for (index, block) in ws.out.chunks_exact(size).enumerate() {
            let (y, x) = (index / bra_members, index % bra_members);
            let target = &mut ws.transposed[(x * ket_members + y) * size..][..size];
            for (r, row) in block.chunks_exact(columns).enumerate() {
                for (c, value) in row.iter().enumerate() {
                    target[c * rows + r] = *value;
                }
            }
        }
        std::mem::swap(&mut ws.out, &mut ws.transposed);
        &ws.out
    }

    /// How [`EriEngine::pair_block_with`] computes (bra | ket) asked of `kernel`: whether
    /// as (ket | bra), and by which kernel. The batched kernel gives way to the reference
    /// above the recursion's scheduled orders ([`SCHEDULED_ORDER`]), for a pair whose lanes
    /// are not built yet (while its bounds are computed), and for a ket of one lane, which
    /// has nothing to batch (the reference's rows are then faster). Of the two
    /// orientations, the one of fewer multiply-adds ([`ShellPair::kernel_cost`]).
    fn block_plan(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        kernel: Kernel,
    ) -> (bool, Kernel) {
        let batched = kernel == Kernel::Batched
            && bra_pair.order + ket_pair.order <= SCHEDULED_ORDER
            && bra_pair.lanes.width > 0
            && ket_pair.lanes.width > 0;
        let kernel_for = |ket: &ShellPair| {
            if batched && ket.lanes.width > 1 {
                Kernel::Batched
            } else {
                Kernel::PerQuartet
            }
        };
        let hermite_count = |pair: &ShellPair| self.hermite[pair.order].len();
        let (n_bra, n_ket) = (hermite_count(bra_pair), hermite_count(ket_pair));
        let (given_kernel, swapped_kernel) = (kernel_for(ket_pair), kernel_for(bra_pair));
        let as_given = bra_pair.kernel_cost(n_bra, ket_pair, n_ket, given_kernel);
        let swapped = ket_pair.kernel_cost(n_ket, bra_pair, n_bra, swapped_kernel);
        if swapped >= as_given {
            (false, given_kernel)
        } else {
            (true, swapped_kernel)
        }
    }

    /// [`EriEngine::pair_block_with`] computed in the orientation given: the inner loops
    /// over `bra_pair`'s Hermite indices, `ket_pair`'s primitives contracted first; the bra
    /// side summed by sparse dot products for kets of at most `dot_product_ket` function
    /// products.
    fn oriented_block_with<'w>(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        dot_product_ket: usize,
        kernel: Kernel,
        workspace: &'w mut EriWorkspace,
    ) -> &'w [f64] {
        let set_index = [bra_pair.a, bra_pair.b, ket_pair.a, ket_pair.b];
        let sets = set_index.map(|set| &self.sets[set]);
        let order = bra_pair.order + ket_pair.order;
        let dim = order + 1;
        let herm_bra = &self.hermite[bra_pair.order];
        let herm_ket = &self.hermite[ket_pair.order];
        let rows_bra = sets[0].functions * sets[1].functions;
        let rows_ket = sets[2].functions * sets[3].functions;
        let (bra_members, ket_members) = (bra_pair.member_count(), ket_pair.member_count());
        let ws = workspace;
        let n_bra = herm_bra.len();
        // R offsets of the bra Hermite indices, and of every ket Hermite index: R_{h + h'}
        // for every bra h, gathered into one contiguous row per ket h', makes the sums below
        // run over contiguous rows, independent across bra indices.
        ws.bra_offsets.clear();
        ws.bra_offsets
            .extend(herm_bra.iter().map(|[t, u, v]| (t * dim + u) * dim + v));
        ws.ket_offsets.clear();
        ws.ket_offsets
            .extend(herm_ket.iter().map(|[t, u, v]| (t * dim + u) * dim + v));
        // One block per member quartet, bra member major, and W per ket member.
        let block_size = rows_bra * rows_ket;
        let w_size = rows_ket * n_bra;
        ws.block.clear();
        ws.block.resize(bra_members * ket_members * block_size, 0.0);
        ws.w.resize(w_size, 0.0);
        ws.w_by_ket.resize(ket_members * w_size, 0.0);
        if kernel == Kernel::PerQuartet {
            ws.r_rows.resize(herm_ket.len() * n_bra, 0.0);
            if ket_members > 1 {
                ws.ket_sum.resize(w_size, 0.0);
            }
            self.quartet_boys(bra_pair, ket_pair, order, ws);
        } else {
            // The cube offset of each entry of the ket's expansion table.
            ws.entry_offsets.clear();
            ws.entry_offsets
                .extend(ket_pair.pattern.iter().map(|&h| ws.ket_offsets[h]));
        }
        if bra_members > 1 {
            ws.bra_sum.resize(block_size, 0.0);
        }
        // A ket of few rows (an ss pair) makes the bra's rows of W short: the bra side then
        // sums each integral as one sparse dot product over W's columns instead of adding
        // short rows. The same terms are added to each integral in the same order either
        // way, so the bits are the same.
        let by_dot = rows_ket <= dot_product_ket && bra_pair.columns.is_none();
        let boys_len = order + 1;
        let mut boys_values = 0..0;
        for (bra_index, bra_prim) in bra_pair.primitives.iter().enumerate() {
            ws.w_by_ket.fill(0.0);
            match (kernel, ket_pair.lanes.width) {
                (Kernel::PerQuartet, _) => {
                    self.per_quartet_ket_side(
                        bra_prim,
                        ket_pair,
                        order,
                        n_bra,
                        &mut boys_values,
                        boys_len,
                        ws,
                    );
                }
                (Kernel::Batched, 1) => batched_ket_side::<1>(bra_prim, ket_pair, order, ws),
                (Kernel::Batched, 2) => batched_ket_side::<2>(bra_prim, ket_pair, order, ws),
                (Kernel::Batched, 4) => batched_ket_side::<4>(bra_prim, ket_pair, order, ws),
                (Kernel::Batched, _) => batched_ket_side::<LANES>(bra_prim, ket_pair, order, ws),
            }
            let bra = SparseRows {
                starts: &bra_pair.row_starts,
                entries: &bra_pair.pattern,
                values: &bra_prim.values,
            };
            for (ket_member, w_by_ket) in ws.w_by_ket.chunks_exact(w_size).enumerate() {
                if by_dot {
                    let block = &mut ws.block[ket_member * block_size..][..block_size];
                    if kernel == Kernel::Batched && rows_ket > 1 {
                        add_bra_dots::<false>(block, w_by_ket, bra, rows_ket, n_bra);
                    } else {
                        add_bra_dots::<true>(block, w_by_ket, bra, rows_ket, n_bra);
                    }
                    continue;
                }
                // W[h][c], as the bra side reads it: the batched kernel wrote it so, the
                // reference kernel transposed.
                let w_rows: &[f64] = if kernel == Kernel::Batched {
                    w_by_ket
                } else {
                    for (c, w_column) in w_by_ket.chunks_exact(n_bra).enumerate() {
                        for (h, value) in w_column.iter().enumerate() {
                            ws.w[h * rows_ket + c] = *value;
                        }
                    }
                    &ws.w
                };
                let Some(columns) = &bra_pair.columns else {
                    let block = &mut ws.block[ket_member * block_size..][..block_size];
                    add_rows(block, w_rows, bra, 1.0, rows_ket);
                    continue;
                };
                // Summed once, then weighted into each bra member's block.
                ws.bra_sum.fill(0.0);
                add_rows(&mut ws.bra_sum, w_rows, bra, 1.0, rows_ket);
                for bra_member in 0..bra_members {
                    let start = (bra_member * ket_members + ket_member) * block_size;
                    add_scaled(
                        &mut ws.block[start..][..block_size],
                        &ws.bra_sum,
                        columns.weight(bra_member, bra_index),
                    );
                }
            }
        }
        // The tables' rows are products of output functions: the blocks are final.
        std::mem::swap(&mut ws.out, &mut ws.block);
        &ws.out
    }

    /// The Boys values of every primitive quartet the reference kernel keeps, in its order,
    /// into `ws.boys`: each reads a row of a table larger than the fastest caches, and in
    /// one loop those reads overlap.
    fn quartet_boys(
        &self,
        bra_pair: &ShellPair,
        ket_pair: &ShellPair,
        order: usize,
        ws: &mut EriWorkspace,
    ) {
        let boys_len = order + 1;
        ws.boys.clear();
        for bra_prim in &bra_pair.primitives {
            for ket_prim in &ket_pair.primitives {
                if bra_prim.schwarz * ket_prim.schwarz < PRIMITIVE_THRESHOLD {
                    continue;
                }
                let (alpha, pq) = alpha_and_separation(bra_prim, ket_prim);
                let t_arg = alpha * (pq[0] * pq[0] + pq[1] * pq[1] + pq[2] * pq[2]);
                let start = ws.boys.len();
                ws.boys.resize(start + boys_len, 0.0);
                boys(t_arg, &mut ws.boys[start..]);
            }
        }
    }

    /// The reference kernel's ket side for one bra primitive pair: `ws.w_by_ket` (zeroed by
    /// the caller) summed over the ket's primitive pairs one at a time, reading their Boys
    /// values from `ws.boys` after `boys_values` (advanced past them).
    #[allow(clippy::too_many_arguments)]
    fn per_quartet_ket_side(
        &self,
        bra_prim: &PrimitivePair,
        ket_pair: &ShellPair,
        order: usize,
        n_bra: usize,
        boys_values: &mut std::ops::Range<usize>,
        boys_len: usize,
        ws: &mut EriWorkspace,
    ) {
        let two_pi_52 = 2.0 * std::f64::consts::PI.powf(2.5);
        let p = bra_prim.exponent;
        let w_size = ws.w.len();
        for (ket_index, ket_prim) in ket_pair.primitives.iter().enumerate() {
            if bra_prim.schwarz * ket_prim.schwarz < PRIMITIVE_THRESHOLD {
                continue;
            }
            let q = ket_prim.exponent;
            let prefactor = two_pi_52 / (p * q * (p + q).sqrt());
            let (alpha, pq) = alpha_and_separation(bra_prim, ket_prim);
            *boys_values = boys_values.end..boys_values.end + boys_len;
            coulomb_from_boys(
                order,
                alpha,
                pq,
                &ws.boys[boys_values.clone()],
                &mut ws.r,
                &mut ws.r_scratch,
            );
            // R_{h + h'} for every bra h, one contiguous row per ket h'.
            gather_rows(
                &mut ws.r_rows,
                &ws.r,
                &ws.ket_offsets,
                &ws.bra_offsets,
                n_bra,
            );
            let ket = SparseRows {
                starts: &ket_pair.row_starts,
                entries: &ket_pair.pattern,
                values: &ket_prim.signed_values,
            };
            let Some(columns) = &ket_pair.columns else {
                add_rows(&mut ws.w_by_ket, &ws.r_rows, ket, prefactor, n_bra);
                continue;
            };
            // Contracted once, then weighted into each ket member's W.
            ws.ket_sum.fill(0.0);
            add_rows(&mut ws.ket_sum, &ws.r_rows, ket, prefactor, n_bra);
            for (member, w_member) in ws.w_by_ket.chunks_exact_mut(w_size).enumerate() {
                add_scaled(w_member, &ws.ket_sum, columns.weight(member, ket_index));
            }
        }
    }

    /// The AO block of (ab|cd) for any four shells, row-major `[na][nb][nc][nd]` (a copy,
    /// permuted from the canonical quartet).
    pub fn quartet(&self, shells: [usize; 4], workspace: &mut EriWorkspace) -> Vec<f64> {
        let [a, b, c, d] = shells;
        let bra = pair_index(a, b);
        let ket = pair_index(c, d);
        let swap_bra = a < b;
        let swap_ket = c < d;
        let swap_sides = bra < ket;
        let (first, second) = if swap_sides { (ket, bra) } else { (bra, ket) };
        let block = self.canonical_quartet(first, second, workspace);
        let counts = [a, b, c, d].map(|s| self.function_counts[s]);
        // Canonical block dimensions, in the canonical order of shells.
        let canonical_shells = {
            let bra_shells = [self.pairs[first].a, self.pairs[first].b];
            let ket_shells = [self.pairs[second].a, self.pairs[second].b];
            [bra_shells[0], bra_shells[1], ket_shells[0], ket_shells[1]]
        };
        let dims = canonical_shells.map(|s| self.function_counts[s]);
        let mut out = vec![0.0; counts.iter().product()];
        let mut index = 0;
        for i in 0..counts[0] {
            for j in 0..counts[1] {
                for k in 0..counts[2] {
                    for l in 0..counts[3] {
                        let (p, q) = if swap_bra { (j, i) } else { (i, j) };
                        let (r, s) = if swap_ket { (l, k) } else { (k, l) };
                        let [w, x, y, z] = if swap_sides {
                            [r, s, p, q]
                        } else {
                            [p, q, r, s]
                        };
                        out[index] = block[((w * dims[1] + x) * dims[2] + y) * dims[3] + z];
                        index += 1;
                    }
                }
            }
        }
        out
    }

    /// The full ERI tensor (nao^4, row-major, (ij|kl) at ((i n + j) n + k) n + l), without
    /// screening. For tests and small systems only: memory grows as nao^4.
    pub fn full_tensor(&self) -> Vec<f64> {
        let n = self.nao;
        let mut out = vec![0.0; n * n * n * n];
        let mut workspace = EriWorkspace::new();
        for bra in 0..self.pairs.len() {
            for ket in 0..=bra {
                let (a, b) = (self.pairs[bra].a, self.pairs[bra].b);
                let (c, d) = (self.pairs[ket].a, self.pairs[ket].b);
                let counts = [
                    self.function_counts[a],
                    self.function_counts[b],
                    self.function_counts[c],
                    self.function_counts[d],
                ];
                let starts = [
                    self.offsets[a],
                    self.offsets[b],
                    self.offsets[c],
                    self.offsets[d],
                ];
                let block = self.canonical_quartet(bra, ket, &mut workspace);
                let mut index = 0;
                for i in 0..counts[0] {
                    for j in 0..counts[1] {
                        for k in 0..counts[2] {
                            for l in 0..counts[3] {
                                let value = block[index];
                                index += 1;
                                let (i, j, k, l) =
                                    (starts[0] + i, starts[1] + j, starts[2] + k, starts[3] + l);
                                for (p, q, r, s) in [
                                    (i, j, k, l),
                                    (j, i, k, l),
                                    (i, j, l, k),
                                    (j, i, l, k),
                                    (k, l, i, j),
                                    (l, k, i, j),
                                    (k, l, j, i),
                                    (l, k, j, i),
                                ] {
                                    out[((p * n + q) * n + r) * n + s] = value;
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }
}

/// The batched kernel's ket side for one bra primitive pair: `ws.w_by_ket` (zeroed by the
/// caller; one W per ket member, `[n_bra][rows_ket]`) summed over the ket's chunks of `W`
/// lanes. A chunk whose largest bound times the bra's is below [`PRIMITIVE_THRESHOLD`] is
/// skipped whole; the others compute every live lane.
fn batched_ket_side<const W: usize>(
    bra_prim: &PrimitivePair,
    ket_pair: &ShellPair,
    order: usize,
    ws: &mut EriWorkspace,
) {
    let two_pi_52 = 2.0 * std::f64::consts::PI.powf(2.5);
    let lanes = &ket_pair.lanes;
    let entries = ket_pair.pattern.len();
    let chunks = lanes.bounds.len();
    let live = ket_pair.primitives.len();
    let cube = (order + 1).pow(3);
    // Every entry read is written first, so the buffers only grow, never get zeroed.
    for (buffer, length) in [
        (&mut ws.lane_levels, (order + 1) * W),
        (&mut ws.lane_r, cube * W),
        (&mut ws.lane_scratch, cube * W),
    ] {
        if buffer.len() < length {
            buffer.resize(length, 0.0);
        }
    }
    let w_size = ws.w_by_ket.len() / ket_pair.member_count();
    let p = bra_prim.exponent;
    let mut boys_values = [[0.0; MAX_M + 1]; W];
    for (chunk, bound) in lanes.bounds.iter().enumerate() {
        if bra_prim.schwarz * bound < PRIMITIVE_THRESHOLD {
            continue;
        }
        let levels = &mut ws.lane_levels.as_chunks_mut::<W>().0[..=order];
        // Every lane's P - Q, T, prefactor and -2 alpha in one loop over arrays (padding
        // lanes too: their exponent 1 and centre 0 keep them finite), then the live lanes'
        // Boys values, then the levels, lane-wise.
        let range = chunk * W..(chunk + 1) * W;
        let exponents: &[f64; W] = lanes.exponent[range.clone()]
            .try_into()
            .expect("whole chunks");
        let centers: [&[f64; W]; 3] = [0, 1, 2].map(|axis| {
            lanes.center[axis][range.clone()]
                .try_into()
                .expect("whole chunks")
        });
        let mut pc = [[0.0; W]; 3];
        let (mut t_args, mut scales, mut minus_two_alpha) = ([0.0; W], [0.0; W], [0.0; W]);
        for lane in 0..W {
            let q = exponents[lane];
            for axis in 0..3 {
                pc[axis][lane] = bra_prim.center[axis] - centers[axis][lane];
            }
            let alpha = p * q / (p + q);
            let distance =
                pc[0][lane] * pc[0][lane] + pc[1][lane] * pc[1][lane] + pc[2][lane] * pc[2][lane];
            t_args[lane] = alpha * distance;
            scales[lane] = two_pi_52 / (p * q * (p + q).sqrt());
            minus_two_alpha[lane] = -2.0 * alpha;
        }
        let live_lanes = W.min(live - chunk * W);
        for (lane, values) in boys_values.iter_mut().enumerate() {
            if lane < live_lanes {
                boys(t_args[lane], &mut values[..=order]);
            } else {
                // Padding: zero levels give zero integrals (and its table is zero too).
                values[..=order].fill(0.0);
            }
        }
        for (n, level) in levels.iter_mut().enumerate() {
            for lane in 0..W {
                level[lane] = scales[lane] * boys_values[lane][n];
                scales[lane] *= minus_two_alpha[lane];
            }
        }
        let r = ws.lane_r.as_chunks_mut::<W>().0;
        let done = coulomb_lanes::<W>(
            order,
            &pc,
            levels,
            r,
            ws.lane_scratch.as_chunks_mut::<W>().0,
        );
        debug_assert!(done, "the caller takes orders the recursion schedules");
        let r = &*r;
        for (member, w_member) in ws.w_by_ket.chunks_exact_mut(w_size).enumerate() {
            let table = &lanes.values[(member * chunks + chunk) * entries * W..][..entries * W];
            contract_lanes::<W>(
                w_member,
                r,
                table.as_chunks::<W>().0,
                &ket_pair.row_starts,
                &ws.entry_offsets,
                &ws.bra_offsets,
            );
        }
    }
}

/// `w[h][c] += sum over row c's entries e and the lanes l of table[e][l] r[offset_e + h][l]`
/// (`r` the lanes' Hermite integrals by cube entry, `entry_offsets[e]` the cube offset of
/// entry e's ket Hermite index, `bra_offsets[h]` of bra index h); rows of `w` are
/// `rows_ket` long (W as the bra side reads it). Each sum runs lane-wise over the row's
/// entries in order, then over the lanes ([`lane_sum`]). (Gathering R into contiguous rows
/// first, as the reference kernel does, measured 11% more instructions in a whole J/K build
/// of water/cc-pVTZ: most kets here have few entries per row.)
#[inline(never)]
fn contract_lanes<const W: usize>(
    w: &mut [f64],
    r: &[[f64; W]],
    table: &[[f64; W]],
    row_starts: &[usize],
    entry_offsets: &[usize],
    bra_offsets: &[usize],
) {
    let rows_ket = row_starts.len() - 1;
    for c in 0..rows_ket {
        let range = row_starts[c]..row_starts[c + 1];
        let (offsets, values) = (&entry_offsets[range.clone()], &table[range]);
        let w_column = w[c..].iter_mut().step_by(rows_ket);
        if let ([offset], [value]) = (offsets, values) {
            // One entry (every row of an ss ket, for one): no sum over entries.
            let shifted = &r[*offset..];
            for (slot, &bra_offset) in w_column.zip(bra_offsets) {
                let integrals = &shifted[bra_offset];
                *slot += lane_sum::<W>(std::array::from_fn(|l| value[l] * integrals[l]));
            }
            continue;
        }
        for (slot, &bra_offset) in w_column.zip(bra_offsets) {
            let mut sum = [0.0; W];
            for (&offset, value) in offsets.iter().zip(values) {
                let integrals = &r[offset + bra_offset];
                for l in 0..W {
                    sum[l] += value[l] * integrals[l];
                }
            }
            *slot += lane_sum(sum);
        }
    }
}

/// The sum of the lanes of `x`, by halves: lane l and lane l + W/2 first, and so on, which
/// runs as whole-register additions.
#[inline(always)]
fn lane_sum<const W: usize>(mut x: [f64; W]) -> f64 {
    let mut width = W;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            x[l] += x[l + width];
        }
    }
    x[0]
}

/// Orders `pair`'s primitive pairs by their bounds, largest first (a column pair's member
/// weights with them), and builds its ket lanes: a bra primitive pair then meets the ket's
/// chunks in the order of their bounds, and the primitive screening drops whole chunks.
fn finish_pair(pair: &mut ShellPair) {
    let mut order: Vec<usize> = (0..pair.primitives.len()).collect();
    order.sort_by(|&x, &y| {
        pair.primitives[y]
            .schwarz
            .total_cmp(&pair.primitives[x].schwarz)
            .then(x.cmp(&y))
    });
    pair.primitives = order.iter().map(|&k| pair.primitives[k].clone()).collect();
    if let Some(columns) = &mut pair.columns {
        let count = columns.primitives;
        columns.weights = columns
            .weights
            .chunks_exact(count)
            .flat_map(|row| order.iter().map(move |&k| row[k]))
            .collect();
    }
    pair.lanes = KetLanes::new(pair);
}

/// The Hermite Coulomb integrals' exponent p q / (p + q) and P - Q of a primitive quartet.
fn alpha_and_separation(bra: &PrimitivePair, ket: &PrimitivePair) -> (f64, [f64; 3]) {
    let (p, q) = (bra.exponent, ket.exponent);
    let pq = [
        bra.center[0] - ket.center[0],
        bra.center[1] - ket.center[1],
        bra.center[2] - ket.center[2],
    ];
    (p * q / (p + q), pq)
}

/// A pair's expansion table for one primitive pair, row by row: row r's entries are
/// `entries[starts[r]..starts[r + 1]]` (Hermite indices) with `values` in the same places.
#[derive(Clone, Copy)]
struct SparseRows<'a> {
    starts: &'a [usize],
    entries: &'a [usize],
    values: &'a [f64],
}

// The kernel's loops, each in a function of its own: kept out of line they measured 7%
// fewer instructions than inlined into `oriented_block_with` (callgrind, every quartet of
// c2h6/def2-TZVP), with the same bits.

/// `rows[h'][h] = r[ket_offsets[h'] + bra_offsets[h]]`, rows `n_bra` long; the Hermite
/// counts of bra orders 0-3 by a copy with rows of fixed length ([`add_rows`]).
fn gather_rows(
    rows: &mut [f64],
    r: &[f64],
    ket_offsets: &[usize],
    bra_offsets: &[usize],
    n_bra: usize,
) {
    match n_bra {
        1 => gather_fixed_rows::<1>(rows, r, ket_offsets, bra_offsets),
        4 => gather_fixed_rows::<4>(rows, r, ket_offsets, bra_offsets),
        10 => gather_fixed_rows::<10>(rows, r, ket_offsets, bra_offsets),
        20 => gather_fixed_rows::<20>(rows, r, ket_offsets, bra_offsets),
        _ => gather_any_rows(rows, r, ket_offsets, bra_offsets, n_bra),
    }
}

/// [`gather_rows`] for rows of `N` values.
#[inline(never)]
fn gather_fixed_rows<const N: usize>(
    rows: &mut [f64],
    r: &[f64],
    ket_offsets: &[usize],
    bra_offsets: &[usize],
) {
    let bra_offsets: &[usize; N] = bra_offsets
        .try_into()
        .expect("one offset per bra Hermite index");
    let (rows, _) = rows.as_chunks_mut::<N>();
    for (row, ket_offset) in rows.iter_mut().zip(ket_offsets) {
        let shifted = &r[*ket_offset..];
        for k in 0..N {
            row[k] = shifted[bra_offsets[k]];
        }
    }
}

/// [`gather_rows`] for rows of any length.
#[inline(never)]
fn gather_any_rows(
    rows: &mut [f64],
    r: &[f64],
    ket_offsets: &[usize],
    bra_offsets: &[usize],
    n_bra: usize,
) {
    for (row, ket_offset) in rows.chunks_exact_mut(n_bra).zip(ket_offsets) {
        let shifted = &r[*ket_offset..];
        for (slot, bra_offset) in row.iter_mut().zip(bra_offsets) {
            *slot = shifted[*bra_offset];
        }
    }
}

/// `out[r][..] += scale sum_k E_k source[h_k][..]` over row r's entries (E_k, h_k) of
/// `table`, rows `width` long: the ket side (`out` = W^T, `source` = the gathered rows of R,
/// `scale` = the quartet's prefactor) and the bra side by rows (`out` = the block,
/// `source` = W, `scale` = 1). The common widths run a copy whose rows are arrays of that
/// length: the same arithmetic in the same order, so the same bits, without a loop over a
/// short row per entry. They are the Hermite counts of orders 0-6, the row counts of
/// spherical kets up to f-p and of d-d and f-f, of Cartesian d-s, d-p and d-d, and those of
/// the gradient's derivative pairs (2 n functions for a shell of n) that its kernels meet
/// most: 2, 14, 30 and 42 (in the gradient of c2h6/def2-TZVP, widths 84, 2, 30, 14 and 42
/// took 84% of this path's multiply-adds before they had arms of their own).
fn add_rows(out: &mut [f64], source: &[f64], table: SparseRows<'_>, scale: f64, width: usize) {
    match width {
        1 => add_fixed_rows::<1>(out, source, table, scale),
        2 => add_fixed_rows::<2>(out, source, table, scale),
        3 => add_fixed_rows::<3>(out, source, table, scale),
        4 => add_fixed_rows::<4>(out, source, table, scale),
        5 => add_fixed_rows::<5>(out, source, table, scale),
        6 => add_fixed_rows::<6>(out, source, table, scale),
        7 => add_fixed_rows::<7>(out, source, table, scale),
        9 => add_fixed_rows::<9>(out, source, table, scale),
        10 => add_fixed_rows::<10>(out, source, table, scale),
        14 => add_fixed_rows::<14>(out, source, table, scale),
        15 => add_fixed_rows::<15>(out, source, table, scale),
        18 => add_fixed_rows::<18>(out, source, table, scale),
        20 => add_fixed_rows::<20>(out, source, table, scale),
        21 => add_fixed_rows::<21>(out, source, table, scale),
        25 => add_fixed_rows::<25>(out, source, table, scale),
        30 => add_fixed_rows::<30>(out, source, table, scale),
        35 => add_fixed_rows::<35>(out, source, table, scale),
        36 => add_fixed_rows::<36>(out, source, table, scale),
        42 => add_fixed_rows::<42>(out, source, table, scale),
        49 => add_fixed_rows::<49>(out, source, table, scale),
        56 => add_fixed_rows::<56>(out, source, table, scale),
        84 => add_fixed_rows::<84>(out, source, table, scale),
        _ => add_any_rows(out, source, table, scale, width),
    }
}

/// [`add_rows`] for rows of `N` values.
#[inline(never)]
fn add_fixed_rows<const N: usize>(
    out: &mut [f64],
    source: &[f64],
    table: SparseRows<'_>,
    scale: f64,
) {
    let (out_rows, _) = out.as_chunks_mut::<N>();
    let (source_rows, _) = source.as_chunks::<N>();
    for (r, out_row) in out_rows.iter_mut().enumerate() {
        let range = table.starts[r]..table.starts[r + 1];
        for (&h, value) in table.entries[range.clone()]
            .iter()
            .zip(&table.values[range])
        {
            let weight = scale * value;
            let source_row = &source_rows[h];
            for k in 0..N {
                out_row[k] += weight * source_row[k];
            }
        }
    }
}

/// [`add_rows`] for rows of any length.
#[inline(never)]
fn add_any_rows(out: &mut [f64], source: &[f64], table: SparseRows<'_>, scale: f64, width: usize) {
    for (r, out_row) in out.chunks_exact_mut(width).enumerate() {
        // Slices of the row, not an iterator over (entry, value): measured 12% fewer
        // instructions in this loop.
        let range = table.starts[r]..table.starts[r + 1];
        for (&h, value) in table.entries[range.clone()]
            .iter()
            .zip(&table.values[range])
        {
            let weight = scale * value;
            let source_row = &source[h * width..(h + 1) * width];
            for (slot, x) in out_row.iter_mut().zip(source_row) {
                *slot += weight * x;
            }
        }
    }
}

/// `out += scale * source`, element by element.
#[inline(never)]
fn add_scaled(out: &mut [f64], source: &[f64], scale: f64) {
    for (slot, x) in out.iter_mut().zip(source) {
        *slot += scale * x;
    }
}

/// `block[row][c] += sum_k E_k W[h_k][c]` over bra row `row`'s entries (Hermite indices):
/// one sparse dot product per integral, `block` rows `rows_ket` long, W's rows
/// `n_bra` long. `TRANSPOSED`: `w` holds W^T (`[rows_ket][n_bra]`, as the reference kernel
/// writes it), else W (`[n_bra][rows_ket]`, as the batched one does); for one row the two
/// are the same.
#[inline(never)]
fn add_bra_dots<const TRANSPOSED: bool>(
    block: &mut [f64],
    w: &[f64],
    bra: SparseRows<'_>,
    rows_ket: usize,
    n_bra: usize,
) {
    for (row, block_row) in block.chunks_exact_mut(rows_ket).enumerate() {
        let range = bra.starts[row]..bra.starts[row + 1];
        let (entries, values) = (&bra.entries[range.clone()], &bra.values[range]);
        for (c, slot) in block_row.iter_mut().enumerate() {
            let mut sum = *slot;
            if TRANSPOSED {
                let column = &w[c * n_bra..][..n_bra];
                for (&h, e) in entries.iter().zip(values) {
                    sum += e * column[h];
                }
            } else {
                let column = &w[c..];
                for (&h, e) in entries.iter().zip(values) {
                    sum += e * column[h * rows_ket];
                }
            }
            *slot = sum;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{AngularKind, BasisSet, Molecule};

    /// The engine of water in `basis` (a shipped name). def2-TZVP has s, p, d and f shells,
    /// contracted and not; in cc-pVTZ oxygen's s shells 0 and 2 are columns over the same ten
    /// primitives.
    pub(crate) fn water_in(basis: &str) -> EriEngine {
        let molecule = Molecule::from_xyz(
            "3\nwater, angstrom\nO 0.0 0.0 0.1173\nH 0.0 0.7572 -0.4692\nH 0.0 -0.7572 -0.4692\n",
        )
        .expect("xyz");
        let basis_set = BasisSet::load(basis).expect("basis set");
        let basis = Basis::new(&molecule, &basis_set, AngularKind::Spherical).expect("basis");
        EriEngine::new(&basis)
    }

    /// Every member quartet of a column pair's block is the member pairs' own block (the
    /// reference kernel, one shell per column) to rounding: the column pair of oxygen's
    /// two s columns with itself and with every other shell, against every ordinary pair and
    /// against the column pairs themselves, in both orientations of the kernel.
    #[test]
    fn column_pairs_give_their_members_blocks() {
        let engine = water_in("cc-pvtz");
        let columns = [0, 2];
        let mut column_pairs = vec![engine.column_pair(&columns, &columns)];
        for shell in 0..engine.shell_count() {
            if !columns.contains(&shell) {
                column_pairs.push(engine.column_pair(&columns, &[shell]));
                column_pairs.push(engine.column_pair(&[shell], &columns));
            }
        }
        let mut workspace = EriWorkspace::new();
        let (mut worst, mut checked) = (0f64, 0usize);
        let kets: Vec<&ShellPair> = engine.pairs().iter().chain(&column_pairs).collect();
        // The members' own pairs, in the members' order of sets.
        let mut own = std::collections::BTreeMap::new();
        for pair in &kets {
            for [a, b] in pair.members() {
                own.entry([a, b]).or_insert_with(|| engine.pair(a, b));
            }
        }
        for bra in &column_pairs {
            for &ket in &kets {
                for (first, second) in [(bra, ket), (ket, bra)] {
                    let block = engine.pair_block(first, second, &mut workspace).to_vec();
                    let (first_members, second_members) = (first.members(), second.members());
                    let size = block.len() / (first_members.len() * second_members.len());
                    for (x, &[a, b]) in first_members.iter().enumerate() {
                        for (y, &[c, d]) in second_members.iter().enumerate() {
                            let (ab, cd) = (&own[&[a, b]], &own[&[c, d]]);
                            let reference = engine.reference_pair_block(ab, cd, &mut workspace);
                            let member = &block[(x * second_members.len() + y) * size..][..size];
                            assert_eq!(member.len(), reference.len());
                            let bound = ab.schwarz * cd.schwarz;
                            // As in the_batched_kernel_matches_the_reference: rounding, and
                            // primitive quartets below the threshold screened differently.
                            let dropped = (ab.primitives.len() * cd.primitives.len()) as f64
                                * PRIMITIVE_THRESHOLD;
                            for (value, expected) in member.iter().zip(reference) {
                                let excess = ((value - expected).abs() - dropped).max(0.0);
                                worst = worst.max(excess / bound);
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        println!("{checked} member quartets, worst {worst:.2e} of the Schwarz bound");
        assert!(
            worst <= 1e-13,
            "member blocks differ by {worst:.2e} of the bound"
        );
    }

    /// The bra side's two loop orders (sparse dot products, or rows of W added) give the
    /// same bits, after either kernel's ket side: they add the same terms to each integral
    /// in the same order.
    #[test]
    fn both_loop_orders_of_the_bra_side_have_the_same_bits() {
        let engine = water_in("def2-tzvp");
        let pairs = engine.pairs();
        let mut workspace = EriWorkspace::new();
        let mut by_dot = 0;
        for (index, x) in pairs.iter().enumerate() {
            for y in &pairs[..=index] {
                for ((bra, ket), kernel) in [(x, y), (y, x)]
                    .into_iter()
                    .flat_map(|sides| [(sides, Kernel::PerQuartet), (sides, Kernel::Batched)])
                {
                    let rows = engine
                        .oriented_block_with(bra, ket, 0, kernel, &mut workspace)
                        .to_vec();
                    let dots = engine
                        .oriented_block_with(bra, ket, usize::MAX, kernel, &mut workspace)
                        .to_vec();
                    let bits =
                        |block: &[f64]| block.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&rows),
                        bits(&dots),
                        "pairs ({}, {}) | ({}, {})",
                        bra.a,
                        bra.b,
                        ket.a,
                        ket.b
                    );
                    by_dot += usize::from(ket.row_starts.len() - 1 > 1);
                }
            }
        }
        assert!(by_dot > 0);
    }

    /// Both orientations of the kernel give the same block, to rounding: water in
    /// def2-TZVP has s, p, d and f shells, contracted and not, so every case of the cost
    /// choice (and both of its outcomes) is met, for both kernels.
    #[test]
    fn both_orientations_of_the_kernel_agree() {
        let engine = water_in("def2-tzvp");
        let pairs = engine.pairs();
        let mut workspace = EriWorkspace::new();
        for kernel in [Kernel::PerQuartet, Kernel::Batched] {
            let (mut swapped, mut kept, mut worst) = (0, 0, 0f64);
            for (index, x) in pairs.iter().enumerate() {
                for y in &pairs[..=index] {
                    let (swap, oriented) = engine.block_plan(x, y, kernel);
                    let mut block = |bra, ket| {
                        engine
                            .oriented_block_with(
                                bra,
                                ket,
                                DOT_PRODUCT_KET,
                                oriented,
                                &mut workspace,
                            )
                            .to_vec()
                    };
                    let (as_given, other) = (block(x, y), block(y, x));
                    let chosen = engine.pair_block_with(x, y, kernel, &mut workspace);
                    let rows = engine.sets[x.a].functions * engine.sets[x.b].functions;
                    let columns = as_given.len() / rows;
                    // |(ab|cd)| <= Q_ab Q_cd: the size of the block's integrals, also where
                    // they vanish by symmetry and hold rounding only.
                    let bound = x.schwarz * y.schwarz;
                    for r in 0..rows {
                        for c in 0..columns {
                            let (a, b) = (as_given[r * columns + c], other[c * rows + r]);
                            worst = worst.max((a - b).abs() / bound);
                        }
                    }
                    if swap {
                        swapped += 1;
                        // The transposed block of the cheaper orientation, exactly.
                        for r in 0..rows {
                            for c in 0..columns {
                                assert_eq!(
                                    chosen[r * columns + c].to_bits(),
                                    other[c * rows + r].to_bits()
                                );
                            }
                        }
                    } else {
                        kept += 1;
                        assert_eq!(chosen, &as_given[..]);
                    }
                }
            }
            // Sums of a few hundred terms of mixed sign, in another order: a few ulps of the
            // quartet's Schwarz bound.
            assert!(
                worst <= 1e-13,
                "{kernel:?}: orientations differ by {worst:.2e} of the Schwarz bound"
            );
            assert!(
                swapped > 0 && kept > 0,
                "{kernel:?}: swapped {swapped}, kept {kept}"
            );
        }
    }

    /// The batched kernel gives the reference kernel's blocks to rounding, for every pair of
    /// canonical pairs of water in def2-TZVP (segmented, to f) and cc-pVTZ (general
    /// contractions, long s and p contractions), in both orientations, and for oxygen's s
    /// column pair with every canonical pair; and it is taken for ket chunks of every
    /// width, whole and padded.
    #[test]
    fn the_batched_kernel_matches_the_reference() {
        let mut workspace = EriWorkspace::new();
        let mut widths = std::collections::BTreeSet::new();
        let (mut worst, mut batched) = (0f64, 0usize);
        for basis in ["def2-tzvp", "cc-pvtz"] {
            let engine = water_in(basis);
            let mut pairs: Vec<ShellPair> = engine.pairs().to_vec();
            if basis == "cc-pvtz" {
                pairs.push(engine.column_pair(&[0, 2], &[0, 2]));
            }
            for (index, x) in pairs.iter().enumerate() {
                for y in &pairs[..=index] {
                    for (bra, ket) in [(x, y), (y, x)] {
                        let (_, kernel) = engine.block_plan(bra, ket, Kernel::Batched);
                        if kernel == Kernel::Batched {
                            batched += 1;
                        }
                        let reference = engine
                            .reference_pair_block(bra, ket, &mut workspace)
                            .to_vec();
                        let block = engine.pair_block(bra, ket, &mut workspace);
                        assert_eq!(block.len(), reference.len());
                        let bound = bra.schwarz * ket.schwarz;
                        // Rounding, and the primitive quartets below PRIMITIVE_THRESHOLD
                        // that one kernel drops and the other computes (the batched one
                        // screens whole chunks): at most the threshold each.
                        let dropped = (bra.primitives.len() * ket.primitives.len()) as f64
                            * PRIMITIVE_THRESHOLD;
                        for (value, expected) in block.iter().zip(&reference) {
                            let excess = ((value - expected).abs() - dropped).max(0.0);
                            worst = worst.max(excess / bound);
                        }
                    }
                    let count = y.primitives.len();
                    widths.insert((y.lanes.width, count % y.lanes.width == 0));
                }
            }
        }
        println!("{batched} blocks batched, worst {worst:.2e} of the Schwarz bound");
        assert!(
            worst <= 1e-13,
            "batched differs by {worst:.2e} of the bound"
        );
        assert!(batched > 1000, "only {batched} blocks batched");
        for width in [2, 4, LANES] {
            assert!(widths.contains(&(width, true)), "no full chunks of {width}");
        }
        assert!(widths.contains(&(LANES, false)), "no padded chunks");
    }
}
