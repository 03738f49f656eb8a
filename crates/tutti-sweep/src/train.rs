//! Tensor trains in memory: MPS and MPO cores, their shapes, and validation.

use crate::{Scalar, SweepError};

/// Whether a train is a state or an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainKind {
    /// A matrix product state: cores (Dl, d, Dr).
    Mps,
    /// A matrix product operator: cores (Dl, d_out, d_in, Dr).
    Mpo,
}

/// The shape of one core, in the MPO layout (left, d_out, d_in, right).
///
/// An MPS core (Dl, d, Dr) has `d_out = d`, `d_in = 1`; the data layout is the same, so an MPS
/// core and an MPO core with `d_in = 1` share their C-order memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreShape {
    /// Left bond Dl.
    pub left: usize,
    /// Output physical dimension (rows of the operator; `d` of an MPS).
    pub d_out: usize,
    /// Input physical dimension (columns of the operator; 1 for an MPS).
    pub d_in: usize,
    /// Right bond Dr.
    pub right: usize,
}

impl CoreShape {
    /// The number of entries, `left * d_out * d_in * right`, saturating at `usize::MAX` when
    /// the product does not fit (no slice has that length, so a saturated length never
    /// matches any data). Shapes that came through validation
    /// ([`TensorTrain::new`], [`crate::NpyTrain::open`]) always fit; see
    /// [`CoreShape::checked_len`].
    pub fn len(&self) -> usize {
        self.checked_len().unwrap_or(usize::MAX)
    }

    /// The number of entries, or `None` when `left * d_out * d_in * right` overflows `usize`.
    pub fn checked_len(&self) -> Option<usize> {
        self.left
            .checked_mul(self.d_out)?
            .checked_mul(self.d_in)?
            .checked_mul(self.right)
    }

    /// Whether the core holds no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fused physical dimension `d_out * d_in` (saturating; exact for a validated shape,
    /// whose whole length fits).
    pub fn phys(&self) -> usize {
        self.d_out.saturating_mul(self.d_in)
    }

    /// The shape as it is stored on disk: 3 axes for an MPS, 4 for an MPO.
    pub fn dims(&self, kind: TrainKind) -> Vec<usize> {
        match kind {
            TrainKind::Mps => vec![self.left, self.d_out, self.right],
            TrainKind::Mpo => vec![self.left, self.d_out, self.d_in, self.right],
        }
    }

    /// The shape of a core with these on-disk `dims` (3 axes: MPS, 4 axes: MPO).
    pub fn from_dims(kind: TrainKind, dims: &[usize]) -> Option<Self> {
        match (kind, dims) {
            (TrainKind::Mps, &[left, d, right]) => Some(Self {
                left,
                d_out: d,
                d_in: 1,
                right,
            }),
            (TrainKind::Mpo, &[left, d_out, d_in, right]) => Some(Self {
                left,
                d_out,
                d_in,
                right,
            }),
            _ => None,
        }
    }
}

/// One core of a train: C-order data of the shape (left, d_out, d_in, right).
#[derive(Clone, Debug, PartialEq)]
pub struct Core<T> {
    /// The shape.
    pub shape: CoreShape,
    /// `shape.len()` entries in C order.
    pub data: Vec<T>,
}

/// A tensor train held in memory: an MPS or an MPO of `n >= 1` sites.
///
/// Invariants (checked by [`TensorTrain::new`]): at least one site; every dimension nonzero;
/// the first left bond and the last right bond are 1; each core's right bond equals the next
/// core's left bond; every entry is finite; an MPS has `d_in = 1` at every site.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorTrain<T> {
    kind: TrainKind,
    cores: Vec<Core<T>>,
}

/// The most entries one core may have: its bytes (complex128, the widest element) must fit
/// in `isize`, the limit of any allocation.
pub(crate) const MAX_CORE_ENTRIES: usize = isize::MAX as usize / 16;

/// The number of entries of `shape` (on disk: `dims`), or a `BadShape` error naming the train,
/// the site and the dims when the product overflows or is larger than any allocation.
pub(crate) fn core_len(
    name: &str,
    site: usize,
    shape: &CoreShape,
    dims: &[usize],
) -> Result<usize, SweepError> {
    match shape.checked_len() {
        Some(len) if len <= MAX_CORE_ENTRIES => Ok(len),
        _ => Err(SweepError::BadShape {
            train: name.to_string(),
            site,
            shape: dims.to_vec(),
            expected: format!(
                "at most {MAX_CORE_ENTRIES} entries: the product of the dims is too large \
                 for memory (or overflows)"
            ),
        }),
    }
}

/// The checks every train passes, on shapes alone (shared by memory and disk trains).
pub(crate) fn validate_shapes(
    name: &str,
    kind: TrainKind,
    shapes: &[CoreShape],
) -> Result<(), SweepError> {
    if shapes.is_empty() {
        return Err(SweepError::Empty {
            what: name.to_string(),
            expected: "at least one site",
        });
    }
    for (site, shape) in shapes.iter().enumerate() {
        if shape.is_empty() || (kind == TrainKind::Mps && shape.d_in != 1) {
            return Err(SweepError::BadShape {
                train: name.to_string(),
                site,
                shape: shape.dims(kind),
                expected: "every dimension at least 1".to_string(),
            });
        }
        core_len(name, site, shape, &shape.dims(kind))?;
    }
    if shapes[0].left != 1 {
        return Err(SweepError::BondMismatch {
            train: name.to_string(),
            site: 0,
            detail: format!("the first left bond is {}, expected 1", shapes[0].left),
        });
    }
    let last = shapes.len() - 1;
    if shapes[last].right != 1 {
        return Err(SweepError::BondMismatch {
            train: name.to_string(),
            site: last,
            detail: format!("the last right bond is {}, expected 1", shapes[last].right),
        });
    }
    for site in 1..shapes.len() {
        let (left_of, right_of) = (shapes[site - 1].right, shapes[site].left);
        if left_of != right_of {
            return Err(SweepError::BondMismatch {
                train: name.to_string(),
                site,
                detail: format!(
                    "site {} has right bond {left_of} but site {site} has left bond {right_of}",
                    site - 1
                ),
            });
        }
    }
    Ok(())
}

/// The first non-finite entry of a core, as an error.
pub(crate) fn check_finite<T: Scalar>(
    name: &str,
    site: usize,
    data: &[T],
) -> Result<(), SweepError> {
    match data.iter().position(|x| !x.finite()) {
        None => Ok(()),
        Some(index) => Err(SweepError::NonFinite {
            train: name.to_string(),
            site,
            index,
            value: format!("{:?}", data[index]),
        }),
    }
}

impl<T: Scalar> TensorTrain<T> {
    /// A train of `kind` from its cores, each `(dims, data)` with `dims` as stored on disk:
    /// (Dl, d, Dr) for an MPS, (Dl, d_out, d_in, Dr) for an MPO, `data` in C order.
    ///
    /// Errors: no cores, a wrong number of axes, a zero dimension, dims whose product
    /// overflows or exceeds any allocation, a data length that does not match the dims, outer bonds other than 1, neighbouring bonds that differ (naming the
    /// site and both dims), NaN or infinite entries.
    pub fn from_arrays(
        kind: TrainKind,
        cores: Vec<(Vec<usize>, Vec<T>)>,
    ) -> Result<Self, SweepError> {
        let name = kind_name(kind);
        let mut built = Vec::with_capacity(cores.len());
        for (site, (dims, data)) in cores.into_iter().enumerate() {
            let shape = CoreShape::from_dims(kind, &dims).ok_or_else(|| SweepError::BadShape {
                train: name.to_string(),
                site,
                shape: dims.clone(),
                expected: format!(
                    "{} axes for an {name}",
                    if kind == TrainKind::Mps { 3 } else { 4 }
                ),
            })?;
            let len = core_len(name, site, &shape, &dims)?;
            if len != data.len() {
                return Err(SweepError::BadShape {
                    train: name.to_string(),
                    site,
                    shape: dims,
                    expected: format!("{len} entries, got {}", data.len()),
                });
            }
            built.push(Core { shape, data });
        }
        Self::new(kind, built)
    }

    /// A train of `kind` from cores already in the MPO layout; the checks of
    /// [`TensorTrain::from_arrays`].
    pub fn new(kind: TrainKind, cores: Vec<Core<T>>) -> Result<Self, SweepError> {
        let name = kind_name(kind);
        let shapes: Vec<CoreShape> = cores.iter().map(|c| c.shape).collect();
        validate_shapes(name, kind, &shapes)?;
        for (site, core) in cores.iter().enumerate() {
            if core.data.len() != core.shape.len() {
                return Err(SweepError::BadShape {
                    train: name.to_string(),
                    site,
                    shape: core.shape.dims(kind),
                    expected: format!("{} entries, got {}", core.shape.len(), core.data.len()),
                });
            }
            check_finite(name, site, &core.data)?;
        }
        Ok(Self { kind, cores })
    }

    /// A train without the checks, for results this crate built itself.
    pub(crate) fn from_trusted(kind: TrainKind, cores: Vec<Core<T>>) -> Self {
        Self { kind, cores }
    }

    /// MPS or MPO.
    pub fn kind(&self) -> TrainKind {
        self.kind
    }

    /// The number of sites.
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// Always false: a train has at least one site.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    /// The cores, site 0 first.
    pub fn cores(&self) -> &[Core<T>] {
        &self.cores
    }

    /// The cores, consuming the train.
    pub fn into_cores(self) -> Vec<Core<T>> {
        self.cores
    }

    /// The n+1 bond dimensions, `[1, D_1, ..., D_{n-1}, 1]`.
    pub fn bonds(&self) -> Vec<usize> {
        let mut bonds = vec![1];
        bonds.extend(self.cores.iter().map(|c| c.shape.right));
        bonds
    }

    /// The largest bond dimension.
    pub fn max_bond(&self) -> usize {
        self.bonds().into_iter().max().unwrap_or(1)
    }

    /// The core shapes, site 0 first.
    pub fn shapes(&self) -> Vec<CoreShape> {
        self.cores.iter().map(|c| c.shape).collect()
    }

    /// The train with every entry multiplied by `factor` (applied to site 0).
    pub fn scaled(mut self, factor: T) -> Self {
        if let Some(first) = self.cores.first_mut() {
            for x in &mut first.data {
                *x *= factor;
            }
        }
        self
    }
}

pub(crate) fn kind_name(kind: TrainKind) -> &'static str {
    match kind {
        TrainKind::Mps => "MPS",
        TrainKind::Mpo => "MPO",
    }
}
