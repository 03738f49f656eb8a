//! One evaluation of every experiment: each rank (or model group) evaluates its share, forms
//! each experiment's record (cost, gradient, packed `J^T J`, QR triangle), and every rank
//! sums the gathered records in experiment order.

use std::time::Instant;

use faer::MatMut;
use rayon::prelude::*;
use tutti_group::Comm;

use crate::linalg::packed_r_in_place;
use crate::loss::{self, Loss};
use crate::{Experiment, FitError};

/// Everything every rank knows after one evaluation of all experiments.
pub(super) struct Evaluation {
    pub(super) cost: f64,
    pub(super) gradient: Vec<f64>,
    /// Row-major n x n.
    pub(super) curvature: Vec<f64>,
    /// Each experiment's packed QR triangle, in experiment order (`n (n + 1) / 2` each).
    pub(super) triangles: Vec<f64>,
    /// Seconds each experiment took.
    pub(super) seconds: Vec<f64>,
    /// The first experiment that failed, with its message.
    pub(super) failure: Option<(usize, String)>,
    /// This rank's seconds evaluating, then exchanging and summing.
    pub(super) timing: (f64, f64),
}

/// Per-experiment record layout in the allgather: index, status, seconds, cost, gradient
/// (n), packed upper curvature (n(n+1)/2), packed QR triangle of the Jacobian (n(n+1)/2).
pub(super) const HEADER: usize = 4;
pub(super) const OK: f64 = 0.0;
pub(super) const FAILED: f64 = 1.0;
pub(super) const NON_FINITE: f64 = 2.0;
/// The experiment's residual and Jacobian buffers could not be reserved.
pub(super) const OUT_OF_MEMORY: f64 = 3.0;

/// The bytes of one experiment's evaluation buffers: `m` residuals and the `m x n` Jacobian,
/// `None` when that overflows.
pub(super) fn evaluation_bytes(m: usize, n: usize) -> Option<u64> {
    let entries = m.checked_mul(n)?.checked_add(m)?;
    u64::try_from(entries).ok()?.checked_mul(8)
}

/// The out-of-memory error for experiment `index`'s buffers.
pub(super) fn evaluation_out_of_memory(index: usize, m: usize, n: usize) -> FitError {
    FitError::OutOfMemory {
        what: format!(
            "the residuals and Jacobian of experiment {index} ({m} residuals x {n} parameters)"
        ),
        bytes: evaluation_bytes(m, n).unwrap_or(u64::MAX),
    }
}

/// Refuses, before anything is allocated, sizes that cannot be held: an experiment whose
/// residuals and Jacobian (or the n x n curvature) overflow or exceed the host's physical
/// memory. Smaller requests are still reserved fallibly when evaluated.
pub(super) fn check_sizes<E: Experiment>(experiments: &[E], n: usize) -> Result<(), FitError> {
    let physical = tutti_backend::system::host_memory()
        .ok()
        .map(|memory| memory.total);
    let too_large = |bytes: Option<u64>| match (bytes, physical) {
        (None, _) => true,
        (Some(bytes), Some(physical)) => bytes > physical,
        (Some(_), None) => false,
    };
    let curvature = n
        .checked_mul(n)
        .and_then(|entries| u64::try_from(entries).ok())
        .and_then(|entries| entries.checked_mul(8));
    if too_large(curvature) {
        return Err(FitError::OutOfMemory {
            what: format!("the {n} x {n} curvature matrix"),
            bytes: curvature.unwrap_or(u64::MAX),
        });
    }
    for (index, experiment) in experiments.iter().enumerate() {
        let m = experiment.residual_count();
        if too_large(evaluation_bytes(m, n)) {
            return Err(evaluation_out_of_memory(index, m, n));
        }
    }
    Ok(())
}

/// `len` zeros, or `None` when they cannot be reserved.
pub(super) fn try_zeros(len: usize) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    out.resize(len, 0.0);
    Some(out)
}

pub(super) fn packed_len(n: usize) -> usize {
    n * (n + 1) / 2
}

pub(super) fn record_width(n: usize) -> usize {
    HEADER + n + 2 * packed_len(n)
}

/// The loss every experiment's residuals are rescaled by, and its scale.
#[derive(Clone, Copy)]
pub(super) struct ScaledLoss {
    pub(super) loss: Loss,
    pub(super) scale: f64,
}

/// One experiment's record: evaluates it (with its model group, when it has one) and forms
/// its contributions, from residuals and Jacobian rows rescaled by the loss first (so every
/// rank, whichever evaluates the experiment, forms the same bits). Only a model group's
/// collective can fail; with one, every member agrees whether the buffers were reserved
/// before the experiment's collective evaluation.
pub(super) fn evaluate_one<E: Experiment>(
    experiment: &E,
    index: usize,
    parameters: &[f64],
    model: Option<&Comm<'_>>,
    loss: ScaledLoss,
) -> Result<(Vec<f64>, Option<String>), FitError> {
    let n = parameters.len();
    let m = experiment.residual_count();
    let mut record = vec![0.0; record_width(n)];
    record[0] = index as f64;
    let mut buffers = try_zeros(m).zip(m.checked_mul(n).and_then(try_zeros));
    if let Some(model) = model {
        let mut missing = [u64::from(buffers.is_none())];
        model.allreduce_sum(&mut missing)?;
        if missing[0] > 0 {
            buffers = None;
        }
    }
    let Some((mut residuals, mut jacobian)) = buffers else {
        record[1] = OUT_OF_MEMORY;
        return Ok((record, None));
    };
    let started = Instant::now();
    let outcome = match model {
        Some(model) => experiment.evaluate_on(model, parameters, &mut residuals, &mut jacobian),
        None => experiment.evaluate(parameters, &mut residuals, &mut jacobian),
    };
    record[2] = started.elapsed().as_secs_f64();
    if let Err(message) = outcome {
        record[1] = FAILED;
        return Ok((record, Some(message)));
    }
    if !residuals.iter().chain(&jacobian).all(|x| x.is_finite()) {
        record[1] = NON_FINITE;
        return Ok((record, None));
    }
    let cost = loss::apply(loss.loss, loss.scale, &mut residuals, &mut jacobian, n);
    // A robust loss of a huge residual can overflow.
    if !cost.is_finite() || !residuals.iter().chain(&jacobian).all(|x| x.is_finite()) {
        record[1] = NON_FINITE;
        return Ok((record, None));
    }
    record[1] = OK;
    record[3] = cost;
    let (gradient, rest) = record[HEADER..].split_at_mut(n);
    let (packed, triangle) = rest.split_at_mut(packed_len(n));
    for (row, r) in jacobian.chunks_exact(n).zip(&residuals) {
        for j in 0..n {
            gradient[j] += row[j] * r;
        }
        let mut k = 0;
        for a in 0..n {
            for b in a..n {
                packed[k] += row[a] * row[b];
                k += 1;
            }
        }
    }
    // The Jacobian is not needed any more: factor it in place.
    packed_r_in_place(
        MatMut::from_row_major_slice_mut(&mut jacobian, m, n),
        triangle,
    );
    Ok((record, None))
}

/// Where a rank sits in the (data x model) mesh of a fit.
pub(super) struct Mesh<'c> {
    /// This rank's model group, `0..groups`: the data axis.
    pub(super) group: usize,
    /// The model groups.
    pub(super) groups: usize,
    /// This rank's model group's handle, when experiments span several devices.
    pub(super) model: Option<Comm<'c>>,
}

impl<'c> Mesh<'c> {
    /// Splits `comm` into model groups of `model_devices` consecutive ranks.
    pub(super) fn split(comm: &'c Comm<'_>, model_devices: usize) -> Result<Self, FitError> {
        let model_devices = model_devices.max(1);
        let group = comm.rank() / model_devices;
        let groups = comm.size() / model_devices;
        let model = if model_devices > 1 {
            Some(comm.split(group, comm.rank() % model_devices)?)
        } else {
            None
        };
        Ok(Self {
            group,
            groups,
            model,
        })
    }

    /// Whether this rank contributes its group's records: the model group's first rank.
    fn reports(&self) -> bool {
        self.model.as_ref().is_none_or(|model| model.rank() == 0)
    }
}

/// Evaluates this rank's model group's experiments (single-device experiments in parallel in
/// the device's thread pool; a model group's one at a time, on all its ranks together),
/// exchanges the records, and sums them in experiment order.
pub(super) fn evaluate_all<E: Experiment>(
    comm: &Comm<'_>,
    mesh: &Mesh<'_>,
    experiments: &[E],
    assignment: &[usize],
    parameters: &[f64],
    loss: ScaledLoss,
) -> Result<Evaluation, FitError> {
    let n = parameters.len();
    let width = record_width(n);
    let mine: Vec<usize> = (0..experiments.len())
        .filter(|&e| assignment[e] == mesh.group)
        .collect();
    let started = Instant::now();
    let local: Vec<(Vec<f64>, Option<String>)> = match &mesh.model {
        Some(model) => mine
            .iter()
            .map(|&e| evaluate_one(&experiments[e], e, parameters, Some(model), loss))
            .collect::<Result<_, _>>()?,
        None => {
            let pool = comm.device().thread_pool()?;
            pool.install(|| {
                mine.par_iter()
                    .map(|&e| evaluate_one(&experiments[e], e, parameters, None, loss))
                    .collect::<Result<_, _>>()
            })?
        }
    };
    // The other ranks of a model group computed the same records: only the first sends.
    let local = if mesh.reports() { local } else { Vec::new() };
    let evaluating = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut flat = Vec::with_capacity(local.len() * width);
    for (record, _) in &local {
        flat.extend_from_slice(record);
    }
    let gathered = comm.allgather_concat(&flat)?;
    let mut records: Vec<&[f64]> = vec![&[]; experiments.len()];
    for record in gathered.chunks_exact(width) {
        records[record[0] as usize] = record;
    }
    // Buffers that could not be reserved fail the fit on every rank alike (every rank sees
    // the same records).
    if let Some(e) = records.iter().position(|r| r[1] == OUT_OF_MEMORY) {
        return Err(evaluation_out_of_memory(
            e,
            experiments[e].residual_count(),
            n,
        ));
    }
    // Failures: every rank learns the first failing experiment's message.
    let first_failed = records.iter().position(|r| r[1] != OK);
    let failure = match first_failed {
        None => None,
        Some(e) => {
            let message = local
                .iter()
                .find(|(record, _)| record[0] as usize == e)
                .and_then(|(_, message)| message.clone())
                .unwrap_or_default();
            let shared = comm.allgather_concat(message.as_bytes())?;
            let text = String::from_utf8_lossy(&shared).into_owned();
            let text = if records[e][1] == NON_FINITE {
                "non-finite residuals or Jacobian".to_string()
            } else {
                text
            };
            Some((e, text))
        }
    };
    let mut evaluation = Evaluation {
        cost: 0.0,
        gradient: vec![0.0; n],
        curvature: vec![0.0; n * n],
        triangles: Vec::new(),
        seconds: records.iter().map(|r| r[2]).collect(),
        failure,
        timing: (evaluating, 0.0),
    };
    if evaluation.failure.is_some() {
        evaluation.cost = f64::INFINITY;
        evaluation.timing.1 = started.elapsed().as_secs_f64();
        return Ok(evaluation);
    }
    let triangle_start = HEADER + n + packed_len(n);
    evaluation.triangles = Vec::with_capacity(records.len() * packed_len(n));
    for record in &records {
        evaluation.cost += record[3];
        evaluation
            .triangles
            .extend_from_slice(&record[triangle_start..]);
        let (gradient, packed) = record[HEADER..triangle_start].split_at(n);
        for (acc, g) in evaluation.gradient.iter_mut().zip(gradient) {
            *acc += g;
        }
        let mut k = 0;
        for a in 0..n {
            for b in a..n {
                evaluation.curvature[a * n + b] += packed[k];
                k += 1;
            }
        }
    }
    for a in 0..n {
        for b in 0..a {
            evaluation.curvature[a * n + b] = evaluation.curvature[b * n + a];
        }
    }
    evaluation.timing.1 = started.elapsed().as_secs_f64();
    Ok(evaluation)
}
