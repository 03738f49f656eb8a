//! The Newton iteration matrix `I - c J` of a stiff system, on a sparse pattern analysed once
//! (the Jacobian's pattern with the diagonal added) and factored by `tutti-sparse` whenever
//! `c` or `J` changes: the numeric phase only, what an implicit integrator needs.
//! Given a model group, the factorization and every solve are split among its ranks
//! ([`tutti_sparse::factor_on`]), with the same bits as on one.

use std::sync::Arc;

use tutti_group::Comm;
use tutti_sparse::{
    analyse, factor_on, solve_on, CsrMatrix, FactorOptions, Factorization, OrderingMethod,
    RankFactors, SolveOptions, Symbolic,
};

use super::OdeError;

/// The factors of `I - c J`: whole on this rank, or this rank's part of a split over a
/// model group.
enum Factors<'c> {
    Whole(Factorization),
    Split(RankFactors, &'c Comm<'c>),
}

/// `I - c J` for the Jacobian pattern of one system.
pub(super) struct IterationMatrix<'c> {
    /// The model group the factorization is split over, if any.
    model: Option<&'c Comm<'c>>,
    /// The pattern of `I - c J` (zero values), analysed once.
    pattern: CsrMatrix,
    symbolic: Arc<Symbolic>,
    /// Where each Jacobian entry goes in `pattern`'s values.
    jacobian_slots: Vec<usize>,
    /// Where each diagonal entry is in `pattern`'s values.
    diagonal_slots: Vec<usize>,
    /// The factors of the last `I - c J`, if any.
    lu: Option<Factors<'c>>,
    /// Factorizations so far.
    pub factorizations: usize,
}

impl<'c> IterationMatrix<'c> {
    /// Analyses the pattern of `I - c J` for a Jacobian of pattern `jacobian` (n x n), to be
    /// factored on this rank alone or split over `model` (every rank of it then makes the
    /// same calls).
    pub fn new(jacobian: &CsrMatrix, model: Option<&'c Comm<'c>>) -> Result<Self, OdeError> {
        let n = jacobian.rows();
        let mut triplets: Vec<(usize, usize, f64)> = Vec::new();
        triplets
            .try_reserve_exact(jacobian.nnz().saturating_add(n))
            .map_err(|_| OdeError::InvalidArgument {
                detail: format!(
                    "a Jacobian of {} entries does not fit in memory",
                    jacobian.nnz()
                ),
            })?;
        for i in 0..n {
            triplets.push((i, i, 0.0));
            let (columns, _) = jacobian.row(i);
            triplets.extend(columns.iter().map(|&j| (i, j, 0.0)));
        }
        let pattern = CsrMatrix::from_triplets(n, n, &triplets)?;
        let slot = |i: usize, j: usize| -> Result<usize, OdeError> {
            let (columns, _) = pattern.row(i);
            columns
                .binary_search(&j)
                .map(|k| pattern.indptr()[i] + k)
                .map_err(|_| OdeError::InvalidArgument {
                    detail: format!("entry ({i}, {j}) lost from the iteration matrix"),
                })
        };
        let mut jacobian_slots = Vec::with_capacity(jacobian.nnz());
        for i in 0..n {
            let (columns, _) = jacobian.row(i);
            for &j in columns {
                jacobian_slots.push(slot(i, j)?);
            }
        }
        let diagonal_slots = (0..n).map(|i| slot(i, i)).collect::<Result<_, _>>()?;
        let symbolic = analyse(&pattern, &OrderingMethod::default())?;
        Ok(Self {
            model,
            pattern,
            symbolic,
            jacobian_slots,
            diagonal_slots,
            lu: None,
            factorizations: 0,
        })
    }

    /// A second matrix on the same analysed pattern, without factors.
    pub fn sibling(&self) -> Self {
        Self {
            model: self.model,
            pattern: self.pattern.clone(),
            symbolic: Arc::clone(&self.symbolic),
            jacobian_slots: self.jacobian_slots.clone(),
            diagonal_slots: self.diagonal_slots.clone(),
            lu: None,
            factorizations: 0,
        }
    }

    /// Forgets the factors (the step size, the order or the Jacobian changed).
    pub fn invalidate(&mut self) {
        self.lu = None;
    }

    /// Whether factors of the current `I - c J` are held.
    pub fn is_factored(&self) -> bool {
        self.lu.is_some()
    }

    /// Factors `I - c J` for the Jacobian values `jacobian` (in its pattern's order).
    pub fn factor(&mut self, c: f64, jacobian: &[f64]) -> Result<(), OdeError> {
        let mut values = vec![0.0; self.pattern.nnz()];
        for (&slot, &j) in self.jacobian_slots.iter().zip(jacobian) {
            values[slot] -= c * j;
        }
        for &slot in &self.diagonal_slots {
            values[slot] += 1.0;
        }
        let matrix = self.pattern.with_values(values)?;
        let symbolic = Arc::clone(&self.symbolic);
        let options = FactorOptions::default();
        self.lu = Some(match self.model {
            Some(model) => Factors::Split(factor_on(model, symbolic, &matrix, options)?, model),
            None => Factors::Whole(Factorization::new(symbolic, &matrix, options)?),
        });
        self.factorizations += 1;
        Ok(())
    }

    /// Solves `(I - c J) x = b` in place with the held factors.
    pub fn solve(&self, b: &mut [f64]) -> Result<(), OdeError> {
        let lu = self.lu.as_ref().ok_or_else(|| OdeError::InvalidArgument {
            detail: "the iteration matrix was not factored".into(),
        })?;
        // A Newton correction needs no refinement: the iteration corrects it.
        let options = SolveOptions {
            max_refinements: 0,
            ..SolveOptions::default()
        };
        match lu {
            Factors::Split(part, model) => solve_on(model, part, b, 1, &options)?,
            Factors::Whole(lu) => lu.solve_in_place(b, 1, &options)?,
        };
        Ok(())
    }
}
