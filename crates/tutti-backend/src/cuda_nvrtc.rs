//! NVRTC: compiling [`KernelModule`]s to CUBIN and PTX at run time, and launching them.
//!
//! [`compile`] needs only libnvrtc, no GPU and no driver: it is how the kernels' signatures
//! and register use are checked on any machine (`cargo xtask nvrtc-check`). On a GPU,
//! [`crate::Device::launch`] compiles a module for the device's architecture (`sm_XY` from
//! its compute capability) on first use, checks the PTX signatures against the
//! [`crate::Param`]s, loads the CUBIN (a driver older than NVRTC still loads CUBIN, not PTX)
//! and keeps it in the device handle's cache.
//!
//! # Finding libnvrtc
//!
//! cudarc opens libnvrtc by bare name (`libnvrtc.so`, `libnvrtc.so.13`, ...) and panics when
//! none loads; libnvrtc in turn opens `libnvrtc-builtins.so.13.*` by bare name when it
//! compiles. [`library`] runs first: when `TUTTI_CUDA_LIB_DIR` is set it preloads both from
//! that folder by absolute path with `RTLD_GLOBAL` (so the bare names resolve to them by
//! SONAME), then asks cudarc's non-panicking probe. Without it, the folder holding the
//! libraries (for the `nvidia-cuda-nvrtc` wheel: `site-packages/nvidia/cu13/lib`) must be on
//! `LD_LIBRARY_PATH`. Every call into NVRTC also runs under `catch_unwind`.

use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cudarc::driver::{CudaFunction, CudaModule, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};

use crate::cuda::{catch, driver, CudaDevice};
use crate::cuda_libs::{self, Library};
use crate::kernel::{check_ptx_signatures, ArgValue, KernelEntry, KernelModule, LaunchDims};
use crate::{Arg, BackendError};

pub use crate::cuda_libs::LIB_DIR_VARIABLE;

/// The label of NVRTC errors not tied to a device.
const NVRTC: &str = "nvrtc";

/// NVRTC (`libnvrtc`, which opens `libnvrtc-builtins` when it compiles).
static NVRTC_LIBRARY: Library = Library {
    name: "NVRTC",
    stems: &["libnvrtc-builtins", "libnvrtc"],
    probe: sys::is_culib_present,
    state: &NVRTC_STATE,
};
static NVRTC_STATE: OnceLock<Result<(), String>> = OnceLock::new();

/// Makes sure libnvrtc can be loaded (preloading it from `TUTTI_CUDA_LIB_DIR` when set);
/// probed once per process.
///
/// Errors: [`BackendError::Cuda`] (device `"nvrtc"`) naming the library and saying to put
/// its folder on `LD_LIBRARY_PATH` or to set `TUTTI_CUDA_LIB_DIR`.
pub fn library() -> Result<(), BackendError> {
    cuda_libs::require(&NVRTC_LIBRARY, NVRTC)
}

/// NVRTC's version, `(major, minor)`.
///
/// Errors: as [`library`], or NVRTC's own error.
pub fn version() -> Result<(i32, i32), BackendError> {
    library()?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: libnvrtc is loadable (checked above); both out-pointers are valid and writable.
    let status = catch(NVRTC, || unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    })?;
    check_status(status, |message| BackendError::Cuda {
        device: NVRTC.into(),
        message: format!("nvrtcVersion: {message}"),
    })?;
    Ok((major, minor))
}

/// The architectures this libnvrtc compiles for, as numbers (`90` for `sm_90`).
///
/// Errors: as [`version`].
pub fn supported_archs() -> Result<Vec<i32>, BackendError> {
    library()?;
    let fail = |message| BackendError::Cuda {
        device: NVRTC.into(),
        message: format!("nvrtcGetSupportedArchs: {message}"),
    };
    let mut count: c_int = 0;
    // SAFETY: libnvrtc is loadable; `count` is a valid out-pointer.
    let status = catch(NVRTC, || unsafe {
        sys::nvrtcGetNumSupportedArchs(&mut count)
    })?;
    check_status(status, fail)?;
    let mut archs = vec![0 as c_int; usize::try_from(count).unwrap_or(0)];
    if !archs.is_empty() {
        // SAFETY: `archs` has room for the `count` entries NVRTC reported.
        let status = catch(NVRTC, || unsafe {
            sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
        })?;
        check_status(status, fail)?;
    }
    Ok(archs)
}

/// A kernel module compiled by NVRTC.
#[derive(Clone, Debug)]
pub struct CompiledModule {
    /// The module's name.
    pub module: &'static str,
    /// The target it was compiled for (`"sm_90"`, or `"compute_90"` for PTX only).
    pub arch: String,
    /// The CUBIN for `sm_XY` targets; `None` for `compute_XY` (PTX only).
    pub cubin: Option<Vec<u8>>,
    /// The PTX text.
    pub ptx: String,
    /// NVRTC's program log: warnings, and ptxas's per-kernel resource lines (`-v`).
    pub log: String,
}

impl CompiledModule {
    /// The per-entry resources ptxas reported in the log (registers, stack, spills), for
    /// CUBIN targets.
    pub fn resources(&self) -> Vec<KernelResources> {
        parse_resources(&self.log)
    }
}

/// What ptxas reports for one entry of a CUBIN.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelResources {
    /// The entry's name.
    pub entry: String,
    /// Registers per thread.
    pub registers: u32,
    /// Stack frame, bytes per thread.
    pub stack_bytes: u32,
    /// Bytes of registers spilled to local memory (stores).
    pub spill_store_bytes: u32,
    /// Bytes of spilled registers loaded back.
    pub spill_load_bytes: u32,
}

/// Reads ptxas's `-v` lines:
///
/// ```text
/// ptxas info    : Compiling entry function 'tt_axpy_f64' for 'sm_90'
/// ptxas info    : Function properties for tt_axpy_f64
///     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
/// ptxas info    : Used 10 registers, used 0 barriers, 384 bytes cmem[0]
/// ```
fn parse_resources(log: &str) -> Vec<KernelResources> {
    /// The number right before `unit` in `line` (`"12 bytes spill stores"`).
    fn number_before(line: &str, unit: &str) -> Option<u32> {
        let at = line.find(unit)?;
        line[..at].split_whitespace().last()?.parse().ok()
    }
    let mut found: Vec<KernelResources> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            found.push(KernelResources {
                entry: name,
                ..KernelResources::default()
            });
            continue;
        }
        let Some(current) = found.last_mut() else {
            continue;
        };
        if line.contains("bytes stack frame") {
            current.stack_bytes = number_before(line, "bytes stack frame").unwrap_or(0);
            current.spill_store_bytes = number_before(line, "bytes spill stores").unwrap_or(0);
            current.spill_load_bytes = number_before(line, "bytes spill loads").unwrap_or(0);
        } else if line.contains("Used ") && line.contains(" registers") {
            if let Some(rest) = line.split("Used ").nth(1) {
                current.registers = number_before(rest, "registers").unwrap_or(0);
            }
        }
    }
    found
}

/// The options every module is compiled with.
fn options(arch: &str, fmad: bool) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".into(),
        "-lineinfo".into(),
        format!("--fmad={fmad}"),
        // Helper functions are written `TT_DEVICE`: `__device__` here, `static inline` for
        // a host C++ compiler.
        "-DTT_DEVICE=__device__".into(),
        "--ptxas-options=-v".into(),
    ]
}

/// Compiles `module` for `arch` (`"sm_90"`: CUBIN and PTX; `"compute_90"`: PTX only), with
/// FMA contraction when `fmad` (modules carry their own choice in
/// [`KernelModule::fmad`]).
///
/// Needs libnvrtc, not a GPU. Errors: [`BackendError::Nvrtc`] with the program log when the
/// source does not compile (or holds a NUL byte); as [`library`] when libnvrtc is missing.
pub fn compile(
    module: &KernelModule,
    arch: &str,
    fmad: bool,
) -> Result<CompiledModule, BackendError> {
    library()?;
    let fail = |message: String, log: String| BackendError::Nvrtc {
        module: module.name.to_string(),
        arch: arch.to_string(),
        message,
        log,
    };
    let source = CString::new(module.source)
        .map_err(|_| fail("the source holds a NUL byte".into(), String::new()))?;
    let name = CString::new(format!("{}.cu", module.name))
        .map_err(|_| fail("the module name holds a NUL byte".into(), String::new()))?;
    let options = options(arch, fmad)
        .into_iter()
        .map(CString::new)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| fail("an option holds a NUL byte".into(), String::new()))?;
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

    let mut program: nvrtcProgram = std::ptr::null_mut();
    // SAFETY: `source` and `name` are NUL-terminated and outlive the call; no headers are
    // passed (count 0, null arrays); `program` is a valid out-pointer.
    let created = catch(NVRTC, || unsafe {
        sys::nvrtcCreateProgram(
            &mut program,
            source.as_ptr(),
            name.as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    })?;
    check_status(created, |message| {
        fail(format!("nvrtcCreateProgram: {message}"), String::new())
    })?;
    let program = Program(program);
    let count = c_int::try_from(option_ptrs.len()).unwrap_or(c_int::MAX);
    // SAFETY: `program` was created above; `option_ptrs` holds `count` NUL-terminated strings
    // kept alive by `options` for the call.
    let compiled = catch(NVRTC, || unsafe {
        sys::nvrtcCompileProgram(program.0, count, option_ptrs.as_ptr())
    })?;
    let log = program.log();
    check_status(compiled, |message| fail(message, log.clone()))?;
    let ptx = program
        .bytes(sys::nvrtcGetPTXSize, sys::nvrtcGetPTX)
        .map_err(|message| fail(format!("reading the PTX: {message}"), log.clone()))?;
    let ptx = String::from_utf8_lossy(&ptx).into_owned();
    let cubin = if arch.starts_with("sm_") {
        Some(
            program
                .bytes(sys::nvrtcGetCUBINSize, sys::nvrtcGetCUBIN)
                .map_err(|message| fail(format!("reading the CUBIN: {message}"), log.clone()))?,
        )
    } else {
        None
    };
    Ok(CompiledModule {
        module: module.name,
        arch: arch.to_string(),
        cubin,
        ptx,
        log,
    })
}

/// [`compile`], then [`check_ptx_signatures`]: what a GPU launch checks before loading.
///
/// Errors: as [`compile`]; [`BackendError::Kernel`] for a signature that differs from the
/// entry's [`crate::Param`]s.
pub fn compile_checked(
    module: &KernelModule,
    arch: &str,
    fmad: bool,
) -> Result<CompiledModule, BackendError> {
    let compiled = compile(module, arch, fmad)?;
    check_ptx_signatures(module, &compiled.ptx)?;
    Ok(compiled)
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtcProgram);

impl Program {
    /// The program log (empty when NVRTC cannot give it).
    fn log(&self) -> String {
        self.bytes(sys::nvrtcGetProgramLogSize, sys::nvrtcGetProgramLog)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }

    /// One of the program's outputs, through its size and copy functions; a trailing NUL
    /// (PTX, log) is dropped.
    fn bytes(
        &self,
        size: unsafe fn(nvrtcProgram, *mut usize) -> nvrtcResult,
        copy: unsafe fn(nvrtcProgram, *mut c_char) -> nvrtcResult,
    ) -> Result<Vec<u8>, String> {
        let mut len = 0_usize;
        // SAFETY: `self.0` is a live program; `len` is a valid out-pointer.
        let status =
            catch(NVRTC, || unsafe { size(self.0, &mut len) }).map_err(|err| err.to_string())?;
        check_status(status, |message| message)?;
        let mut out = vec![0_u8; len];
        if len > 0 {
            // SAFETY: `out` has the `len` bytes NVRTC said the output needs.
            let status = catch(NVRTC, || unsafe { copy(self.0, out.as_mut_ptr().cast()) })
                .map_err(|err| err.to_string())?;
            check_status(status, |message| message)?;
        }
        if out.last() == Some(&0) {
            out.pop();
        }
        Ok(out)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.0` was created by `nvrtcCreateProgram` and is destroyed only here.
        let _ = catch(NVRTC, || unsafe { sys::nvrtcDestroyProgram(&mut self.0) });
    }
}

/// `Ok` for `NVRTC_SUCCESS`, else `error` of NVRTC's name for the status.
fn check_status<E>(status: nvrtcResult, error: impl FnOnce(String) -> E) -> Result<(), E> {
    if status == nvrtcResult::NVRTC_SUCCESS {
        return Ok(());
    }
    // SAFETY: `nvrtcGetErrorString` returns a pointer to a static NUL-terminated string (or
    // null), for any status value.
    let text = catch(NVRTC, || unsafe {
        let text = sys::nvrtcGetErrorString(status);
        (!text.is_null()).then(|| CStr::from_ptr(text).to_string_lossy().into_owned())
    })
    .ok()
    .flatten();
    Err(error(text.unwrap_or_else(|| format!("{status:?}"))))
}

/// The modules one device handle has loaded, looked up by module name (a handful per
/// process: a list keeps the device handle small).
#[derive(Default)]
pub(crate) struct ModuleCache {
    modules: Mutex<Vec<Loaded>>,
}

struct Loaded {
    name: &'static str,
    /// The source it was compiled from (two modules of one name are an error, not a
    /// silent reuse).
    source: &'static str,
    module: Arc<CudaModule>,
}

/// The architecture to compile for on `cuda`: `sm_XY` when this NVRTC knows it, else PTX for
/// the newest older architecture it knows (the driver compiles that for the device).
fn device_arch(cuda: &CudaDevice) -> Result<String, BackendError> {
    let (major, minor) = driver(cuda.label(), || cuda.context().compute_capability())?;
    let wanted = major * 10 + minor;
    let supported = supported_archs()?;
    if supported.contains(&wanted) {
        return Ok(format!("sm_{wanted}"));
    }
    match supported
        .iter()
        .copied()
        .filter(|&arch| arch < wanted)
        .max()
    {
        Some(older) => Ok(format!("compute_{older}")),
        None => Err(BackendError::Cuda {
            device: cuda.label().to_string(),
            message: format!(
                "NVRTC compiles for {supported:?}, nothing at or below the device's \
                 sm_{wanted}: use an older libnvrtc"
            ),
        }),
    }
}

/// The loaded `module` on `cuda`, compiling and loading it on first use.
fn loaded(cuda: &CudaDevice, module: &KernelModule) -> Result<Arc<CudaModule>, BackendError> {
    let cache = cuda.kernels();
    // Compiling under the lock: two ranks sharing a handle wait for one compile.
    let mut modules = cache.modules.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(loaded) = modules.iter().find(|loaded| loaded.name == module.name) {
        if !std::ptr::eq(loaded.source, module.source) && loaded.source != module.source {
            return Err(BackendError::Kernel {
                module: module.name.to_string(),
                entry: String::new(),
                message: "two different kernel modules share this name".into(),
            });
        }
        return Ok(Arc::clone(&loaded.module));
    }
    let arch = device_arch(cuda)?;
    let compiled = compile_checked(module, &arch, module.fmad)?;
    let image = match compiled.cubin {
        Some(cubin) => cudarc::nvrtc::Ptx::from_binary(cubin),
        None => cudarc::nvrtc::Ptx::from_src(compiled.ptx),
    };
    let loaded = driver(cuda.label(), || cuda.context().load_module(image))?;
    modules.push(Loaded {
        name: module.name,
        source: module.source,
        module: Arc::clone(&loaded),
    });
    Ok(loaded)
}

/// Launches `entry` of `module` on `cuda`'s stream; the arguments were checked against the
/// entry's parameters and devices by the caller.
pub(crate) fn launch(
    cuda: &CudaDevice,
    module: &'static KernelModule,
    entry: &'static KernelEntry,
    dims: LaunchDims,
    args: &mut [Arg<'_>],
) -> Result<(), BackendError> {
    let loaded = loaded(cuda, module)?;
    let function: CudaFunction = driver(cuda.label(), || loaded.load_function(entry.name))?;
    let config = LaunchConfig {
        grid_dim: dims.grid.into(),
        block_dim: dims.block.into(),
        shared_mem_bytes: dims.shared_bytes,
    };
    let not_on_device = |index: usize| BackendError::Kernel {
        module: module.name.to_string(),
        entry: entry.name.to_string(),
        message: format!("parameter {index} is not in this GPU's memory"),
    };
    // Empty buffers have no allocation: the kernel gets a null pointer (and a length of 0).
    let null: u64 = 0;
    let stream = cuda.cuda_stream();
    let mut builder = stream.launch_builder(&function);
    for (index, arg) in args.iter_mut().enumerate() {
        match &mut arg.0 {
            ArgValue::In(buffer) => {
                let bytes = buffer.cuda_bytes().ok_or_else(|| not_on_device(index))?;
                match &bytes.slice {
                    Some(slice) => builder.arg(slice),
                    None => builder.arg(&null),
                };
            }
            ArgValue::Out(buffer) => {
                let bytes = buffer
                    .cuda_bytes_mut()
                    .ok_or_else(|| not_on_device(index))?;
                match &mut bytes.slice {
                    Some(slice) => builder.arg(slice),
                    None => builder.arg(&null),
                };
            }
            ArgValue::U32(value) => {
                builder.arg(&*value);
            }
            ArgValue::I32(value) => {
                builder.arg(&*value);
            }
            ArgValue::U64(value) => {
                builder.arg(&*value);
            }
            ArgValue::F64(value) => {
                builder.arg(&*value);
            }
            ArgValue::F32(value) => {
                builder.arg(&*value);
            }
        }
    }
    driver(cuda.label(), || {
        // SAFETY: the arguments match the entry's `Param`s in count, order and kind (checked
        // by `check_launch`), and the compiled PTX signature matches those `Param`s (checked
        // by `compile_checked` when the module was loaded), so every parameter is passed
        // with its declared width; every buffer is memory of this device (checked), kept
        // borrowed by `args` until the launch is queued, and cudarc's slice events order the
        // launch after earlier writes and before later frees. That the kernel stays within
        // the lengths it is given is the kernel's contract (its host twin checks the same
        // bounds).
        unsafe { builder.launch(config) }?;
        cuda.context().check_err()
    })
    .map(|_| ())
}
