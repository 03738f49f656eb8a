//! The out-of-core sweep: caps that force the sketched environments onto each tier in turn
//! give the bits of the uncapped run, the spill directory is gone afterwards (also after an
//! error and a panic on one rank), and a scratch limit too small is refused before any work.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use tutti_backend::{Kernels, Resources};
use tutti_plan::{Plan, PlanError, Tier};
use tutti_sweep::{
    plan, src, Complex64, CoreShape, CoreStream, Layer, Scalar, SrcOptions, SweepError,
    TensorTrain, TrainKind,
};

use crate::common::{random_train, same_bits};

/// An MPO (bond 3) times an MPS (bond 24) on 12 sites.
fn stack<T: Scalar>() -> (TensorTrain<T>, TensorTrain<T>) {
    let n = 12;
    let h = random_train(TrainKind::Mpo, &vec![(2, 2); n], 3, 1.0, 11);
    let psi = random_train(TrainKind::Mps, &vec![(2, 1); n], 24, 0.9, 12);
    (h, psi)
}

fn environments(plan: &Plan) -> Vec<(u64, Tier)> {
    plan.placements()
        .iter()
        .filter(|p| p.object.name().starts_with("environment "))
        .map(|p| (p.bytes, p.tier))
        .collect()
}

/// Caps on `devices` simulated devices that put the environments on the device tier (`None`),
/// on the host, on the disk, or half on the host and half on the disk, found from the
/// uncapped plan's numbers; the scratch directory is `scratch`.
fn capped(
    devices: usize,
    scratch: &Path,
    wanted: &str,
    layers: &[&dyn Layer<impl Scalar>],
    options: &SrcOptions,
) -> Resources {
    let base = Resources::cpu(devices).with_scratch_dir(scratch);
    if wanted == "device" {
        return base;
    }
    let free = plan(layers, &options.clone().with_resources(base.clone())).unwrap();
    let envs = environments(&free);
    let largest = envs.iter().map(|e| e.0).max().unwrap();
    let on_device: u64 = free.used(Tier::Device) - envs.iter().map(|e| e.0).sum::<u64>();
    // The working set and the two staged environments, nothing more.
    let device_cap = on_device + 2 * largest;
    let on_host = base.clone().with_device_memory_cap(device_cap);
    if wanted == "host" {
        return on_host;
    }
    let host_plan = plan(layers, &options.clone().with_resources(on_host.clone())).unwrap();
    // Host figures are for the node: every device's columns.
    let env_host: u64 = environments(&host_plan).iter().map(|e| e.0).sum();
    let keep = if wanted == "disk" { 0 } else { env_host / 2 };
    on_host.with_host_memory_cap(host_plan.used(Tier::Host) - env_host + keep)
}

fn tiers_of(plan: &Plan) -> [usize; 3] {
    let mut count = [0; 3];
    for (_, tier) in environments(plan) {
        count[Tier::ALL.iter().position(|&t| t == tier).unwrap()] += 1;
    }
    count
}

fn check_every_tier<T: Scalar>(devices: usize, kernels: Kernels) {
    let (h, psi) = stack::<T>();
    let layers: [&dyn Layer<T>; 2] = [&h, &psi];
    let options = SrcOptions::new(16).with_seed(3).with_kernels(kernels);
    let scratch = tempfile::tempdir().unwrap();
    let run = |resources: Resources| src(&layers, &options.clone().with_resources(resources));
    let (free, free_info) = run(Resources::cpu(devices)).unwrap();
    assert_eq!(free_info.environments.on_device, 11);
    for (wanted, expected) in [
        ("device", [11, 0, 0]),
        ("host", [0, 11, 0]),
        ("disk", [0, 0, 11]),
        ("half", [0, 5, 6]),
    ] {
        let resources = capped(devices, scratch.path(), wanted, &layers, &options);
        let planned = plan(&layers, &options.clone().with_resources(resources.clone())).unwrap();
        let what = format!("{} G {devices} {kernels:?} {wanted}", T::NAME);
        let got = tiers_of(&planned);
        if wanted == "half" {
            assert!(
                got[0] == 0 && got[1] > 0 && got[2] > 0,
                "{what}: {got:?}\n{planned}"
            );
        } else {
            assert_eq!(got, expected, "{what}\n{planned}");
        }
        let (train, info) = run(resources).unwrap();
        assert!(same_bits(&train, &free), "{what}: not the uncapped bits");
        // The plan's disk budget is the free space, which moves as files come and go.
        assert_eq!(info.plan.placements(), planned.placements(), "{what}");
        let env = &info.environments;
        assert_eq!([env.on_device, env.on_host, env.on_disk], got, "{what}");
        let spilled: u64 = environments(&planned)
            .iter()
            .filter(|e| e.1 == Tier::Disk)
            .map(|e| e.0)
            .sum();
        // Every rank spills its own columns; the plan counts G blocks of the largest, ceil(s/G)
        // columns, where the ranks hold s = 16 in all.
        let c = 16u64.div_ceil(devices as u64);
        assert_eq!(
            env.spilled_bytes * c * devices as u64,
            spilled * 16,
            "{what}"
        );
        assert_eq!(
            std::fs::read_dir(scratch.path()).unwrap().count(),
            0,
            "{what}: the spill directory is left behind"
        );
    }
}

#[test]
fn environments_on_every_tier_give_the_uncapped_bits() {
    for devices in 1..=4 {
        check_every_tier::<f64>(devices, Kernels::Auto);
    }
    check_every_tier::<Complex64>(2, Kernels::Auto);
    // The device executor (the host twins on simulated devices): held environments are
    // device buffers, released to the host and spilled from there.
    check_every_tier::<f64>(2, Kernels::Always);
}

#[test]
fn a_scratch_limit_too_small_is_refused_before_any_work() {
    let (h, psi) = stack::<f64>();
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(16).with_seed(3);
    let scratch = tempfile::tempdir().unwrap();
    let disk = capped(2, scratch.path(), "disk", &layers, &options);
    let planned = plan(&layers, &options.clone().with_resources(disk.clone())).unwrap();
    let needed = planned.used(Tier::Disk);
    // Exactly enough runs; one byte less is refused with the numbers, before a file exists.
    let exact = disk.clone().with_scratch_limit(needed);
    assert!(src(&layers, &options.clone().with_resources(exact)).is_ok());
    let short = disk.with_scratch_limit(needed - 1);
    let err = src(&layers, &options.clone().with_resources(short)).unwrap_err();
    assert!(
        matches!(err, SweepError::Plan(PlanError::DoesNotFit { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("scratch disk"), "{err}");
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

/// A layer whose `nth` right-to-left stream fails or panics: on the rank that opens it for
/// the others, after every rank's left-to-right pass spilled its environments.
struct Sabotaged {
    inner: TensorTrain<f64>,
    calls: AtomicUsize,
    nth: usize,
    panics: bool,
}

impl Layer<f64> for Sabotaged {
    fn name(&self) -> String {
        "sabotaged".into()
    }
    fn kind(&self) -> TrainKind {
        self.inner.kind()
    }
    fn shapes(&self) -> Vec<CoreShape> {
        self.inner.shapes()
    }
    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, f64>, SweepError> {
        if reverse && self.calls.fetch_add(1, Ordering::SeqCst) == self.nth {
            assert!(!self.panics, "injected panic");
            return Err(SweepError::InvalidStack {
                detail: "injected failure".into(),
            });
        }
        Layer::<f64>::stream(&self.inner, reverse)
    }
    fn cores_in_memory(&self) -> Option<usize> {
        Some(1)
    }
}

#[test]
fn spill_files_go_after_an_error_or_a_panic_on_one_rank() {
    let (h, psi) = stack::<f64>();
    let options = SrcOptions::new(16).with_seed(3);
    for panics in [false, true] {
        // The right-to-left pass's streams, opened once for both ranks by the first to get
        // there, fail on that rank; the other one waits for the read and leaves on the abort.
        // Both have spilled their environments by then.
        let sabotaged = Sabotaged {
            inner: psi.clone(),
            calls: AtomicUsize::new(0),
            nth: 0,
            panics,
        };
        let scratch = tempfile::tempdir().unwrap();
        let layers: [&dyn Layer<f64>; 2] = [&h, &sabotaged];
        let resources = capped(2, scratch.path(), "disk", &layers, &options);
        let err = src(&layers, &options.clone().with_resources(resources)).unwrap_err();
        let text = err.to_string();
        if panics {
            assert!(matches!(err, SweepError::RankPanicked { .. }), "{err}");
            assert!(text.contains("injected panic"), "{err}");
        } else {
            assert!(text.contains("injected failure"), "{err}");
        }
        assert_eq!(
            sabotaged.calls.load(Ordering::SeqCst),
            1,
            "the ranks share one reverse stream"
        );
        assert_eq!(
            std::fs::read_dir(scratch.path()).unwrap().count(),
            0,
            "panics {panics}: the spill directory is left behind"
        );
    }
}

/// Processes (threads over the loopback wire, each with its own spanning group, as MPI
/// ranks would be) spill their own environments, each to its own directory, and give the
/// bits of their uncapped run.
#[test]
fn processes_spill_their_own_environments() {
    let (h, psi) = stack::<f64>();
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(16).with_seed(3);
    let scratch = tempfile::tempdir().unwrap();
    // A process plans for its own device (the columns of one rank of two, as a device of
    // two threads would): a host cap equal to the device cap leaves its environments no room
    // beside what its device tier takes of the host.
    let resources = capped(2, scratch.path(), "host", &layers, &options);
    let device_cap = resources.device_memory_cap.unwrap();
    let resources = resources.with_host_memory_cap(device_cap);
    let sweep = |options: &SrcOptions| {
        tutti_mpi::on_loopback_processes(2, |group| {
            tutti_sweep::src_on(group, &layers, options).expect("the sweep over processes")
        })
        .expect("simulated devices")
    };
    let free = sweep(&options.clone().with_resources(Resources::cpu(2)));
    let spilled = sweep(&options.clone().with_resources(resources));
    for (rank, ((train, info), (free_train, _))) in spilled.iter().zip(&free).enumerate() {
        assert!(same_bits(train, free_train), "rank {rank}");
        assert!(info.environments.on_disk > 5, "rank {rank}\n{}", info.plan);
        // Each process plans and counts its own rank's columns, 8 of the 16.
        let planned: u64 = environments(&info.plan)
            .iter()
            .filter(|e| e.1 == Tier::Disk)
            .map(|e| e.0)
            .sum();
        assert_eq!(info.environments.spilled_bytes, planned, "rank {rank}");
    }
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}
