//! NVRTC checks of the sweep's kernel module (cargo feature `cuda`), on machines without a
//! GPU: compiled for sm_90 and sm_80, each entry's PTX `.param` list against its `Param`s,
//! no spills and no stack. Without libnvrtc the test prints `skipping: ...` and passes,
//! unless `TUTTI_REQUIRE_NVRTC=1` (`cargo xtask nvrtc-check` sets it). Lines starting
//! `nvrtc: ` are what `cargo xtask nvrtc-check` reports.
#![cfg(feature = "cuda")]

use tutti_backend::kernel::ptx_entries;
use tutti_backend::nvrtc;

#[test]
fn the_sketch_kernel_compiles_with_matching_signatures_and_no_spills() {
    if let Err(err) = nvrtc::library() {
        assert!(
            std::env::var_os("TUTTI_REQUIRE_NVRTC").is_none_or(|value| value != "1"),
            "TUTTI_REQUIRE_NVRTC=1 and libnvrtc cannot be loaded: {err}"
        );
        println!("skipping: {err}");
        return;
    }
    for module in tutti_sweep::gpu::modules() {
        for arch in ["sm_90", "sm_80"] {
            let compiled = nvrtc::compile_checked(module, arch, module.fmad)
                .unwrap_or_else(|err| panic!("{} {arch}: {err}", module.name));
            let entries = ptx_entries(&compiled.ptx);
            assert_eq!(entries.len(), module.entries.len(), "{}", module.name);
            for entry in &entries {
                let declared = module.entry(&entry.name).expect("a declared entry");
                assert_eq!(entry.params.len(), declared.params.len(), "{}", entry.name);
            }
            let resources = compiled.resources();
            assert_eq!(resources.len(), module.entries.len(), "{}", compiled.log);
            for r in &resources {
                println!(
                    "nvrtc: {}::{} {arch} fmad={}: {} registers, {} bytes stack, {} bytes spill \
                     stores, {} bytes spill loads",
                    module.name,
                    r.entry,
                    module.fmad,
                    r.registers,
                    r.stack_bytes,
                    r.spill_store_bytes,
                    r.spill_load_bytes
                );
                assert_eq!(
                    (r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes),
                    (0, 0, 0),
                    "{} {arch}: stack or spills",
                    r.entry
                );
            }
        }
    }
}
