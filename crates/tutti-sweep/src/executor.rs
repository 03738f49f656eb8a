//! Where a rank's sweep computes: the host (faer on its thread pool) or its device
//! (`Device::gemm`, the backend's permutation kernel and the sweep's sketch kernel). One
//! sweep algorithm (`distributed.rs`) runs on either through [`Executor`], so the two make the
//! same contractions in the same order: on a simulated device the device executor gives the
//! host executor's bits (its compute calls run the very same faer products, its kernels'
//! host twins the host code).

use faer::Par;
use tutti_backend::Device;

use crate::device_tensor::{execute_on_device, DeviceTensor};
use crate::distributed::apply_sketch;
use crate::tensor::{contract_strided, Axis, Buffers, ContractionPlan, Tensor};
use crate::{Scalar, SweepError};

/// The operations one rank's sweep makes on its tensors.
pub(crate) trait Executor<T: Scalar>: Send {
    /// A tensor where this executor keeps it.
    type Held: Send + Sync;

    /// `tensor`, moved to where this executor computes.
    fn hold(&mut self, tensor: Tensor<T>) -> Result<Self::Held, SweepError>;

    /// `held`, back on the host.
    fn release(&mut self, held: Self::Held) -> Result<Tensor<T>, SweepError>;

    /// `a` (conjugated when `conj_a`) times `b` into a result with axes `out`, as
    /// [`Tensor::contract_as`].
    fn contract(
        &mut self,
        a: &Self::Held,
        conj_a: bool,
        b: &Self::Held,
        out: &[Axis],
    ) -> Result<Self::Held, SweepError>;

    /// The same tensor with its axes in `order`.
    fn permuted(&mut self, held: &Self::Held, order: &[Axis]) -> Result<Self::Held, SweepError>;

    /// The sketch vectors `g` (this rank's columns, row-major `Col x (d_out d_in)`) applied to
    /// `t`, the environment times the cores: the next sketched environment.
    fn apply_sketch(
        &mut self,
        t: &Self::Held,
        g: &[T],
        depth: usize,
    ) -> Result<Self::Held, SweepError>;

    /// `held` is no longer needed (its memory may serve a later result).
    fn recycle(&mut self, held: Self::Held);

    /// A host tensor is no longer needed (on the host executor its memory may serve a later
    /// result).
    fn recycle_host(&mut self, tensor: Tensor<T>) {
        drop(tensor);
    }
}

/// The host executor: faer on strided views in the rank's thread pool (`par`), reusing the
/// memory of recycled tensors.
pub(crate) struct HostExecutor<T> {
    pub par: Par,
    pub buffers: Buffers<T>,
}

impl<T: Scalar> Executor<T> for HostExecutor<T> {
    type Held = Tensor<T>;

    fn hold(&mut self, tensor: Tensor<T>) -> Result<Tensor<T>, SweepError> {
        Ok(tensor)
    }

    fn release(&mut self, held: Tensor<T>) -> Result<Tensor<T>, SweepError> {
        Ok(held)
    }

    fn contract(
        &mut self,
        a: &Tensor<T>,
        conj_a: bool,
        b: &Tensor<T>,
        out: &[Axis],
    ) -> Result<Tensor<T>, SweepError> {
        Ok(contract_strided(
            a,
            conj_a,
            b,
            out,
            self.par,
            &mut self.buffers,
        ))
    }

    fn permuted(&mut self, held: &Tensor<T>, order: &[Axis]) -> Result<Tensor<T>, SweepError> {
        Ok(held.permuted(order))
    }

    fn apply_sketch(
        &mut self,
        t: &Tensor<T>,
        g: &[T],
        depth: usize,
    ) -> Result<Tensor<T>, SweepError> {
        apply_sketch(t, g, depth, self.par)
    }

    fn recycle(&mut self, held: Tensor<T>) {
        self.buffers.give(held.data);
    }

    fn recycle_host(&mut self, tensor: Tensor<T>) {
        self.buffers.give(tensor.data);
    }
}

/// The device executor: every tensor in a buffer of `device`, every contraction its plan
/// executed by `Device::gemm` calls, permutations by the `permute_bac` kernel, the sketch by
/// the sweep's kernel. Tensors cross to and from the host only where the algorithm needs them
/// there (cores and sketch vectors in, the sketched rows and projected rows out).
pub(crate) struct DeviceExecutor {
    pub device: Device,
}

impl<T: Scalar> Executor<T> for DeviceExecutor {
    type Held = DeviceTensor<T>;

    fn hold(&mut self, tensor: Tensor<T>) -> Result<DeviceTensor<T>, SweepError> {
        DeviceTensor::upload(&self.device, &tensor)
    }

    fn release(&mut self, held: DeviceTensor<T>) -> Result<Tensor<T>, SweepError> {
        held.download()
    }

    fn contract(
        &mut self,
        a: &DeviceTensor<T>,
        conj_a: bool,
        b: &DeviceTensor<T>,
        out: &[Axis],
    ) -> Result<DeviceTensor<T>, SweepError> {
        let plan = ContractionPlan::for_shapes(a.shape(), b.shape(), out);
        execute_on_device(&plan, a, conj_a, b)
    }

    fn permuted(
        &mut self,
        held: &DeviceTensor<T>,
        order: &[Axis],
    ) -> Result<DeviceTensor<T>, SweepError> {
        held.permuted(order)
    }

    fn apply_sketch(
        &mut self,
        t: &DeviceTensor<T>,
        g: &[T],
        depth: usize,
    ) -> Result<DeviceTensor<T>, SweepError> {
        let g = self.device.upload(g)?;
        crate::gpu::apply_sketch_on_device(t, &g, depth)
    }

    fn recycle(&mut self, held: DeviceTensor<T>) {
        drop(held);
    }
}
