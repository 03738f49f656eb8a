//! NVRTC checks of the backend's kernel modules (cargo feature `cuda`), and kernel launches on
//! a GPU when there is one.
//!
//! The compile checks need libnvrtc but no GPU: every module is compiled for sm_90 and sm_80,
//! each `.entry`'s `.param` list in the PTX is checked against its `Param`s, and ptxas must
//! report no spills and no stack. Without libnvrtc they print `skipping: ...` and pass, unless
//! `TUTTI_REQUIRE_NVRTC=1` (`cargo xtask nvrtc-check` sets it). The launch tests need a GPU
//! and skip without one, unless `TUTTI_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

use tutti_backend::kernel::{builtin, ptx_entries, Arg, LaunchDims};
use tutti_backend::nvrtc::{self, KernelResources};
use tutti_backend::{BackendError, Complex64, Device, KernelEntry, KernelModule, Param, Resources};

const ARCHS: [&str; 2] = ["sm_90", "sm_80"];

fn required(variable: &str) -> bool {
    std::env::var_os(variable).is_some_and(|value| value == "1")
}

/// Whether libnvrtc loads; prints why not (or fails under `TUTTI_REQUIRE_NVRTC=1`).
fn nvrtc_available() -> bool {
    match nvrtc::library() {
        Ok(()) => true,
        Err(err) => {
            assert!(
                !required("TUTTI_REQUIRE_NVRTC"),
                "TUTTI_REQUIRE_NVRTC=1 and libnvrtc cannot be loaded: {err}"
            );
            println!("skipping: {err}");
            false
        }
    }
}

#[test]
fn nvrtc_reports_a_cuda_13_version() {
    if !nvrtc_available() {
        return;
    }
    let (major, minor) = nvrtc::version().expect("nvrtcVersion");
    println!("nvrtc: version {major}.{minor}");
    assert!(major >= 12, "NVRTC {major}.{minor}");
    let archs = nvrtc::supported_archs().expect("supported archs");
    for arch in [80, 90] {
        assert!(archs.contains(&arch), "{arch} not in {archs:?}");
    }
}

#[test]
fn every_module_compiles_with_matching_signatures_and_no_spills() {
    if !nvrtc_available() {
        return;
    }
    for module in builtin::modules() {
        for arch in ARCHS {
            let compiled = nvrtc::compile_checked(module, arch, module.fmad)
                .unwrap_or_else(|err| panic!("{err}"));
            let cubin = compiled
                .cubin
                .as_deref()
                .expect("a CUBIN for an sm_ target");
            assert!(
                cubin.starts_with(b"\x7fELF"),
                "{} {arch}: not an ELF",
                module.name
            );
            assert!(compiled.ptx.contains(&format!(".target {arch}")), "{arch}");

            let entries = ptx_entries(&compiled.ptx);
            assert_eq!(
                entries.len(),
                module.entries.len(),
                "{} {arch}",
                module.name
            );
            for entry in module.entries {
                let found = entries
                    .iter()
                    .find(|e| e.name == entry.name)
                    .expect("entry");
                assert_eq!(found.params.len(), entry.params.len(), "{}", entry.name);
            }

            let resources = compiled.resources();
            assert_eq!(resources.len(), module.entries.len(), "{}", compiled.log);
            for KernelResources {
                entry,
                registers,
                stack_bytes,
                spill_store_bytes,
                spill_load_bytes,
            } in &resources
            {
                println!(
                    "nvrtc: {}::{entry} {arch}: {registers} registers, {stack_bytes} bytes \
                     stack, {spill_store_bytes} bytes spill stores, {spill_load_bytes} bytes \
                     spill loads",
                    module.name
                );
                assert!(module.entries.iter().any(|e| e.name == entry), "{entry}");
                assert!(
                    (1..=255).contains(registers),
                    "{entry}: {registers} registers"
                );
                assert_eq!(
                    (*stack_bytes, *spill_store_bytes, *spill_load_bytes),
                    (0, 0, 0),
                    "{entry} {arch}: stack or spills"
                );
            }
        }
    }
}

#[test]
fn the_fmad_flag_decides_whether_axpy_contracts() {
    if !nvrtc_available() {
        return;
    }
    let exact = nvrtc::compile(&builtin::MODULE, "sm_90", false).expect("fmad=false");
    let fused = nvrtc::compile(&builtin::MODULE, "sm_90", true).expect("fmad=true");
    assert!(
        !exact.ptx.contains("fma.rn.f64"),
        "fmad=false must not fuse"
    );
    assert!(exact.ptx.contains("mul.rn.f64") || exact.ptx.contains("mul.f64"));
    assert!(
        fused.ptx.contains("fma.rn.f64"),
        "fmad=true fuses a * x + y"
    );
}

#[test]
fn a_compute_target_gives_ptx_only() {
    if !nvrtc_available() {
        return;
    }
    let compiled = nvrtc::compile(&builtin::MODULE, "compute_80", false).expect("compute_80");
    assert!(compiled.cubin.is_none());
    assert!(compiled.ptx.contains(".target sm_80"));
    assert_eq!(
        ptx_entries(&compiled.ptx).len(),
        builtin::MODULE.entries.len()
    );
}

fn no_twin(
    _: &tutti_backend::kernel::HostLaunch<'_>,
    _: tutti_backend::kernel::HostArgs<'_>,
) -> Result<(), BackendError> {
    Ok(())
}

static BROKEN: KernelModule = KernelModule {
    name: "tutti_test_broken",
    source: "extern \"C\" __global__ void tt_broken(double* y) { y[0] = undefined_name; }\n",
    fmad: false,
    entries: &[KernelEntry {
        name: "tt_broken",
        params: &[Param::Out(tutti_backend::ElemKind::F64)],
        host: no_twin,
    }],
};

static MISDESCRIBED: KernelModule = KernelModule {
    name: "tutti_test_misdescribed",
    source: "extern \"C\" __global__ void tt_takes_float(float* y, float a) { y[0] = a; }\n",
    fmad: false,
    entries: &[KernelEntry {
        name: "tt_takes_float",
        params: &[Param::Out(tutti_backend::ElemKind::F32), Param::F64],
        host: no_twin,
    }],
};

#[test]
fn compile_errors_carry_the_program_log() {
    if !nvrtc_available() {
        return;
    }
    let err = nvrtc::compile(&BROKEN, "sm_90", false).expect_err("undefined identifier");
    match &err {
        BackendError::Nvrtc {
            module, arch, log, ..
        } => {
            assert_eq!(
                (module.as_str(), arch.as_str()),
                ("tutti_test_broken", "sm_90")
            );
            assert!(log.contains("undefined_name"), "{log}");
        }
        other => panic!("expected an NVRTC error, got {other:?}"),
    }
    assert!(err.to_string().contains("undefined_name"), "{err}");

    let err = nvrtc::compile_checked(&MISDESCRIBED, "sm_90", false).expect_err("f32 vs f64");
    assert!(
        err.to_string()
            .contains("parameter 1 is described as f64 but compiled as .f32"),
        "{err}"
    );
}

/// The first GPU, or `None` (after saying why) when there is none to launch on.
fn gpu() -> Option<Device> {
    let found = Resources::gpu(1).select();
    match found {
        Ok(mut devices) => Some(devices.remove(0)),
        Err(err) => {
            assert!(
                !required("TUTTI_REQUIRE_GPU"),
                "TUTTI_REQUIRE_GPU=1 and no GPU to launch on: {err}"
            );
            println!("skipping: {err}");
            None
        }
    }
}

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1_u64 << 53) as f64 * 2.0 - 0.999
        })
        .collect()
}

#[test]
fn gpu_launches_match_the_host_twins_bitwise() {
    let Some(gpu) = gpu() else { return };
    let host = Resources::cpu(1).select().expect("host device").remove(0);
    for shape in [[3, 5, 7], [64, 48, 3], [129, 257, 1], [2, 3, 4096]] {
        let n: usize = shape.iter().product();
        let data = values(n, n as u64);
        let run = |device: &Device| {
            let x = device.upload(&data).expect("upload");
            let mut y = device.alloc_zeros::<f64>(n).expect("alloc");
            builtin::permute_bac(&x, &mut y, shape).expect("permute");
            y.to_host_vec().expect("download")
        };
        assert_eq!(run(&gpu), run(&host), "f64 {shape:?}");
        let complex: Vec<Complex64> = data.iter().map(|&v| Complex64::new(v, -2.0 * v)).collect();
        let run = |device: &Device| {
            let x = device.upload(&complex).expect("upload");
            let mut y = device.alloc_zeros::<Complex64>(n).expect("alloc");
            builtin::permute_bac(&x, &mut y, shape).expect("permute");
            y.to_host_vec().expect("download")
        };
        assert_eq!(run(&gpu), run(&host), "c64 {shape:?}");
    }
    let (x, y0) = (values(100_003, 1), values(100_003, 2));
    let run = |device: &Device| {
        let xb = device.upload(&x).expect("upload");
        let mut yb = device.upload(&y0).expect("upload");
        builtin::axpy(1.0 / 3.0, &xb, &mut yb).expect("axpy");
        yb.to_host_vec().expect("download")
    };
    let (on_gpu, on_host) = (run(&gpu), run(&host));
    assert!(on_gpu
        .iter()
        .zip(&on_host)
        .all(|(g, h)| g.to_bits() == h.to_bits()));
}

#[test]
fn gpu_launch_checks_match_the_host_ones() {
    let Some(gpu) = gpu() else { return };
    let x = gpu.upload(&[1.0_f64; 4]).expect("upload");
    let mut y = gpu.alloc_zeros::<f64>(4).expect("alloc");
    let too_big = LaunchDims {
        grid: [1, 1, 1],
        block: [1025, 1, 1],
        shared_bytes: 0,
    };
    let err = gpu
        .launch(
            &builtin::MODULE,
            "tt_axpy_f64",
            too_big,
            &mut [
                Arg::u64(4),
                Arg::f64(1.0),
                Arg::input(&x),
                Arg::output(&mut y),
            ],
        )
        .expect_err("block too large");
    assert!(err.to_string().contains("1025 threads"), "{err}");
    let err = gpu
        .launch(
            &builtin::MODULE,
            "tt_axpy_f64",
            LaunchDims::linear(4, 256).expect("dims"),
            &mut [Arg::u64(4), Arg::f64(1.0)],
        )
        .expect_err("too few arguments");
    assert!(err.to_string().contains("2 arguments given"), "{err}");
}
