//! The P2P kernel on a GPU against its host twin, and whole evaluations with M2L and P2P on
//! the GPU against the host code (cargo feature `cuda`).
//!
//! Without a GPU the tests print `skipping: ...` and pass, unless `TUTTI_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_backend::{gpu_count, Device, DeviceRequest, KernelModule, Resources};
use tutti_fmm::gpu::{p2p_near_field, P2P_MODULE, P2P_MODULE_FMAD};
use tutti_fmm::{fmm, FmmOptions, Kernels, Precision};

/// The GPUs of `ordinals`, or `None` after printing why (failing under
/// `TUTTI_REQUIRE_GPU=1`).
fn gpus(ordinals: Vec<usize>) -> Option<Vec<Device>> {
    let skip = |reason: String| {
        assert!(
            std::env::var_os("TUTTI_REQUIRE_GPU").is_none_or(|value| value != "1"),
            "TUTTI_REQUIRE_GPU=1 and no GPU to test on: {reason}"
        );
        println!("skipping: {reason}");
        None
    };
    match gpu_count() {
        Ok(0) => skip("the CUDA driver reports no device".into()),
        Err(err) => skip(err.to_string()),
        Ok(_) => Some(
            Resources::gpu(1)
                .with_devices(DeviceRequest::Ordinals(ordinals))
                .select()
                .expect("selecting GPUs although the driver reports some"),
        ),
    }
}

/// 2^14 bodies: a clustered half and a uniform half, strengths over 8 orders of magnitude,
/// a fifth of them negative when `signed`.
fn bodies(signed: bool) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let n = 1 << 14;
    let positions = (0..n)
        .map(|i| {
            let p: [f64; 3] = rng.random();
            if i % 2 == 0 {
                p.map(|c| 0.25 + 0.01 * c)
            } else {
                p
            }
        })
        .collect();
    let masses = (0..n)
        .map(|i| {
            let sign = if signed && i % 5 == 0 { -1.0 } else { 1.0 };
            sign * 10f64.powf(rng.random_range(-4.0..4.0))
        })
        .collect();
    (positions, masses)
}

fn run(
    devices: &[Device],
    module: &'static KernelModule,
    signed: bool,
) -> (Vec<f64>, Vec<[f64; 3]>) {
    let (positions, masses) = bodies(signed);
    let options = FmmOptions::default().with_softening(1e-4);
    p2p_near_field(&positions, &masses, &options, devices, module).expect("p2p near field")
}

fn bits(potential: &[f64], accel: &[[f64; 3]]) -> Vec<u64> {
    potential
        .iter()
        .chain(accel.iter().flatten())
        .map(|x| x.to_bits())
        .collect()
}

fn check(ordinals: Vec<usize>) {
    let Some(gpus) = gpus(ordinals) else { return };
    let host = Resources::cpu(gpus.len())
        .select()
        .expect("simulated devices");
    let (phi_host, acc_host) = run(&host, &P2P_MODULE, true);
    let (phi_gpu, acc_gpu) = run(&gpus, &P2P_MODULE, true);
    assert!(phi_host.iter().all(|p| p.is_finite() && *p != 0.0));
    let (expected, got) = (bits(&phi_host, &acc_host), bits(&phi_gpu, &acc_gpu));
    let differing = expected.iter().zip(&got).filter(|(a, b)| a != b).count();
    assert_eq!(differing, 0, "fmad=false: {differing} values differ");

    // Contraction changes roundings: compared where the sums do not cancel (positive
    // strengths), relative to each body's potential and acceleration norm.
    let (phi_host, acc_host) = run(&host, &P2P_MODULE, false);
    let (phi_fma, acc_fma) = run(&gpus, &P2P_MODULE_FMAD, false);
    let relative = |a: f64, b: f64, scale: f64| (a - b).abs() / scale;
    let mut worst: f64 = 0.0;
    for i in 0..phi_host.len() {
        worst = worst.max(relative(phi_fma[i], phi_host[i], phi_host[i].abs()));
        let norm = acc_host[i].iter().map(|a| a * a).sum::<f64>().sqrt();
        for d in 0..3 {
            worst = worst.max(relative(acc_fma[i][d], acc_host[i][d], norm));
        }
    }
    println!(
        "p2p on {} GPU rank(s): bitwise with fmad=false; fmad=true within {worst:e}",
        gpus.len()
    );
    assert!(
        worst < 1e-12,
        "fmad=true: worst relative difference {worst:e}"
    );
}

#[test]
fn the_p2p_kernel_equals_its_host_twin_on_a_gpu() {
    check(vec![0]);
}

#[test]
fn the_p2p_kernel_equals_its_host_twin_on_two_ranks_of_one_gpu() {
    check(vec![0, 0]);
}

/// A whole evaluation on the GPU ranks of `ordinals` (M2L and P2P as kernels) against the
/// host code on as many simulated devices: the same bits without FMA contraction, in both
/// far-field precisions; within 1e-12 relative with it (positive strengths, so no sum
/// cancels).
fn check_evaluation(ordinals: Vec<usize>) {
    let Some(gpus) = gpus(ordinals.clone()) else {
        return;
    };
    let on_gpus = Resources::gpu(1).with_devices(DeviceRequest::Ordinals(ordinals));
    let on_host = Resources::cpu(gpus.len());
    for precision in [Precision::F64, Precision::F32] {
        let (positions, masses) = bodies(true);
        let options = FmmOptions::default()
            .with_far_field(precision)
            .with_fused_multiply_add(false);
        let host = fmm(
            &positions,
            &masses,
            &options
                .clone()
                .with_resources(on_host.clone())
                .with_kernels(Kernels::Never),
        )
        .expect("host evaluation");
        let gpu = fmm(
            &positions,
            &masses,
            &options.with_resources(on_gpus.clone()),
        )
        .expect("GPU evaluation");
        assert_eq!(
            gpu.info.kernel_ranks,
            gpus.len(),
            "every GPU rank ran the kernels"
        );
        let (expected, got) = (
            bits(&host.potential, &host.accel),
            bits(&gpu.potential, &gpu.accel),
        );
        let differing = expected.iter().zip(&got).filter(|(a, b)| a != b).count();
        assert_eq!(
            differing, 0,
            "{precision:?}, fmad=false: {differing} values differ"
        );
    }
    let (positions, masses) = bodies(false);
    let options = FmmOptions::default();
    let host = fmm(
        &positions,
        &masses,
        &options
            .clone()
            .with_resources(on_host)
            .with_kernels(Kernels::Never),
    )
    .expect("host evaluation");
    let gpu = fmm(&positions, &masses, &options.with_resources(on_gpus)).expect("GPU evaluation");
    assert_eq!(
        gpu.info.kernel_ranks,
        gpus.len(),
        "every GPU rank ran the kernels"
    );
    let mut worst: f64 = 0.0;
    for i in 0..host.potential.len() {
        worst = worst.max((gpu.potential[i] - host.potential[i]).abs() / host.potential[i].abs());
        let norm = host.accel[i].iter().map(|a| a * a).sum::<f64>().sqrt();
        for d in 0..3 {
            worst = worst.max((gpu.accel[i][d] - host.accel[i][d]).abs() / norm);
        }
    }
    println!(
        "fmm on {} GPU rank(s): bitwise with fmad=false (f64 and f32 far field); \
         fmad=true within {worst:e}; evaluation {:.3} s on the GPU, {:.3} s on the host",
        gpus.len(),
        gpu.info.evaluate_seconds,
        host.info.evaluate_seconds
    );
    assert!(
        worst < 1e-12,
        "fmad=true: worst relative difference {worst:e}"
    );
}

#[test]
fn the_fmm_on_a_gpu_equals_the_host_evaluation() {
    check_evaluation(vec![0]);
}

#[test]
fn the_fmm_on_two_ranks_of_one_gpu_equals_the_host_evaluation() {
    check_evaluation(vec![0, 0]);
}
