//! One factorization split among the ranks of a group (the model axis): each rank factors
//! its subtrees, then each shared front, in postorder, is assembled where its columns are
//! (from its children's blocks' columns, [`crate::shared_assembly`]) and factored by the
//! ranks of its range together, each keeping the columns it factored. Solves run the same
//! way, forward up the tree and backward down it, through the shared fronts' columns where
//! they are. The tree, the order of every sum and the dense kernels do not depend on the
//! number of ranks, so factors and solutions are bitwise those of one rank. The collectives
//! move `f64`s: complex values travel as `(re, im)` pairs ([`Scalar::pack`]).

use std::borrow::Cow;
use std::sync::Arc;

use tutti_backend::Resources;
use tutti_group::{Comm, Group, RunError};
use tutti_plan::Plan;

use crate::agreement::{agree, Digest};
use crate::csr::check_len;
use crate::forest_solve::{backward_forest, forward_forest};
use crate::mapping::Mapping;
use crate::numeric::{
    missing_contribution as missing, FactorOptions, FrontFactor, FrontFactorizer,
};
use crate::shared_assembly::{assemble, Blocks};
use crate::shared_front::{BlockColumns, FrontColumns, SharedFront};
use crate::solve::{front_rhs, SolveInfo, SolveOptions};
use crate::symbolic::Symbolic;
use crate::{CsrMatrix, Scalar, SparseError};

/// One rank's part of a factorization split among the ranks of a group; real (`T = f64`,
/// the default) or complex (`T = c64`).
#[derive(Clone, Debug)]
pub struct RankFactors<T = f64> {
    symbolic: Arc<Symbolic>,
    mapping: Mapping,
    /// The factors of this rank's local fronts.
    fronts: Vec<Option<FrontFactor<T>>>,
    /// This rank's columns of the shared fronts whose range it is in.
    shared: Vec<Option<FrontColumns<T>>>,
    /// The factored matrix's values, for residuals (every rank holds them).
    values: Vec<T>,
    /// `||A||_inf` of those values, for the solves' backward errors.
    norm_inf: f64,
    /// Pivots perturbed over all ranks.
    perturbed: usize,
    rank: usize,
}

impl<T: Scalar> RankFactors<T> {
    /// Pivots perturbed, over all ranks.
    pub fn perturbed_pivots(&self) -> usize {
        self.perturbed
    }

    /// Bytes of factors this rank holds: its local fronts' and its columns of the shared
    /// fronts'. Over the ranks, the factors are held once.
    pub fn factor_bytes(&self) -> u64 {
        let local: usize = self
            .fronts
            .iter()
            .flatten()
            .map(|f| f.lower.len() + f.upper.len())
            .sum();
        let shared: usize = self.shared.iter().flatten().map(FrontColumns::len).sum();
        ((local + shared) * std::mem::size_of::<T>()) as u64
    }

    /// How many fronts this rank factored alone or helped factor (holding some of their
    /// columns).
    pub fn fronts_owned(&self) -> usize {
        self.fronts.iter().flatten().count() + self.shared.iter().flatten().count()
    }
}

/// Factors `a` (the pattern `symbolic` analysed) on this rank of `comm`: every rank of the
/// group calls this with the same matrix and analysis (checked: a digest of each rank's
/// ordering, pattern and values is compared across the group).
///
/// Errors: a matrix of another pattern or with a value that is not finite; ranks given
/// different matrices or analyses ([`SparseError::InvalidArgument`] on every rank, naming
/// those that differ from rank 0); a collective's error (another rank failed).
pub fn factor_on<T: Scalar>(
    comm: &Comm<'_>,
    symbolic: Arc<Symbolic>,
    a: &CsrMatrix<T>,
    options: FactorOptions,
) -> Result<RankFactors<T>, SparseError> {
    symbolic.check_pattern(a)?;
    a.check_finite(a.values())?;
    let mut digest = Digest::new();
    digest
        .words(symbolic.tree.order().iter().map(|&i| i as u64))
        .words(symbolic.indptr.iter().map(|&i| i as u64))
        .words(symbolic.indices.iter().map(|&i| i as u64))
        .values(a.values());
    agree(
        comm,
        digest.finish(),
        "matrices (orderings, patterns or values)",
    )?;
    let rank = comm.rank();
    let mapping = Mapping::new(&symbolic, comm.size());
    let values = a.values();
    let count = symbolic.fronts.len();
    let mut fronts: Vec<Option<FrontFactor<T>>> = vec![None; count];
    let mut shared_parts: Vec<Option<FrontColumns<T>>> = vec![None; count];
    let mut contributions: Vec<Option<Vec<T>>> = vec![None; count];
    let mut block_columns: Vec<Option<BlockColumns<T>>> = vec![None; count];

    // This rank's subtrees, without a message, on its device's threads.
    let roots = mapping.local_roots(&symbolic, rank);
    let pool = crate::numeric::device_pool(comm.device())?;
    let mut perturbed = pool.install(|| {
        crate::forest::factor_forest(
            &symbolic,
            values,
            a.max_abs(),
            &options,
            &roots,
            &mut contributions,
            &mut fronts,
        )
    })?;
    // The shared fronts, in postorder: each assembled where its columns are, from the
    // children's blocks' columns; the ranks of its range factor it together and keep their
    // columns of its factors and of its own block.
    let pivoting = FrontFactorizer::new(&symbolic, values, a.max_abs(), &options).pivoting();
    for f in mapping.shared_fronts() {
        let blocks = Blocks {
            local: &mut contributions,
            shared: &mut block_columns,
        };
        let local = assemble(comm, &symbolic, &mapping, f, values, blocks)?;
        let shared = SharedFront {
            front: &symbolic.fronts[f],
            ranks: mapping.ranks[f].clone(),
        };
        let outcome = shared.factor(comm, local, pivoting)?;
        perturbed += outcome.perturbed;
        shared_parts[f] = outcome.part;
        block_columns[f] = outcome.contribution;
    }
    let mut total = [perturbed as u64];
    comm.allreduce_sum(&mut total)?;
    Ok(RankFactors {
        symbolic,
        mapping,
        fronts,
        shared: shared_parts,
        values: values.to_vec(),
        norm_inf: a.norm_inf(),
        perturbed: usize::try_from(total[0]).unwrap_or(usize::MAX),
        rank,
    })
}

/// Solves `A X = B` with a factorization split among the ranks of `comm`: every rank calls
/// this with its [`RankFactors`] and the same right-hand sides (`rhs` columns, column-major;
/// checked by a digest, as [`factor_on`] checks the matrix), and every rank receives the
/// whole solution. Refines iteratively as [`crate::Factorization::solve_in_place`] does,
/// with the same bits.
///
/// Errors: as [`crate::Factorization::solve_in_place`]; ranks given different right-hand
/// sides ([`SparseError::InvalidArgument`] on every rank); a collective's error.
pub fn solve_on<T: Scalar>(
    comm: &Comm<'_>,
    factors: &RankFactors<T>,
    b: &mut [T],
    rhs: usize,
    options: &SolveOptions,
) -> Result<SolveInfo, SparseError> {
    let n = factors.symbolic.unknowns();
    let len = n.checked_mul(rhs).ok_or_else(|| SparseError::TooLarge {
        what: "the right-hand sides",
        detail: format!("{n} x {rhs}"),
    })?;
    check_len("b", b.len(), len)?;
    crate::solve::check_finite_rhs(b, n)?;
    let digest = Digest::new().words([rhs as u64]).values(b).finish();
    agree(comm, digest, "right-hand sides")?;
    let residual = crate::solve::Residual {
        indptr: &factors.symbolic.indptr,
        indices: &factors.symbolic.indices,
        values: &factors.values,
        norm_inf: factors.norm_inf,
    };
    crate::solve::refine(b, rhs, n, options, factors.perturbed, &residual, |column| {
        solve_once_on(comm, factors, column)
    })
}

/// One distributed solve, in place, for one right-hand side (old numbering).
fn solve_once_on<T: Scalar>(
    comm: &Comm<'_>,
    factors: &RankFactors<T>,
    b: &mut [T],
) -> Result<(), SparseError> {
    let symbolic = &factors.symbolic;
    let mapping = &factors.mapping;
    let rank = factors.rank;
    let order = symbolic.tree.order();
    let n = symbolic.unknowns();
    let permuted: Vec<T> = order.iter().map(|&old| b[old]).collect();
    let count = symbolic.fronts.len();
    let factor = |f: usize| factors.fronts[f].as_ref().ok_or_else(|| missing(f));
    let mut z = vec![T::ZERO; n];
    let mut pending: Vec<Option<Vec<T>>> = vec![None; count];

    // Forward: local subtrees (on the device's threads), then the shared fronts with their
    // children's vectors gathered to the owner.
    let roots = mapping.local_roots(symbolic, rank);
    let pool = crate::numeric::device_pool(comm.device())?;
    pool.install(|| forward_forest(symbolic, &roots, &factor, &permuted, &mut pending, &mut z))?;
    for f in mapping.shared_fronts() {
        let shared = SharedFront {
            front: &symbolic.fronts[f],
            ranks: mapping.ranks[f].clone(),
        };
        let part = factors.shared[f].as_ref();
        let send = pack(symbolic, mapping, f, rank, &mut pending)?;
        let mut rhs = Vec::new();
        if let Some(blocks) = comm.gather(mapping.owner[f], &send)? {
            let blocks = unpack_all::<T>(&blocks)?;
            for (c, block) in unpack(symbolic, mapping, f, &blocks)? {
                pending[c] = Some(block.to_vec());
            }
            let swaps = &part.ok_or_else(|| missing(f))?.swaps;
            rhs = front_rhs(symbolic, f, swaps, &permuted, &mut pending);
        }
        let mut state = crate::shared_solve::forward(comm, &shared, f, part, rhs)?;
        let (first, p) = (shared.front.first, shared.front.pivots);
        z[first..first + p].copy_from_slice(&state[..p]);
        if rank == shared.owner() {
            state.drain(..p);
            pending[f] = Some(state);
        }
    }

    // Backward: the shared fronts from the top, through their columns where they are (every
    // rank receives each one's solution), then the local subtrees.
    let mut x = vec![T::ZERO; n];
    for f in mapping.shared_fronts().rev() {
        let shared = SharedFront {
            front: &symbolic.fronts[f],
            ranks: mapping.ranks[f].clone(),
        };
        let (first, p) = (shared.front.first, shared.front.pivots);
        let part = factors.shared[f].as_ref();
        let own = crate::shared_solve::backward(comm, &shared, f, part, &z[first..first + p], &x)?;
        x[first..first + p].copy_from_slice(&own);
    }
    pool.install(|| backward_forest(symbolic, &roots, &factor, &z, &mut x))?;
    // Every rank's local unknowns, to every rank.
    let mut mine: Vec<f64> = Vec::new();
    for f in mapping.local_fronts(rank) {
        let front = &symbolic.fronts[f];
        T::pack(&x[front.first..front.first + front.pivots], &mut mine);
    }
    let gathered = comm.allgather(&mine)?;
    let all = unpack_all::<T>(&gathered)?;
    for (source, block) in all.iter().enumerate() {
        let mut read = 0;
        for f in mapping.local_fronts(source) {
            let front = &symbolic.fronts[f];
            let piece = block
                .get(read..read + front.pivots)
                .ok_or_else(|| missing(f))?;
            x[front.first..front.first + front.pivots].copy_from_slice(piece);
            read += front.pivots;
        }
    }
    for (new, &old) in order.iter().enumerate() {
        b[old] = x[new];
    }
    Ok(())
}

/// The contribution vectors of front `f`'s children that this rank holds (taken from
/// `pending`), in the children's order, concatenated: what this rank sends to `f`'s owner.
fn pack<T: Scalar>(
    symbolic: &Symbolic,
    mapping: &Mapping,
    f: usize,
    rank: usize,
    pending: &mut [Option<Vec<T>>],
) -> Result<Vec<f64>, SparseError> {
    let mut send = Vec::new();
    for &c in &symbolic.fronts[f].children {
        if mapping.owner[c] == rank {
            T::pack(&pending[c].take().ok_or_else(|| missing(c))?, &mut send);
        }
    }
    Ok(send)
}

/// Every rank's message unpacked into values (borrowed for `f64`).
fn unpack_all<T: Scalar>(messages: &[Vec<f64>]) -> Result<Vec<Cow<'_, [T]>>, SparseError> {
    messages
        .iter()
        .map(|message| unpack_values(message, message.len() / T::PACKED))
        .collect()
}

/// The `len` values packed in `packed`, or an error when it holds another number.
fn unpack_values<T: Scalar>(packed: &[f64], len: usize) -> Result<Cow<'_, [T]>, SparseError> {
    match T::unpack(packed) {
        Some(values) if values.len() == len => Ok(values),
        _ => Err(SparseError::invalid(format!(
            "a message of {} numbers arrived for {len} values",
            packed.len()
        ))),
    }
}

/// Front `f`'s children's contribution vectors, each cut from the gathered message of the
/// rank that owns it, in the children's order.
fn unpack<'b, T: Scalar>(
    symbolic: &Symbolic,
    mapping: &Mapping,
    f: usize,
    blocks: &'b [Cow<'_, [T]>],
) -> Result<Vec<(usize, &'b [T])>, SparseError> {
    let mut read = vec![0usize; blocks.len()];
    symbolic.fronts[f]
        .children
        .iter()
        .map(|&c| {
            let source = mapping.owner[c];
            let size = symbolic.fronts[c].update.len();
            let start = *read.get(source).ok_or_else(|| missing(c))?;
            let block = blocks[source]
                .get(start..start + size)
                .ok_or_else(|| missing(c))?;
            read[source] = start + size;
            Ok((c, block))
        })
        .collect()
}

/// A factorization split among the ranks of a [`Group`]: one [`RankFactors`] per rank of
/// this process, factored and used inside `group.run`; real (`T = f64`, the default) or
/// complex (`T = c64`). In a group spanning processes every process holds its own ranks'
/// parts and every process calls the same methods, as with any collective.
#[derive(Clone, Debug)]
pub struct SplitFactorization<T = f64> {
    /// This process's ranks' parts, its first rank's first.
    parts: Vec<RankFactors<T>>,
    /// The group's size (all processes).
    ranks: usize,
    /// The group rank of `parts[0]`.
    first_rank: usize,
    plan: Plan,
}

impl<T: Scalar> SplitFactorization<T> {
    /// Factors `a` on every rank of `group`, after checking with [`crate::plan`] that each
    /// of this process's ranks' part fits its device within the caps of `resources` (refused
    /// up front otherwise; in a group spanning processes, a refusal on one process fails the
    /// others' runs too instead of leaving them waiting).
    ///
    /// Errors: [`SparseError::Plan`] when a rank's part does not fit; those of
    /// [`factor_on`]; a rank's failure or panic (in another process: its message, as
    /// [`SparseError::Group`]).
    pub fn new(
        group: &Group,
        symbolic: Arc<Symbolic>,
        a: &CsrMatrix<T>,
        options: FactorOptions,
        resources: &Resources,
    ) -> Result<Self, SparseError> {
        let plan = group.before_run(crate::footprint::plan_for::<T>(
            &symbolic,
            group.size(),
            group.devices(),
            resources,
        ))?;
        let parts = group
            .run(|comm| factor_on(comm, Arc::clone(&symbolic), a, options))
            .map_err(run_error)?;
        Ok(Self {
            parts,
            ranks: group.size(),
            first_rank: group.local_ranks().start,
            plan,
        })
    }

    /// The memory plan the factorization was checked against.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Solves with every rank of `group` (the group that factored), in place; see
    /// [`solve_on`].
    ///
    /// Errors: those of [`solve_on`]; a group of another size, or whose ranks in this
    /// process are not those that factored.
    pub fn solve_in_place(
        &self,
        group: &Group,
        b: &mut [T],
        rhs: usize,
        options: &SolveOptions,
    ) -> Result<SolveInfo, SparseError> {
        let local = group.local_ranks();
        if group.size() != self.ranks
            || local.start != self.first_rank
            || local.len() != self.parts.len()
        {
            return Err(SparseError::argument(format!(
                "factored on {} ranks (ranks {}..{} in this process), solved on a group of {} \
                 (ranks {local:?} in this process)",
                self.ranks,
                self.first_rank,
                self.first_rank + self.parts.len(),
                group.size()
            )));
        }
        let input = b.to_vec();
        let mut results = group
            .run(|comm| {
                let part = comm
                    .rank()
                    .checked_sub(self.first_rank)
                    .and_then(|index| self.parts.get(index))
                    .ok_or_else(|| {
                        SparseError::argument(format!("rank {} holds no part", comm.rank()))
                    })?;
                let mut mine = input.clone();
                let info = solve_on(comm, part, &mut mine, rhs, options)?;
                Ok::<_, SparseError>((mine, info))
            })
            .map_err(run_error)?;
        if results.is_empty() {
            return Err(SparseError::argument(
                "the group ran no rank in this process",
            ));
        }
        let (x, info) = results.swap_remove(0);
        b.copy_from_slice(&x);
        Ok(info)
    }

    /// This process's ranks' parts, its first rank's first (every rank's in a group of one
    /// process).
    pub fn parts(&self) -> &[RankFactors<T>] {
        &self.parts
    }

    /// Pivots perturbed, over all ranks.
    pub fn perturbed_pivots(&self) -> usize {
        self.parts.first().map_or(0, RankFactors::perturbed_pivots)
    }
}

/// A group run's failure as the rank's own error, or a message.
fn run_error(error: RunError<SparseError>) -> SparseError {
    match error {
        RunError::Failed { error, .. } => error,
        other => SparseError::Group {
            detail: other.to_string(),
        },
    }
}
