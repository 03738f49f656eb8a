//! NVRTC checks of the FMM's P2P and M2L kernels (cargo feature `cuda`), on machines without
//! a GPU.
//!
//! Every module (each source without and with FMA contraction) is compiled for sm_90 and
//! sm_80 with its own `fmad`; each entry's
//! `.param` list in the PTX is checked against its `Param`s, and ptxas must report no spills
//! and no stack. Without libnvrtc the tests print `skipping: ...` and pass, unless
//! `TUTTI_REQUIRE_NVRTC=1` (`cargo xtask nvrtc-check` sets it). Lines starting `nvrtc: ` are
//! what `cargo xtask nvrtc-check` reports.
#![cfg(feature = "cuda")]

use tutti_backend::kernel::ptx_entries;
use tutti_backend::nvrtc::{self, KernelResources};
use tutti_fmm::gpu::{self, M2L_MODULE, P2P_MODULE};

const ARCHS: [&str; 2] = ["sm_90", "sm_80"];

/// Whether libnvrtc loads; prints why not (or fails under `TUTTI_REQUIRE_NVRTC=1`).
fn nvrtc_available() -> bool {
    match nvrtc::library() {
        Ok(()) => true,
        Err(err) => {
            assert!(
                std::env::var_os("TUTTI_REQUIRE_NVRTC").is_none_or(|value| value != "1"),
                "TUTTI_REQUIRE_NVRTC=1 and libnvrtc cannot be loaded: {err}"
            );
            println!("skipping: {err}");
            false
        }
    }
}

#[test]
fn every_fmm_kernel_compiles_with_matching_signatures_and_no_spills() {
    if !nvrtc_available() {
        return;
    }
    let fmads: Vec<bool> = gpu::modules().iter().map(|module| module.fmad).collect();
    assert_eq!(fmads, [false, true, false, true]);
    for module in gpu::modules() {
        for arch in ARCHS {
            {
                let fmad = module.fmad;
                let compiled = nvrtc::compile_checked(module, arch, fmad)
                    .unwrap_or_else(|err| panic!("{} {arch} fmad={fmad}: {err}", module.name));
                assert!(compiled.ptx.contains(&format!(".target {arch}")), "{arch}");
                let entries = ptx_entries(&compiled.ptx);
                assert_eq!(
                    entries.len(),
                    module.entries.len(),
                    "{} {arch}",
                    module.name
                );
                for entry in &entries {
                    let declared = module.entry(&entry.name).expect("a declared entry");
                    assert_eq!(entry.params.len(), declared.params.len(), "{}", entry.name);
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
                        "nvrtc: {}::{entry} {arch} fmad={fmad}: {registers} registers, \
                         {stack_bytes} bytes stack, {spill_store_bytes} bytes spill stores, \
                         {spill_load_bytes} bytes spill loads",
                        module.name
                    );
                    assert!(module.entry(entry).is_ok(), "{entry}");
                    assert!((1..=255).contains(registers), "{registers} registers");
                    assert_eq!(
                        (*stack_bytes, *spill_store_bytes, *spill_load_bytes),
                        (0, 0, 0),
                        "{entry} {arch} fmad={fmad}: stack or spills"
                    );
                }
            }
        }
    }
}

#[test]
fn without_fmad_the_kernels_have_no_fma_and_no_rsqrt() {
    if !nvrtc_available() {
        return;
    }
    for module in [&P2P_MODULE, &M2L_MODULE] {
        check_exact(module);
    }
}

/// `module` compiled without contraction has IEEE operations only; with it, FMAs.
fn check_exact(module: &'static tutti_backend::KernelModule) {
    let exact = nvrtc::compile(module, "sm_90", false).expect("fmad=false");
    assert!(
        !exact.ptx.contains("fma.rn.f64") && !exact.ptx.contains("fma.rn.f32"),
        "{}: fmad=false must not fuse",
        module.name
    );
    assert!(!exact.ptx.contains("rsqrt"), "1.0 / sqrt, not rsqrt");
    assert!(exact.ptx.contains("sqrt.rn.f64"), "IEEE sqrt");
    // 1.0 / x compiles to an IEEE reciprocal (rcp.rn) or division (div.rn), both correctly
    // rounded; never an approximation (rcp.approx, div.approx, div.full).
    assert!(
        exact.ptx.contains("rcp.rn.f64") || exact.ptx.contains("div.rn.f64"),
        "IEEE reciprocal"
    );
    assert!(!exact.ptx.contains(".approx."), "no approximations");
    assert!(!exact.ptx.contains("div.full"), "no approximate division");
    let fused = nvrtc::compile(module, "sm_90", true).expect("fmad=true");
    assert!(fused.ptx.contains("fma.rn.f64"), "fmad=true fuses");
}
