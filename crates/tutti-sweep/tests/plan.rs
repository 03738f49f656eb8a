//! The sweep's memory plan: its numbers against the heap the sweep actually uses (measured by
//! a counting allocator), and caps that are too small refused up front.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too; failures are test failures

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::random_train;
use tutti_backend::Resources;
use tutti_plan::{PlanError, Scope, Tier};
use tutti_sweep::{
    plan, src, Complex64, Layer, Scalar, SrcOptions, SweepError, TensorTrain, TrainKind,
};

/// The system allocator, counting the bytes live and the most live since the last reset.
///
/// Page-aligned blocks are left out: they are faer's per-thread GEMM packing space
/// (`private-gemm-x86`, twice the L3 cache per thread that runs a GEMM, reserved once per
/// thread and touched only as far as it packs), not the sweep's objects; the sweep's own
/// buffers are `Vec`s of scalars, aligned to 16 bytes at most.
struct Counting;

const PAGE_ALIGNED: usize = 4096;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static BIGGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` with its arguments unchanged; the counters
// are plain atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() && layout.align() < PAGE_ALIGNED {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
            BIGGEST.fetch_max(layout.size(), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        if layout.align() < PAGE_ALIGNED {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: the peak is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: u64 = 1 << 20;

/// An MPO (bond 4) times an MPS (bond `d_psi`) on `n` sites.
fn stack(n: usize, d_psi: usize) -> (TensorTrain<f64>, TensorTrain<f64>) {
    let h = random_train(TrainKind::Mpo, &vec![(2, 2); n], 4, 1.0, 1);
    let psi = random_train(TrainKind::Mps, &vec![(2, 1); n], d_psi, 0.9, 2);
    (h, psi)
}

/// Bytes the plan holds in memory in all (per-device objects on every device; objects on
/// the disk tier are files).
fn planned_bytes(plan: &tutti_plan::Plan) -> u64 {
    let devices = plan.budget().devices() as u64;
    plan.placements()
        .iter()
        .filter(|p| p.tier != Tier::Disk)
        .map(|p| {
            let one = p.object.instance_bytes().unwrap();
            match p.object.scope() {
                Scope::PerDevice => one * devices,
                Scope::Shared => one,
            }
        })
        .sum()
}

/// The heap peak of `src` on `layers` over what was live before, and the plan's total.
fn measured<T: Scalar>(layers: &[&dyn Layer<T>], options: &SrcOptions) -> (u64, u64) {
    let planned = planned_bytes(&plan(layers, options).unwrap());
    // A first run starts the devices' thread pools, so the measured run sees the sweep.
    let _ = src(layers, options).unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let (result, _) = src(layers, options).unwrap();
    let used = PEAK.load(Ordering::Relaxed) - before;
    drop(result);
    (planned, used as u64)
}

/// The plan is an upper bound of what the sweep holds at once, and not a loose one: within
/// a factor 3 (it counts every spare buffer and every staging copy of the collectives at its
/// largest, which the sweep seldom holds all at once).
fn check(what: &str, (planned, used): (u64, u64)) {
    let ratio = planned as f64 / used as f64;
    println!("{what}: planned {planned} B, heap peak {used} B (plan / peak {ratio:.2})");
    assert!(
        used <= planned,
        "{what}: peak {used} B above the plan's {planned} B"
    );
    assert!(
        ratio < 3.0,
        "{what}: plan {planned} B is {ratio:.2}x the peak {used} B"
    );
}

#[test]
fn the_plan_bounds_the_heap_the_sweep_uses() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (n, d_psi, chi, devices) in [(16, 64, 32, 1), (16, 64, 32, 2), (12, 96, 48, 3)] {
        let (h, psi) = stack(n, d_psi);
        let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
        let options = SrcOptions::new(chi)
            .with_seed(5)
            .with_resources(Resources::cpu(devices));
        check(
            &format!("H psi n {n} D_psi {d_psi} chi {chi} G {devices}"),
            measured(&layers, &options),
        );
    }
    // Out of core: the environments need about four times the room the host cap leaves
    // them, so most go to spill files; what the sweep holds stays within the plan's memory.
    for devices in [1, 2] {
        let (h, psi) = stack(16, 64);
        let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
        let scratch = tempfile::tempdir().unwrap();
        let options = SrcOptions::new(32).with_seed(5);
        let resources = out_of_core(&layers, &options, devices, scratch.path());
        let options = options.with_resources(resources);
        let planned = plan(&layers, &options).unwrap();
        println!("out of core, G {devices}:\n{planned}");
        assert!(planned.used(Tier::Disk) > 0);
        check(
            &format!("H psi out of core G {devices}"),
            measured(&layers, &options),
        );
    }
    // Two sites: contracted exactly, and planned as such.
    let h = random_train::<f64>(TrainKind::Mpo, &[(32, 32), (32, 32)], 16, 1.0, 6);
    let psi = random_train::<f64>(TrainKind::Mps, &[(32, 1), (32, 1)], 32, 1.0, 7);
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(16).with_resources(Resources::cpu(1));
    check("2 sites, exact", measured(&layers, &options));
    // Three layers, complex, oversampled: A B psi.
    let n = 10;
    let a = random_train::<Complex64>(TrainKind::Mpo, &vec![(2, 2); n], 3, 1.0, 3);
    let b = random_train::<Complex64>(TrainKind::Mpo, &vec![(2, 2); n], 2, 1.0, 4);
    let psi = random_train::<Complex64>(TrainKind::Mps, &vec![(2, 1); n], 24, 0.9, 5);
    let layers: [&dyn Layer<Complex64>; 3] = [&a, &b, &psi];
    for devices in [1, 2] {
        let options = SrcOptions::new(40)
            .with_oversample(8)
            .with_resources(Resources::cpu(devices));
        check(
            &format!("A B psi complex G {devices}"),
            measured(&layers, &options),
        );
    }
}

/// Caps on `devices` simulated devices that hold the per-site working set and leave the
/// environments a quarter of the host memory they would take.
fn out_of_core(
    layers: &[&dyn Layer<f64>],
    options: &SrcOptions,
    devices: usize,
    scratch: &std::path::Path,
) -> Resources {
    let base = Resources::cpu(devices).with_scratch_dir(scratch);
    let environments = |plan: &tutti_plan::Plan| -> Vec<u64> {
        plan.placements()
            .iter()
            .filter(|p| p.object.name().starts_with("environment "))
            .map(|p| p.bytes)
            .collect()
    };
    let free = plan(layers, &options.clone().with_resources(base.clone())).unwrap();
    let envs = environments(&free);
    let largest = envs.iter().copied().max().unwrap();
    let device_cap = free.used(Tier::Device) - envs.iter().sum::<u64>() + 2 * largest;
    let on_host = base.with_device_memory_cap(device_cap);
    let host_plan = plan(layers, &options.clone().with_resources(on_host.clone())).unwrap();
    let env_host: u64 = environments(&host_plan).iter().sum();
    on_host.with_host_memory_cap(host_plan.used(Tier::Host) - env_host + env_host / 4)
}

#[test]
fn a_cap_too_small_is_refused_up_front_and_a_sufficient_one_runs() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (h, psi) = stack(16, 128);
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(64).with_seed(1);
    let on = |resources: Resources| options.clone().with_resources(resources);

    let free = plan(&layers, &on(Resources::cpu(1))).unwrap();
    let device_only: u64 = free
        .placements()
        .iter()
        .filter(|p| p.object.slowest_tier() == Tier::Device)
        .map(|p| p.bytes)
        .sum();
    println!("uncapped plan:\n{free}");
    assert!(device_only > 4 * MIB, "the working set is {device_only} B");

    // 4 MiB per device cannot hold the per-site working set: refused with the numbers.
    let capped = on(Resources::cpu(1).with_device_memory_cap(4 * MIB));
    let err = src(&layers, &capped).unwrap_err();
    println!("4 MiB cap: {err}");
    assert!(
        matches!(err, SweepError::Plan(PlanError::DoesNotFit { .. })),
        "{err}"
    );
    // The message names what did not fit, what it needed and what was free.
    let text = err.to_string();
    assert!(
        text.contains("buffers' needs") && text.contains("free"),
        "{err}"
    );
    assert!(matches!(plan(&layers, &capped), Err(SweepError::Plan(_))));

    // A device cap that holds everything: the sweep runs within it, the same result.
    let whole = free.used(Tier::Device).div_ceil(MIB) + 1;
    let roomy = on(Resources::cpu(1).with_device_memory_cap(whole * MIB));
    let (capped_result, _) = src(&layers, &roomy).unwrap();
    let (free_result, _) = src(&layers, &on(Resources::cpu(1))).unwrap();
    assert_eq!(capped_result.cores(), free_result.cores());

    // Room for the working set only: the environments go to the host tier.
    let tight = (device_only.div_ceil(MIB) + 1) * MIB;
    let spilled = plan(
        &layers,
        &on(Resources::cpu(1).with_device_memory_cap(tight)),
    )
    .unwrap();
    println!("environments on the host:\n{spilled}");
    let environments = |plan: &tutti_plan::Plan| -> Vec<Tier> {
        plan.placements()
            .iter()
            .filter(|p| p.object.name().starts_with("environment "))
            .map(|p| p.tier)
            .collect()
    };
    let tiers = environments(&spilled);
    assert!(
        tiers.contains(&Tier::Host) && !tiers.contains(&Tier::Disk),
        "{tiers:?}"
    );
    let (on_host, _) = src(
        &layers,
        &on(Resources::cpu(1).with_device_memory_cap(tight)),
    )
    .unwrap();
    assert_eq!(on_host.cores(), free_result.cores());

    // And a host that cannot hold them either: the disk tier, the same result.
    let scratch = tempfile::tempdir().unwrap();
    let no_host = Resources::cpu(1)
        .with_device_memory_cap(tight)
        .with_host_memory_cap(tight + MIB)
        .with_scratch_dir(scratch.path());
    let on_disk = plan(&layers, &on(no_host.clone())).unwrap();
    println!("no host room:\n{on_disk}");
    assert!(environments(&on_disk).contains(&Tier::Disk));
    let (spilled_result, info) = src(&layers, &on(no_host)).unwrap();
    assert_eq!(spilled_result.cores(), free_result.cores());
    assert!(info.environments.spilled_bytes > 0);
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}
