//! The sweep's contractions on a GPU (cargo feature `cuda`): the device executor against the
//! host path.
//!
//! Without a loadable driver or without a device the test prints `skipping: <reason>` and
//! passes; with `TUTTI_REQUIRE_GPU=1` a skip is a failure instead.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

use tutti_backend::{gpu_count, Device, Resources};
use tutti_sweep::device_check::sweep_contractions;

/// Prints why the test skips, or fails it under `TUTTI_REQUIRE_GPU=1`.
fn skip(reason: &str) {
    assert!(
        std::env::var_os("TUTTI_REQUIRE_GPU").is_none_or(|value| value != "1"),
        "TUTTI_REQUIRE_GPU=1 and this test cannot run: {reason}"
    );
    println!("skipping: {reason}");
}

/// The first GPU, or `None` after printing why.
fn gpu() -> Option<Device> {
    match gpu_count() {
        Ok(0) => {
            skip("the CUDA driver reports no device");
            None
        }
        Ok(count) => match Resources::gpu(1).select() {
            Ok(mut devices) => Some(devices.remove(0)),
            Err(err) => panic!("selecting a GPU failed although {count} exist: {err}"),
        },
        Err(err) => {
            skip(&err.to_string());
            None
        }
    }
}

#[test]
fn sweep_contractions_on_a_gpu_match_the_host() {
    let Some(device) = gpu() else {
        return;
    };
    for complex in [false, true] {
        let checks = sweep_contractions(&device, complex, 7).unwrap();
        assert!(checks.len() > 40, "{} checks", checks.len());
        for check in &checks {
            assert!(
                check.relative_error <= 1e-12,
                "complex {complex}: {check:?}"
            );
        }
        let worst = checks
            .iter()
            .map(|c| c.relative_error)
            .fold(0.0f64, f64::max);
        println!(
            "complex {complex}: {} contractions on {device}, worst relative error {worst:.2e}",
            checks.len()
        );
    }
}
