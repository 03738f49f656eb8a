//! A stack of trains in mathematical order: its validation and its site-by-site reading.
//!
//! `[U3, U2, U1, psi]` means U3·U2·U1|psi>. Every layer is seen as an operator with cores
//! (Dl, d_out, d_in, Dr): an MPS last is a ket (d_in = 1), an MPS first is a bra (d_out = 1,
//! its entries NOT conjugated: phi^T A). Layer `l`'s input leg meets layer `l + 1`'s output.

use crate::layer::{CoreStream, Layer};
use crate::tensor::{Axis, Tensor};
use crate::train::{Core, CoreShape, TrainKind};
use crate::{Scalar, SweepError};

/// How a layer enters the product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// An MPS first in a stack of two or more: a row vector (d_out = 1).
    Bra,
    /// An MPS last (or alone): a column vector (d_in = 1).
    Ket,
    /// An operator.
    Operator,
}

/// A validated stack: shapes of every layer in their role, and the shape of the product.
#[derive(Clone, Debug)]
pub(crate) struct Stack {
    /// `roles[l]`.
    pub roles: Vec<Role>,
    /// `shapes[l][k]`: layer l's core at site k, in its role (a bra has d_out = 1).
    pub shapes: Vec<Vec<CoreShape>>,
    /// The number of sites.
    pub sites: usize,
    /// The kind of the product.
    pub out_kind: TrainKind,
}

impl Stack {
    /// Checks a stack: at least one layer, equal lengths, an MPS only first or last, not a bra
    /// times a ket (a number, not a train), matching physical legs between layers.
    pub fn new<T: Scalar>(layers: &[&dyn Layer<T>]) -> Result<Self, SweepError> {
        if layers.is_empty() {
            return Err(SweepError::Empty {
                what: "the stack".into(),
                expected: "at least one train",
            });
        }
        let count = layers.len();
        let sites = layers[0].shapes().len();
        let mut roles = Vec::with_capacity(count);
        let mut shapes = Vec::with_capacity(count);
        for (l, layer) in layers.iter().enumerate() {
            let layer_shapes = layer.shapes();
            if layer_shapes.len() != sites {
                return Err(SweepError::LengthMismatch {
                    detail: format!(
                        "layer 0 ({}) has {sites} sites but layer {l} ({}) has {}",
                        layers[0].name(),
                        layer.name(),
                        layer_shapes.len()
                    ),
                });
            }
            let role = match layer.kind() {
                TrainKind::Mpo => Role::Operator,
                TrainKind::Mps if l + 1 == count => Role::Ket,
                TrainKind::Mps if l == 0 => Role::Bra,
                TrainKind::Mps => {
                    return Err(SweepError::InvalidStack {
                        detail: format!(
                            "layer {l} ({}) is an MPS in the middle of the stack: an MPS may \
                             only come first (a bra) or last (a ket)",
                            layer.name()
                        ),
                    })
                }
            };
            let in_role: Vec<CoreShape> = layer_shapes
                .into_iter()
                .map(|s| match role {
                    Role::Bra => CoreShape {
                        d_out: 1,
                        d_in: s.d_out,
                        ..s
                    },
                    _ => s,
                })
                .collect();
            roles.push(role);
            shapes.push(in_role);
        }
        if count >= 2 && roles[0] == Role::Bra && roles[count - 1] == Role::Ket {
            return Err(SweepError::InvalidStack {
                detail: "a bra times a ket is a number, not a train: use `inner`".into(),
            });
        }
        for l in 1..count {
            for (site, (upper, lower)) in shapes[l - 1].iter().zip(&shapes[l]).enumerate() {
                if upper.d_in != lower.d_out {
                    return Err(SweepError::PhysicalMismatch {
                        site,
                        upper: l - 1,
                        upper_in: upper.d_in,
                        lower: l,
                        lower_out: lower.d_out,
                    });
                }
            }
        }
        let out_kind = if roles[0] == Role::Bra || roles[count - 1] == Role::Ket {
            TrainKind::Mps
        } else {
            TrainKind::Mpo
        };
        Ok(Self {
            roles,
            shapes,
            sites,
            out_kind,
        })
    }

    /// The number of layers.
    pub fn depth(&self) -> usize {
        self.roles.len()
    }

    /// The product's (d_out, d_in) at `site`.
    pub fn out_phys(&self, site: usize) -> (usize, usize) {
        let last = self.depth() - 1;
        (self.shapes[0][site].d_out, self.shapes[last][site].d_in)
    }

    /// The fused physical dimension of the product at `site`.
    pub fn phys(&self, site: usize) -> usize {
        let (o, i) = self.out_phys(site);
        o.saturating_mul(i)
    }

    /// The product's bond dimension left of `site` (the product over layers, MPO-major;
    /// saturating at `usize::MAX`, beyond any bond a sweep can hold).
    pub fn fused_left(&self, site: usize) -> usize {
        self.shapes
            .iter()
            .fold(1usize, |acc, s| acc.saturating_mul(s[site].left))
    }

    /// The largest bond the product can have at any of its inner bonds: at the bond left of
    /// site k, the smallest of the fused physical dimensions left of it, those right of it,
    /// and the product of the layers' bonds (1 for a single site). Saturating.
    pub fn max_bond(&self) -> usize {
        let phys: Vec<usize> = (0..self.sites).map(|k| self.phys(k)).collect();
        let mut right_products = vec![1usize; self.sites + 1];
        for k in (0..self.sites).rev() {
            right_products[k] = right_products[k + 1].saturating_mul(phys[k]);
        }
        let mut left_product = 1usize;
        let mut largest = 1;
        for k in 1..self.sites {
            left_product = left_product.saturating_mul(phys[k - 1]);
            let cap = left_product.min(right_products[k]).min(self.fused_left(k));
            largest = largest.max(cap);
        }
        largest
    }

    /// The product's core shape at `site` for left and right bonds `left`, `right`, in the
    /// layout of the output kind (an MPS holds the fused physical leg as d_out).
    pub fn out_shape(&self, site: usize, left: usize, right: usize) -> CoreShape {
        let (d_out, d_in) = self.out_phys(site);
        match self.out_kind {
            TrainKind::Mps => CoreShape {
                left,
                d_out: d_out * d_in,
                d_in: 1,
                right,
            },
            TrainKind::Mpo => CoreShape {
                left,
                d_out,
                d_in,
                right,
            },
        }
    }

    /// The axes of the product's left bond: `Left(0), ..., Left(L-1)` (MPO-major fusion).
    pub fn left_axes(&self) -> Vec<Axis> {
        (0..self.depth()).map(Axis::Left).collect()
    }

    /// The axes of the product's right bond: `Right(0), ..., Right(L-1)`.
    pub fn right_axes(&self) -> Vec<Axis> {
        (0..self.depth()).map(Axis::Right).collect()
    }
}

/// One stream per layer, all in the same direction.
pub(crate) struct StackReader<'a, T> {
    stack: &'a Stack,
    streams: Vec<CoreStream<'a, T>>,
}

impl<'a, T: Scalar> StackReader<'a, T> {
    /// Starts every layer's stream (loader threads for files), forwards or `reverse`.
    pub fn new(
        stack: &'a Stack,
        layers: &[&'a dyn Layer<T>],
        reverse: bool,
    ) -> Result<Self, SweepError> {
        let streams = layers
            .iter()
            .map(|layer| layer.stream(reverse))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { stack, streams })
    }

    /// The next site's cores, as tensors with the axes of [`Axis`]: layer l is
    /// `[Left(l), Phys(l), Phys(l+1), Right(l)]`.
    pub fn next_site(&mut self, site: usize) -> Result<Vec<Tensor<T>>, SweepError> {
        let mut cores = Vec::with_capacity(self.streams.len());
        for (l, stream) in self.streams.iter_mut().enumerate() {
            let core = stream.next().ok_or_else(|| SweepError::LengthMismatch {
                detail: format!("layer {l} ended before site {site}"),
            })??;
            cores.push(layer_tensor(l, site, self.stack.shapes[l][site], core)?);
        }
        Ok(cores)
    }
}

/// A core as a tensor of layer `l` in its role shape (same data as the stored core).
///
/// Errors: a core whose data does not have the entries of the shape the layer announced (a
/// [`Layer`] implementation that streams something else than its shapes say).
pub(crate) fn layer_tensor<T: Scalar>(
    l: usize,
    site: usize,
    shape: CoreShape,
    core: Core<T>,
) -> Result<Tensor<T>, SweepError> {
    let dims = vec![shape.left, shape.d_out, shape.d_in, shape.right];
    let entries = core.data.len();
    let axes = vec![
        Axis::Left(l),
        Axis::Phys(l),
        Axis::Phys(l + 1),
        Axis::Right(l),
    ];
    Tensor::from_parts(core.data, dims.clone(), axes).ok_or_else(|| SweepError::BadShape {
        train: format!("layer {l} of the stack"),
        site,
        shape: dims,
        expected: format!("a streamed core with as many entries as its shape, got {entries}"),
    })
}
