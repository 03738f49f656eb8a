//! A layer of a stack: a train whose cores arrive one site at a time, in sweep order.

use crate::train::{kind_name, Core, CoreShape, TensorTrain, TrainKind};
use crate::{Scalar, SweepError};

/// The cores of one train, one site at a time, in the order asked for; it may borrow the
/// train for `'a`.
pub type CoreStream<'a, T> = Box<dyn Iterator<Item = Result<Core<T>, SweepError>> + Send + 'a>;

/// A train the sweep can read: its shapes up front, its cores on demand.
///
/// Implemented by [`TensorTrain`] (in memory) and [`crate::NpyTrain`] (a directory of `.npy`
/// files read lazily by a loader thread), so a stack may mix both and a train larger than
/// memory streams through. Shapes are validated when the layer is made; a core that turns out
/// unreadable or non-finite while streaming is an error of the stream.
pub trait Layer<T: Scalar>: Sync {
    /// A name for messages (a directory, or "MPS"/"MPO").
    fn name(&self) -> String;
    /// MPS or MPO.
    fn kind(&self) -> TrainKind;
    /// The core shapes, site 0 first (validated: bonds chain, outer bonds 1).
    fn shapes(&self) -> Vec<CoreShape>;
    /// The cores, site 0 first, or site n-1 first when `reverse`.
    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, T>, SweepError>;
    /// How many cores one stream holds in memory at most, for the sweep's memory plan:
    /// `None` (the default) when a stream may hold every core at once.
    fn cores_in_memory(&self) -> Option<usize> {
        None
    }
}

impl<T: Scalar> Layer<T> for TensorTrain<T> {
    fn name(&self) -> String {
        kind_name(self.kind()).to_string()
    }

    fn kind(&self) -> TrainKind {
        TensorTrain::kind(self)
    }

    fn shapes(&self) -> Vec<CoreShape> {
        TensorTrain::shapes(self)
    }

    /// Copies one core at a time, as the sweep asks for it.
    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, T>, SweepError> {
        let cores = self.cores().iter();
        Ok(if reverse {
            Box::new(cores.rev().map(|core| Ok(core.clone())))
        } else {
            Box::new(cores.map(|core| Ok(core.clone())))
        })
    }

    /// The copy the sweep is using (the train itself is the caller's).
    fn cores_in_memory(&self) -> Option<usize> {
        Some(1)
    }
}

/// Every core of a layer, in memory.
///
/// Errors: those of the stream, and a stream that ends early or yields a core other than the
/// layer's shapes announce (a loader that died, or a [`Layer`] implementation at odds with
/// itself): the result is never a silently shortened train.
pub fn load<T: Scalar>(layer: &dyn Layer<T>) -> Result<TensorTrain<T>, SweepError> {
    let shapes = layer.shapes();
    let cores = layer.stream(false)?.collect::<Result<Vec<_>, _>>()?;
    if cores.len() != shapes.len() {
        return Err(SweepError::LengthMismatch {
            detail: format!(
                "{}: the stream yielded {} cores for {} sites",
                layer.name(),
                cores.len(),
                shapes.len()
            ),
        });
    }
    for (site, (core, shape)) in cores.iter().zip(&shapes).enumerate() {
        if core.shape != *shape || shape.checked_len() != Some(core.data.len()) {
            return Err(SweepError::BadShape {
                train: layer.name(),
                site,
                shape: core.shape.dims(layer.kind()),
                expected: format!(
                    "the announced shape {:?} with as many entries, got {}",
                    shape.dims(layer.kind()),
                    core.data.len()
                ),
            });
        }
    }
    Ok(TensorTrain::from_trusted(layer.kind(), cores))
}
