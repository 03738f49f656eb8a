//! RHF and its basis-parameter gradient on 1 to 4 simulated devices: agreement with one
//! device, bitwise repeatability at each count, the plan, and clear typed errors for bad
//! device requests, caps that cannot hold the run, and a failure on one rank (no hang).
// Test helpers outside #[test] functions: a malformed reference should fail loudly.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::mpsc;
use std::time::Duration;

use tutti_adjoint::{
    plan, plan_gradient, rhf, rhf_gradient, rhf_gradient_on, rhf_on, AdjointError, AngularKind,
    Basis, Fault, FaultPoint, GradientOptions, Molecule, RhfGradient, ScfOptions,
};
use tutti_backend::{BackendError, DeviceRequest, Resources};
use tutti_group::GroupError;
use tutti_plan::{PlanError, Tier};

/// Water in 6-31g (13 AOs) from the PySCF reference: small enough for CI on two cores.
fn water() -> (Molecule, Basis, f64) {
    let case = common::load("h2o_631g");
    (
        case.molecule(),
        case.basis(AngularKind::Spherical),
        case.f64("e_rhf"),
    )
}

fn scf(devices: usize) -> ScfOptions {
    ScfOptions::default().with_resources(Resources::cpu(devices))
}

fn gradient_options(devices: usize) -> GradientOptions {
    GradientOptions::default().with_resources(Resources::cpu(devices))
}

/// Every dE/d alpha and dE/d c in basis order.
fn values(gradient: &RhfGradient) -> Vec<f64> {
    gradient
        .shells
        .iter()
        .flat_map(|s| s.grad_exponents.iter().chain(&s.grad_coefficients).copied())
        .collect()
}

/// Runs `work` on its own thread and fails the test if it has not returned within
/// `seconds`: a hang fails instead of hanging CI.
fn within<T: Send + 'static>(seconds: u64, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(work());
    });
    receiver
        .recv_timeout(Duration::from_secs(seconds))
        .expect("no result within the time limit: a rank hangs")
}

#[test]
fn energies_on_1_to_4_devices_equal_one_device() {
    let (molecule, basis, reference) = water();
    let one = rhf(&molecule, &basis, &scf(1)).unwrap();
    assert_eq!(one.devices, 1);
    assert!((one.energy - reference).abs() < 1e-8, "{}", one.energy);
    let mut line = String::new();
    for devices in 1..=4 {
        let result = rhf(&molecule, &basis, &scf(devices)).unwrap();
        assert_eq!(result.devices, devices);
        // Only the order of the J/K sums differs: rounding, far below 1e-12.
        let relative = ((result.energy - one.energy) / one.energy).abs();
        line += &format!(" {devices}: {relative:.1e}");
        assert!(relative <= 1e-12, "{devices} devices: {relative:e}");
        // Bitwise repeatable at a fixed count: energy, orbitals, density.
        let again = rhf(&molecule, &basis, &scf(devices)).unwrap();
        assert_eq!(again.energy.to_bits(), result.energy.to_bits());
        assert_eq!(again.iterations, result.iterations);
        assert_eq!(again.orbital_energies, result.orbital_energies);
        assert_eq!(again.density, result.density);
    }
    println!("RHF energy, relative difference to one device by device count:{line}");
}

/// Processes (threads over the loopback wire, each with its own spanning group, as MPI
/// processes would be) against as many threads: the same energy, density and gradient on
/// every process, within the tolerances of the device-count tests (and bitwise where the
/// arithmetic is the same, which this prints).
#[test]
fn processes_agree_with_threads() {
    let (molecule, basis, _) = water();
    for size in [2, 3] {
        let threads = rhf(&molecule, &basis, &scf(size)).unwrap();
        let gradient = rhf_gradient(&molecule, &basis, &gradient_options(size)).unwrap();
        let over = tutti_mpi::on_loopback_processes(size, |group| {
            let energy = rhf_on(group, &molecule, &basis, &scf(1)).unwrap();
            let gradient = rhf_gradient_on(group, &molecule, &basis, &gradient_options(1)).unwrap();
            (energy, gradient)
        })
        .unwrap();
        for (rank, (energy, process_gradient)) in over.iter().enumerate() {
            assert_eq!(energy.devices, size);
            let relative = ((energy.energy - threads.energy) / threads.energy).abs();
            assert!(relative <= 1e-12, "rank {rank} of {size}: {relative:e}");
            let worst = values(process_gradient)
                .iter()
                .zip(values(&gradient))
                .map(|(g, r)| (g - r).abs() / r.abs().max(1e-2))
                .fold(0.0f64, f64::max);
            assert!(worst <= 1e-10, "rank {rank} of {size}: gradient {worst:e}");
            assert_eq!(
                process_gradient.shells, over[0].1.shells,
                "every process holds the same gradient"
            );
            println!(
                "{size} processes, rank {rank}: energy bitwise {}, gradient bitwise {}",
                energy.energy.to_bits() == threads.energy.to_bits(),
                process_gradient.shells == gradient.shells
            );
        }
    }
}

#[test]
fn serial_fock_on_ranks_matches_the_split_build() {
    let (molecule, basis, _) = water();
    let split = rhf(&molecule, &basis, &scf(3)).unwrap();
    let serial = rhf(&molecule, &basis, &scf(3).with_serial_fock(true)).unwrap();
    assert!(((split.energy - serial.energy) / serial.energy).abs() <= 1e-12);
}

#[test]
fn gradients_on_1_to_4_devices_equal_one_device() {
    let (molecule, basis, _) = water();
    let one = rhf_gradient(&molecule, &basis, &gradient_options(1)).unwrap();
    assert_eq!(one.devices, 1);
    let reference = values(&one);
    let mut line = String::new();
    for devices in 2..=4 {
        let gradient = rhf_gradient(&molecule, &basis, &gradient_options(devices)).unwrap();
        assert_eq!(gradient.devices, devices);
        // Relative to max(|g|, 1e-2), as the reference checks of tests/gradient.rs: tiny
        // components are compared absolutely.
        let worst = values(&gradient)
            .iter()
            .zip(&reference)
            .map(|(g, r)| (g - r).abs() / r.abs().max(1e-2))
            .fold(0.0f64, f64::max);
        line += &format!(" {devices}: {worst:.1e}");
        assert!(worst <= 1e-10, "{devices} devices: {worst:e}");
        let energy = ((gradient.energy - one.energy) / one.energy).abs();
        assert!(energy <= 1e-12, "{devices} devices: energy {energy:e}");
        let again = rhf_gradient(&molecule, &basis, &gradient_options(devices)).unwrap();
        assert_eq!(
            again.shells, gradient.shells,
            "{devices} devices: not repeatable"
        );
        assert_eq!(again.energy.to_bits(), gradient.energy.to_bits());
    }
    println!("gradient, max relative difference to one device by device count:{line}");
}

#[test]
fn the_plan_lists_the_objects_and_a_small_cap_is_refused_with_its_numbers() {
    let (molecule, basis, _) = water();
    let placed = plan(&molecule, &basis, &scf(2)).unwrap();
    for name in [
        "ERI shell-pair data",
        "one-electron matrices (S, H, X)",
        "SCF matrices (P, next P, F, J, K)",
        "J/K task accumulators",
        "J/K rank partial and reduction blocks",
    ] {
        assert_eq!(placed.tier_of(name), Some(Tier::Device), "{name}\n{placed}");
    }
    let matrix = (basis.nao() * basis.nao() * 8) as u64;
    assert_eq!(
        placed
            .placement("SCF matrices (P, next P, F, J, K)")
            .unwrap()
            .bytes,
        5 * matrix
    );
    let table = placed.to_string();
    assert!(table.contains("J/K task accumulators"), "{table}");
    let gradient_plan = plan_gradient(&molecule, &basis, &gradient_options(2)).unwrap();
    assert!(gradient_plan
        .placement("gradient densities (P, W)")
        .is_some());

    // 1 KiB per device cannot hold three 13 x 13 matrices: refused before any work, by the
    // plan, the energy and the gradient alike.
    let capped = Resources::cpu(2).with_device_memory_cap(1024);
    let check = |error: AdjointError| {
        let message = error.to_string();
        assert!(
            matches!(error, AdjointError::Plan(PlanError::DoesNotFit { .. })),
            "{error:?}"
        );
        assert!(message.contains("one-electron matrices"), "{message}");
    };
    check(
        plan(
            &molecule,
            &basis,
            &ScfOptions::default().with_resources(capped.clone()),
        )
        .unwrap_err(),
    );
    check(
        rhf(
            &molecule,
            &basis,
            &ScfOptions::default().with_resources(capped.clone()),
        )
        .unwrap_err(),
    );
    check(
        rhf_gradient(
            &molecule,
            &basis,
            &GradientOptions::default().with_resources(capped),
        )
        .unwrap_err(),
    );
}

#[test]
fn bad_device_requests_are_typed_errors() {
    let (molecule, basis, _) = water();
    let backend = |resources: Resources| -> BackendError {
        let options = ScfOptions::default().with_resources(resources.clone());
        let energy = rhf(&molecule, &basis, &options).unwrap_err();
        let gradient = rhf_gradient(
            &molecule,
            &basis,
            &GradientOptions::default().with_resources(resources),
        )
        .unwrap_err();
        assert_eq!(energy.to_string(), gradient.to_string());
        match energy {
            AdjointError::Group(GroupError::Backend(error)) => error,
            other => panic!("expected a device error, got {other:?}"),
        }
    };
    assert!(matches!(
        backend(Resources::cpu(0)),
        BackendError::ZeroDevices
    ));
    let error = backend(Resources::cpu(1).with_devices(DeviceRequest::Ordinals(vec![0, 100_000])));
    assert!(
        matches!(
            error,
            BackendError::UnknownOrdinal {
                ordinal: 100_000,
                ..
            }
        ),
        "{error:?}"
    );
    // A cap larger than a simulated device's share of the host.
    let error = backend(Resources::cpu(2).with_device_memory_cap(u64::MAX / 2));
    assert!(
        matches!(error, BackendError::CapExceedsDevice { .. }),
        "{error:?}"
    );
    // A GPU request where no GPU can be used: a build without `cuda`, or no driver.
    if tutti_backend::gpu_count().unwrap_or(0) == 0 {
        let error = backend(Resources::gpu(1));
        assert!(
            matches!(
                error,
                BackendError::CudaNotBuilt
                    | BackendError::NoDevices { .. }
                    | BackendError::Cuda { .. }
            ),
            "{error:?}"
        );
        println!("GPU request without a usable GPU: {error}");
    } else {
        println!("skipped the no-GPU check: this machine has a GPU");
    }
}

#[test]
fn an_error_on_one_rank_surfaces_as_that_error_without_a_hang() {
    for (devices, rank, build) in [(2, 1, 1), (3, 0, 2), (4, 3, 3), (1, 0, 1)] {
        let error = within(60, move || {
            let (molecule, basis, _) = water();
            let fault = Fault {
                rank,
                at: FaultPoint::FockBuild(build),
                panic: false,
            };
            rhf(&molecule, &basis, &scf(devices).with_fault(Some(fault))).unwrap_err()
        });
        assert!(
            matches!(error, AdjointError::InjectedFault { rank: r } if r == rank),
            "{devices} devices: {error:?}"
        );
    }
    // A panicking rank, and a failure in the gradient's loops after the SCF.
    let error = within(60, || {
        let (molecule, basis, _) = water();
        let fault = Fault {
            rank: 1,
            at: FaultPoint::FockBuild(2),
            panic: true,
        };
        rhf(&molecule, &basis, &scf(3).with_fault(Some(fault))).unwrap_err()
    });
    assert!(
        matches!(&error, AdjointError::RankPanicked { rank: 1, message } if message.contains("injected")),
        "{error:?}"
    );
    let error = within(60, || {
        let (molecule, basis, _) = water();
        let mut options = gradient_options(3);
        options.scf.fault = Some(Fault {
            rank: 2,
            at: FaultPoint::Gradient,
            panic: false,
        });
        rhf_gradient(&molecule, &basis, &options).unwrap_err()
    });
    assert!(
        matches!(error, AdjointError::InjectedFault { rank: 2 }),
        "{error:?}"
    );
}

/// The SCF reports each iteration once, from rank 0 alone, in order, with the energy; the
/// last report's energy is the result's, and the callback changes nothing.
#[test]
fn scf_progress_reports_each_iteration_with_its_energy() {
    use std::sync::{Arc, Mutex};
    let (molecule, basis, _) = water();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    let progress = tutti_backend::ProgressFn::new(move |p| {
        assert_eq!((p.task, p.stage), ("scf", "iteration"));
        sink.lock().unwrap().push((p.done, p.total, p.value));
    });
    let quiet = rhf(&molecule, &basis, &scf(2)).unwrap();
    let result = rhf(&molecule, &basis, &scf(2).with_progress(progress)).unwrap();
    assert_eq!(quiet.energy, result.energy);
    let seen = seen.lock().unwrap();
    let iterations: Vec<u64> = seen.iter().map(|(done, _, _)| *done).collect();
    assert_eq!(
        iterations,
        (1..=result.iterations as u64).collect::<Vec<_>>()
    );
    assert!(seen.iter().all(|(_, total, _)| *total == 128));
    assert_eq!(seen.last().unwrap().2, Some(result.energy));
}
