//! The sweep on a GPU (cargo feature `cuda`): the device executor's contractions, and whole
//! sweeps on one GPU and on two ranks of one GPU, against the host path.
//!
//! Without a loadable driver or without a device the test prints `skipping: <reason>` and
//! passes; with `TUTTI_REQUIRE_GPU=1` a skip is a failure instead.
#![cfg(feature = "cuda")]
#![allow(clippy::unwrap_used)]

mod common;

use common::random_train;
use tutti_backend::{gpu_count, Device, DeviceRequest, Kernels, Resources};
use tutti_sweep::device_check::sweep_contractions;
use tutti_sweep::{
    distance, heisenberg_xxz, norm, src, Complex64, Layer, Scalar, SrcOptions, TrainKind,
};

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

/// A whole sweep of a depth-3 stack on the GPU ranks `ordinals` against the host path on as
/// many simulated devices: the trains' distance (gauge-invariant) relative to the norm.
fn sweep_on_gpu<T: Scalar>(ordinals: Vec<usize>) {
    if gpu().is_none() {
        return;
    }
    let n = 16;
    let a = random_train::<T>(TrainKind::Mpo, &vec![(2, 2); n], 4, 0.9, 31);
    let b = random_train::<T>(TrainKind::Mpo, &vec![(2, 2); n], 3, 0.9, 32);
    let psi = random_train::<T>(TrainKind::Mps, &vec![(2, 1); n], 32, 0.9, 33);
    let layers: [&dyn Layer<T>; 3] = [&a, &b, &psi];
    let options = SrcOptions::new(24).with_seed(7).with_oversample(8);
    let count = ordinals.len();
    let on_gpu = Resources::gpu(1).with_devices(DeviceRequest::Ordinals(ordinals));
    let (gpu, _) = src(&layers, &options.clone().with_resources(on_gpu)).unwrap();
    let (host, _) = src(
        &layers,
        &options
            .with_resources(Resources::cpu(count))
            .with_kernels(Kernels::Never),
    )
    .unwrap();
    let relative = distance(&gpu, &host).unwrap() / norm(&host);
    println!(
        "sweep of A B psi ({}, n {n}) on {count} GPU rank(s): relative distance to the host {relative:.2e}",
        T::NAME
    );
    assert!(relative < 1e-11, "{relative:e}");
}

#[test]
fn a_sweep_on_a_gpu_matches_the_host() {
    sweep_on_gpu::<f64>(vec![0]);
    sweep_on_gpu::<Complex64>(vec![0]);
}

#[test]
fn a_sweep_on_two_ranks_of_one_gpu_matches_the_host() {
    sweep_on_gpu::<f64>(vec![0, 0]);
}

#[test]
fn an_xxz_sweep_on_a_gpu_matches_the_host() {
    if gpu().is_none() {
        return;
    }
    let n = 24;
    let h = heisenberg_xxz(n, 1.0, 0.5, 0.1).unwrap();
    let psi = random_train::<f64>(TrainKind::Mps, &vec![(2, 1); n], 64, 0.95, 41);
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(64).with_seed(3).with_oversample(16);
    let (gpu, _) = src(&layers, &options.clone().with_resources(Resources::gpu(1))).unwrap();
    let (host, _) = src(
        &layers,
        &options
            .with_resources(Resources::cpu(1))
            .with_kernels(Kernels::Never),
    )
    .unwrap();
    let relative = distance(&gpu, &host).unwrap() / norm(&host);
    println!("XXZ(24) psi(64) on a GPU: relative distance to the host {relative:.2e}");
    assert!(relative < 1e-11, "{relative:e}");
}
