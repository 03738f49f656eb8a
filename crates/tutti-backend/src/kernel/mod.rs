//! GPU kernels written once as CUDA C, with a Rust host twin for simulated devices.
//!
//! A [`KernelModule`] is a `static` description of one CUDA C source file: its name, its
//! source (usually `include_str!`), whether NVRTC may contract `a * b + c` into FMAs, and its
//! entry points ([`KernelEntry`]), each with its parameter list ([`Param`]) and its host twin
//! ([`HostTwin`]). [`Device::launch`] runs an entry with the same call on both kinds of device:
//!
//! - on a GPU (cargo feature `cuda`), the module is compiled by NVRTC for the device's
//!   architecture on first use (cached per device handle), and the entry is launched on the
//!   device's stream with the given [`LaunchDims`];
//! - on a simulated device, the entry's host twin runs on host slices of the same buffers, in
//!   the device's thread pool.
//!
//! Both paths first run the same checks: the arguments against the parameter list (count,
//! buffer or scalar, element type, read-only or written), every buffer on the launching
//! device, and the launch dimensions against CUDA's limits. A launch that passes on a
//! simulated device therefore has a valid signature on a GPU (a mismatch there would be
//! undefined behaviour, not an error).
//!
//! # The host twin contract
//!
//! The twin of an entry must write exactly what the CUDA body writes, for the same
//! [`LaunchDims`] and arguments: the same elements (threads the grid does not cover write
//! nothing), the same values, bit for bit when the module is compiled without FMA
//! contraction (`fmad: false`): the same operations in the same order (Rust never contracts
//! FMAs; use IEEE `/` and `sqrt` in both). It need not run thread by thread: it gets typed
//! host slices ([`HostArgs`]) and the device's rayon pool ([`HostLaunch::pool`]), and should
//! be written like plain, fast CPU code (e.g. parallel over blocks or output rows), keeping
//! only the kernel's index arithmetic. A twin that panics is reported as
//! [`BackendError::Kernel`]: on a GPU the same bug would be silent.
//!
//! The backend's own kernels are in [`builtin`].

pub mod builtin;
mod ptx;

use std::panic::{catch_unwind, AssertUnwindSafe};

use num_complex::Complex64;

use crate::buffer::Buffer;
use crate::device::{Backend, Device};
use crate::panic::panic_message;
use crate::{BackendError, Element};

pub use ptx::{check_ptx_signatures, ptx_entries, PtxEntry};

/// One CUDA C source file of kernels, described for launches and checks. Built as a `static`.
#[derive(Debug)]
pub struct KernelModule {
    /// A name unique among the modules of a process (it keys the per-device module cache),
    /// e.g. `"tutti_backend"`.
    pub name: &'static str,
    /// The CUDA C++17 source. Entry points are `extern "C" __global__`; helper functions are
    /// written `TT_DEVICE` (NVRTC defines it as `__device__`), so that the same file can be
    /// checked by a host C++ compiler.
    pub source: &'static str,
    /// Whether NVRTC may contract multiplies and adds into FMAs (`--fmad=true`). `false`
    /// keeps the results bit-identical to the host twins.
    pub fmad: bool,
    /// The entry points.
    pub entries: &'static [KernelEntry],
}

impl KernelModule {
    /// The entry called `name`.
    ///
    /// Errors: [`BackendError::Kernel`] naming the module's entries when there is none.
    pub fn entry(&self, name: &str) -> Result<&KernelEntry, BackendError> {
        self.entries
            .iter()
            .find(|entry| entry.name == name)
            .ok_or_else(|| BackendError::Kernel {
                module: self.name.to_string(),
                entry: name.to_string(),
                message: format!(
                    "no such entry point; the module has {}",
                    self.entries
                        .iter()
                        .map(|entry| entry.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// One `extern "C" __global__` function of a [`KernelModule`].
#[derive(Debug)]
pub struct KernelEntry {
    /// The function's (unmangled) name in the source.
    pub name: &'static str,
    /// Its parameters, in order, as the source declares them.
    pub params: &'static [Param],
    /// The Rust function computing what the CUDA body computes (the contract is in the
    /// [module documentation](self)).
    pub host: HostTwin,
}

/// The host twin of a kernel entry: runs the entry on a simulated device.
///
/// Arguments were checked against the entry's [`Param`]s before the call, so the typed
/// accessors of [`HostArgs`] succeed for the declared types.
pub type HostTwin = fn(&HostLaunch<'_>, HostArgs<'_>) -> Result<(), BackendError>;

/// The element type of a buffer parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemKind {
    /// `double`.
    F64,
    /// `float`.
    F32,
    /// [`Complex64`]: two `double`s, real part first (`double2` in CUDA).
    C64,
    /// `unsigned int`.
    U32,
    /// `unsigned long long`.
    U64,
    /// `int`.
    I32,
}

impl ElemKind {
    /// The Rust type's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "f64",
            Self::F32 => "f32",
            Self::C64 => "Complex64",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::I32 => "i32",
        }
    }
}

/// One parameter of a kernel entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// A buffer the kernel only reads (`const T*`).
    In(ElemKind),
    /// A buffer the kernel only writes (`T*`).
    Out(ElemKind),
    /// A buffer the kernel reads and writes (`T*`).
    InOut(ElemKind),
    /// `unsigned int`, by value.
    U32,
    /// `int`, by value.
    I32,
    /// `unsigned long long`, by value.
    U64,
    /// `double`, by value.
    F64,
    /// `float`, by value.
    F32,
}

impl Param {
    /// How the parameter reads in messages: `"an in f64 buffer"`, `"u32"`.
    pub fn describe(self) -> String {
        match self {
            Self::In(kind) => format!("an in {} buffer", kind.name()),
            Self::Out(kind) => format!("an out {} buffer", kind.name()),
            Self::InOut(kind) => format!("an in-out {} buffer", kind.name()),
            Self::U32 => "u32".into(),
            Self::I32 => "i32".into(),
            Self::U64 => "u64".into(),
            Self::F64 => "f64".into(),
            Self::F32 => "f32".into(),
        }
    }
}

/// The largest number of threads in a block.
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// The largest block extent along z.
pub const MAX_BLOCK_Z: u32 = 64;
/// The largest grid extent along x.
pub const MAX_GRID_X: u32 = i32::MAX as u32;
/// The largest grid extent along y and z.
pub const MAX_GRID_YZ: u32 = 65535;
/// The most dynamic shared memory a block may ask for without opting in (48 KiB).
pub const MAX_SHARED_BYTES: u32 = 48 * 1024;

/// A launch's grid of blocks, block of threads, and dynamic shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchDims {
    /// Blocks along x, y, z.
    pub grid: [u32; 3],
    /// Threads per block along x, y, z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub shared_bytes: u32,
}

impl LaunchDims {
    /// A one-dimensional launch covering `n` threads with blocks of `block` threads:
    /// `ceil(n / block)` blocks (at least one).
    ///
    /// Errors: [`BackendError::InvalidArgument`] when `block` is 0 or more than
    /// [`MAX_BLOCK_THREADS`], or the grid would exceed [`MAX_GRID_X`] blocks.
    pub fn linear(n: u64, block: u32) -> Result<Self, BackendError> {
        if block == 0 || block > MAX_BLOCK_THREADS {
            return Err(BackendError::InvalidArgument {
                op: "launch",
                detail: format!("a block of {block} threads: the limit is 1..={MAX_BLOCK_THREADS}"),
            });
        }
        let blocks = n.div_ceil(u64::from(block)).max(1);
        let grid = u32::try_from(blocks)
            .ok()
            .filter(|&blocks| blocks <= MAX_GRID_X)
            .ok_or_else(|| BackendError::InvalidArgument {
                op: "launch",
                detail: format!(
                    "{n} threads in blocks of {block} need {blocks} blocks, more than the \
                     {MAX_GRID_X} a grid may have"
                ),
            })?;
        Ok(Self {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_bytes: 0,
        })
    }

    /// Threads per block.
    pub fn block_threads(&self) -> u64 {
        self.block.iter().map(|&d| u64::from(d)).product()
    }

    /// Threads along x in the whole grid (`grid[0] * block[0]`): the global x indices a
    /// one-dimensional kernel covers.
    pub fn threads_x(&self) -> u64 {
        u64::from(self.grid[0]) * u64::from(self.block[0])
    }

    /// Threads in the whole grid.
    pub fn total_threads(&self) -> u64 {
        self.grid.iter().map(|&d| u64::from(d)).product::<u64>() * self.block_threads()
    }

    /// Checks the dimensions against CUDA's limits: no zero extent, at most
    /// [`MAX_BLOCK_THREADS`] threads per block (z at most [`MAX_BLOCK_Z`]), grid x at most
    /// [`MAX_GRID_X`], y and z at most [`MAX_GRID_YZ`], shared memory at most
    /// [`MAX_SHARED_BYTES`]. Returns what is wrong.
    fn check(&self) -> Result<(), String> {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        if self.grid.contains(&0) || self.block.contains(&0) {
            return Err(format!(
                "zero launch dimension: grid {:?}, block {:?} (every extent must be at least 1)",
                self.grid, self.block
            ));
        }
        let threads = self.block_threads();
        if threads > u64::from(MAX_BLOCK_THREADS)
            || bx > MAX_BLOCK_THREADS
            || by > MAX_BLOCK_THREADS
            || bz > MAX_BLOCK_Z
        {
            return Err(format!(
                "block {:?} has {threads} threads: at most {MAX_BLOCK_THREADS} per block \
                 (and at most {MAX_BLOCK_Z} along z)",
                self.block
            ));
        }
        if gx > MAX_GRID_X || gy > MAX_GRID_YZ || gz > MAX_GRID_YZ {
            return Err(format!(
                "grid {:?} is too large: x at most {MAX_GRID_X}, y and z at most {MAX_GRID_YZ}",
                self.grid
            ));
        }
        if self.shared_bytes > MAX_SHARED_BYTES {
            return Err(format!(
                "{} bytes of dynamic shared memory: at most {MAX_SHARED_BYTES}",
                self.shared_bytes
            ));
        }
        Ok(())
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for num_complex::Complex64 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
    impl Sealed for i32 {}
}

/// An element type kernels take buffers of: `f64`, `f32`, [`Complex64`], `u32`, `u64`,
/// `i32`.
pub trait KernelElement: Element + sealed::Sealed {
    /// Its kind, as [`Param`]s name it.
    const KIND: ElemKind;
}

impl KernelElement for f64 {
    const KIND: ElemKind = ElemKind::F64;
}
impl KernelElement for f32 {
    const KIND: ElemKind = ElemKind::F32;
}
impl KernelElement for Complex64 {
    const KIND: ElemKind = ElemKind::C64;
}
impl KernelElement for u32 {
    const KIND: ElemKind = ElemKind::U32;
}
impl KernelElement for u64 {
    const KIND: ElemKind = ElemKind::U64;
}
impl KernelElement for i32 {
    const KIND: ElemKind = ElemKind::I32;
}

/// A buffer of any kernel element type, seen without its type.
pub(crate) trait ErasedBuffer {
    fn kind(&self) -> ElemKind;
    fn device(&self) -> &Device;
    /// The elements' bytes, on a simulated device.
    fn host_bytes(&self) -> Option<&[u8]>;
    fn host_bytes_mut(&mut self) -> Option<&mut [u8]>;
    #[cfg(feature = "cuda")]
    fn cuda_bytes(&self) -> Option<&crate::cuda::CudaBytes>;
    #[cfg(feature = "cuda")]
    fn cuda_bytes_mut(&mut self) -> Option<&mut crate::cuda::CudaBytes>;
}

impl<T: KernelElement> ErasedBuffer for Buffer<T> {
    fn kind(&self) -> ElemKind {
        T::KIND
    }
    fn device(&self) -> &Device {
        Buffer::device(self)
    }
    fn host_bytes(&self) -> Option<&[u8]> {
        self.as_host_slice().map(bytemuck::cast_slice)
    }
    fn host_bytes_mut(&mut self) -> Option<&mut [u8]> {
        self.as_host_slice_mut().map(bytemuck::cast_slice_mut)
    }
    #[cfg(feature = "cuda")]
    fn cuda_bytes(&self) -> Option<&crate::cuda::CudaBytes> {
        Buffer::cuda_bytes(self)
    }
    #[cfg(feature = "cuda")]
    fn cuda_bytes_mut(&mut self) -> Option<&mut crate::cuda::CudaBytes> {
        Buffer::cuda_bytes_mut(self)
    }
}

/// One argument of a launch: a buffer (borrowed for the launch) or a scalar.
///
/// ```
/// use tutti_backend::kernel::Arg;
/// # let device = &tutti_backend::Resources::cpu(1).select()?[0];
/// let x = device.upload(&[1.0_f64, 2.0])?;
/// let mut y = device.alloc_zeros::<f64>(2)?;
/// let args = [Arg::input(&x), Arg::output(&mut y), Arg::u64(2)];
/// # drop(args);
/// # Ok::<(), tutti_backend::BackendError>(())
/// ```
pub struct Arg<'a>(pub(crate) ArgValue<'a>);

pub(crate) enum ArgValue<'a> {
    /// For [`Param::In`].
    In(&'a dyn ErasedBuffer),
    /// For [`Param::Out`] and [`Param::InOut`].
    Out(&'a mut dyn ErasedBuffer),
    U32(u32),
    I32(i32),
    U64(u64),
    F64(f64),
    F32(f32),
}

impl<'a> Arg<'a> {
    /// A buffer the kernel reads, for a [`Param::In`].
    pub fn input<T: KernelElement>(buffer: &'a Buffer<T>) -> Self {
        Self(ArgValue::In(buffer))
    }

    /// A buffer the kernel writes, for a [`Param::Out`] or [`Param::InOut`].
    pub fn output<T: KernelElement>(buffer: &'a mut Buffer<T>) -> Self {
        Self(ArgValue::Out(buffer))
    }

    /// A `u32` scalar, for a [`Param::U32`].
    pub fn u32(value: u32) -> Self {
        Self(ArgValue::U32(value))
    }

    /// An `i32` scalar, for a [`Param::I32`].
    pub fn i32(value: i32) -> Self {
        Self(ArgValue::I32(value))
    }

    /// A `u64` scalar, for a [`Param::U64`].
    pub fn u64(value: u64) -> Self {
        Self(ArgValue::U64(value))
    }

    /// An `f64` scalar, for a [`Param::F64`].
    pub fn f64(value: f64) -> Self {
        Self(ArgValue::F64(value))
    }

    /// An `f32` scalar, for a [`Param::F32`].
    pub fn f32(value: f32) -> Self {
        Self(ArgValue::F32(value))
    }

    /// How the argument reads in messages.
    fn describe(&self) -> String {
        match &self.0 {
            ArgValue::In(buffer) => format!("a read-only {} buffer", buffer.kind().name()),
            ArgValue::Out(buffer) => format!("a writable {} buffer", buffer.kind().name()),
            ArgValue::U32(_) => "u32".into(),
            ArgValue::I32(_) => "i32".into(),
            ArgValue::U64(_) => "u64".into(),
            ArgValue::F64(_) => "f64".into(),
            ArgValue::F32(_) => "f32".into(),
        }
    }

    fn buffer(&self) -> Option<&dyn ErasedBuffer> {
        match &self.0 {
            ArgValue::In(buffer) => Some(*buffer),
            ArgValue::Out(buffer) => Some(&**buffer),
            _ => None,
        }
    }

    /// Whether the argument fits `param`.
    fn fits(&self, param: Param) -> bool {
        match (param, &self.0) {
            (Param::In(kind), ArgValue::In(buffer)) => buffer.kind() == kind,
            (Param::Out(kind) | Param::InOut(kind), ArgValue::Out(buffer)) => buffer.kind() == kind,
            (Param::U32, ArgValue::U32(_))
            | (Param::I32, ArgValue::I32(_))
            | (Param::U64, ArgValue::U64(_))
            | (Param::F64, ArgValue::F64(_))
            | (Param::F32, ArgValue::F32(_)) => true,
            _ => false,
        }
    }
}

impl std::fmt::Debug for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Checks a launch of `entry` of `module` on `device` (both device kinds run this first).
pub(crate) fn check_launch(
    device: &Device,
    module: &KernelModule,
    entry: &KernelEntry,
    dims: &LaunchDims,
    args: &[Arg<'_>],
) -> Result<(), BackendError> {
    let fail = |message: String| BackendError::Kernel {
        module: module.name.to_string(),
        entry: entry.name.to_string(),
        message,
    };
    if args.len() != entry.params.len() {
        return Err(fail(format!(
            "{} arguments given, the entry takes {} ({})",
            args.len(),
            entry.params.len(),
            entry
                .params
                .iter()
                .map(|param| param.describe())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for (index, (param, arg)) in entry.params.iter().zip(args).enumerate() {
        if !arg.fits(*param) {
            return Err(fail(format!(
                "parameter {index}: expected {}, got {}",
                param.describe(),
                arg.describe()
            )));
        }
        if let Some(buffer) = arg.buffer() {
            if !buffer.device().same_physical_device(device) {
                return Err(fail(format!(
                    "parameter {index} ({}) lives on {}, the launch is on {device}",
                    param.describe(),
                    buffer.device()
                )));
            }
        }
    }
    dims.check().map_err(fail)
}

/// What a host twin knows about its launch.
pub struct HostLaunch<'a> {
    module: &'static KernelModule,
    entry: &'static KernelEntry,
    dims: LaunchDims,
    pool: &'a rayon::ThreadPool,
}

impl HostLaunch<'_> {
    /// The launch dimensions, as the CUDA launch would get them.
    pub fn dims(&self) -> &LaunchDims {
        &self.dims
    }

    /// The device's thread pool: run parallel work in it (`pool().install(...)`), so that a
    /// simulated device uses its share of the cores and no more.
    pub fn pool(&self) -> &rayon::ThreadPool {
        self.pool
    }

    /// The module launched.
    pub fn module(&self) -> &'static KernelModule {
        self.module
    }

    /// The entry launched.
    pub fn entry(&self) -> &'static KernelEntry {
        self.entry
    }
}

/// The arguments of a launch as a host twin sees them: typed host slices and scalars, by
/// parameter index.
pub struct HostArgs<'a> {
    module: &'static str,
    entry: &'static str,
    args: Vec<HostArg<'a>>,
}

enum HostArg<'a> {
    In(ElemKind, &'a [u8]),
    /// `None` once taken.
    Out(ElemKind, Option<&'a mut [u8]>),
    U32(u32),
    I32(i32),
    U64(u64),
    F64(f64),
    F32(f32),
}

impl<'a> HostArgs<'a> {
    fn error(&self, index: usize, message: String) -> BackendError {
        BackendError::Kernel {
            module: self.module.to_string(),
            entry: self.entry.to_string(),
            message: format!("host twin, parameter {index}: {message}"),
        }
    }

    fn get(&self, index: usize) -> Result<&HostArg<'a>, BackendError> {
        self.args
            .get(index)
            .ok_or_else(|| self.error(index, format!("only {} arguments", self.args.len())))
    }

    /// The read-only buffer at `index`, as elements of `T`.
    pub fn input<T: KernelElement>(&self, index: usize) -> Result<&'a [T], BackendError> {
        match self.get(index)? {
            HostArg::In(kind, bytes) if *kind == T::KIND => {
                bytemuck::try_cast_slice(bytes).map_err(|err| self.error(index, format!("{err:?}")))
            }
            _ => Err(self.error(index, format!("not an in {} buffer", T::KIND.name()))),
        }
    }

    /// The written buffer at `index`, as elements of `T`; each may be taken once.
    pub fn output<T: KernelElement>(&mut self, index: usize) -> Result<&'a mut [T], BackendError> {
        let taken = match self.args.get_mut(index) {
            Some(HostArg::Out(kind, slot)) if *kind == T::KIND => slot.take(),
            _ => None,
        };
        match taken {
            Some(bytes) => bytemuck::try_cast_slice_mut(bytes)
                .map_err(|err| self.error(index, format!("{err:?}"))),
            None => Err(self.error(
                index,
                format!("not an out {} buffer, or taken already", T::KIND.name()),
            )),
        }
    }

    /// The `u32` scalar at `index`.
    pub fn u32(&self, index: usize) -> Result<u32, BackendError> {
        match self.get(index)? {
            HostArg::U32(value) => Ok(*value),
            _ => Err(self.error(index, "not a u32".into())),
        }
    }

    /// The `i32` scalar at `index`.
    pub fn i32(&self, index: usize) -> Result<i32, BackendError> {
        match self.get(index)? {
            HostArg::I32(value) => Ok(*value),
            _ => Err(self.error(index, "not an i32".into())),
        }
    }

    /// The `u64` scalar at `index`.
    pub fn u64(&self, index: usize) -> Result<u64, BackendError> {
        match self.get(index)? {
            HostArg::U64(value) => Ok(*value),
            _ => Err(self.error(index, "not a u64".into())),
        }
    }

    /// The `f64` scalar at `index`.
    pub fn f64(&self, index: usize) -> Result<f64, BackendError> {
        match self.get(index)? {
            HostArg::F64(value) => Ok(*value),
            _ => Err(self.error(index, "not an f64".into())),
        }
    }

    /// The `f32` scalar at `index`.
    pub fn f32(&self, index: usize) -> Result<f32, BackendError> {
        match self.get(index)? {
            HostArg::F32(value) => Ok(*value),
            _ => Err(self.error(index, "not an f32".into())),
        }
    }
}

/// Runs `entry`'s host twin on a simulated device.
fn launch_host(
    device: &Device,
    module: &'static KernelModule,
    entry: &'static KernelEntry,
    dims: LaunchDims,
    args: &mut [Arg<'_>],
) -> Result<(), BackendError> {
    let fail = |message: String| BackendError::Kernel {
        module: module.name.to_string(),
        entry: entry.name.to_string(),
        message,
    };
    let mut host = Vec::with_capacity(args.len());
    for (index, arg) in args.iter_mut().enumerate() {
        let not_host = || fail(format!("parameter {index} is not in host memory"));
        host.push(match &mut arg.0 {
            ArgValue::In(buffer) => {
                HostArg::In(buffer.kind(), buffer.host_bytes().ok_or_else(not_host)?)
            }
            ArgValue::Out(buffer) => {
                let kind = buffer.kind();
                HostArg::Out(kind, Some(buffer.host_bytes_mut().ok_or_else(not_host)?))
            }
            ArgValue::U32(value) => HostArg::U32(*value),
            ArgValue::I32(value) => HostArg::I32(*value),
            ArgValue::U64(value) => HostArg::U64(*value),
            ArgValue::F64(value) => HostArg::F64(*value),
            ArgValue::F32(value) => HostArg::F32(*value),
        });
    }
    let launch = HostLaunch {
        module,
        entry,
        dims,
        pool: device.thread_pool()?,
    };
    let host_args = HostArgs {
        module: module.name,
        entry: entry.name,
        args: host,
    };
    catch_unwind(AssertUnwindSafe(|| (entry.host)(&launch, host_args))).unwrap_or_else(|panic| {
        Err(fail(format!(
            "the host twin panicked: {}",
            panic_message(panic.as_ref())
        )))
    })
}

impl Device {
    /// Runs entry `entry` of `module` over `dims` with `args`: compiled by NVRTC and launched
    /// on the device's stream on a GPU, its host twin on a simulated device (see the
    /// [`kernel`](crate::kernel) module for the contract between the two).
    ///
    /// Ordering is that of every buffer operation: on a GPU the launch is queued on the
    /// default stream and a later download waits for it; on a simulated device it has
    /// finished on return.
    ///
    /// Errors: [`BackendError::Kernel`] for an unknown entry, arguments that do not match its
    /// [`Param`]s (count, kind, element type, read-only or written), a buffer on another
    /// device, launch dimensions beyond CUDA's limits, or a host twin that fails;
    /// [`BackendError::Nvrtc`] when the module does not compile; [`BackendError::Cuda`] for a
    /// missing NVRTC library or a driver failure.
    pub fn launch(
        &self,
        module: &'static KernelModule,
        entry: &str,
        dims: LaunchDims,
        args: &mut [Arg<'_>],
    ) -> Result<(), BackendError> {
        let entry = module.entry(entry)?;
        check_launch(self, module, entry, &dims, args)?;
        match self.backend() {
            Backend::Host => launch_host(self, module, entry, dims, args),
            #[cfg(feature = "cuda")]
            Backend::Cuda(cuda) => crate::nvrtc::launch(cuda, module, entry, dims, args),
        }
    }
}

#[cfg(test)]
mod tests;
