//! The out-of-core sweep's memory: the peak resident memory of a sweep whose host cap leaves
//! the sketched environments a quarter of the room they need (so most spill to the scratch
//! disk), beside the uncapped sweep of the same stack, each in a fresh process (a process's
//! high-water mark only grows). Heisenberg XXZ times a random MPS of bond D on n sites,
//! chi = D, on 1 and 2 simulated devices.
//!
//! Each child process builds the stack, reads its resident memory (`VmRSS`), sweeps, and
//! reads its high-water mark (`VmHWM`); the sweep's peak is the difference. The parent prints,
//! per device count: the planned environments, the cap, the peak of each run, the capped
//! peak over the cap plus one site's working set (the plan's device-tier objects: it must be
//! at most 1) and over the cap alone (on simulated devices the cap already holds the working
//! set), the bytes spilled, the time ratio, and whether the results are the same bits.
//!
//! `cargo run --release -p tutti-benches --bin sweep_out_of_core`

use std::error::Error;
use std::process::Command;

use serde_json::{json, Value};
use tutti_backend::{format_bytes, Resources};
use tutti_benches::{random_mps, write_results};
use tutti_plan::{Plan, Tier};
use tutti_sweep::{heisenberg_xxz, plan, src, Layer, SrcOptions};

const SITES: usize = 32;
const BOND: usize = 192;

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`; given there in kB).
fn status_bytes(field: &str) -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .ok_or_else(|| format!("no {field} in /proc/self/status"))?;
    let kib: u64 = line
        .trim_start_matches(field)
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024)
}

/// The options of one run: `devices` simulated devices, and caps when given.
fn options(devices: usize, caps: Option<(u64, u64)>, scratch: &str) -> SrcOptions {
    let mut resources = Resources::cpu(devices).with_scratch_dir(scratch);
    if let Some((device, host)) = caps {
        resources = resources
            .with_device_memory_cap(device)
            .with_host_memory_cap(host);
    }
    SrcOptions::new(BOND).with_seed(1).with_resources(resources)
}

/// The child: one sweep, its figures as one JSON line on stdout.
fn child(args: &[String]) -> Result<(), Box<dyn Error>> {
    let devices: usize = args[0].parse()?;
    let caps = match (args.get(2), args.get(3)) {
        (Some(device), Some(host)) => Some((device.parse()?, host.parse()?)),
        _ => None,
    };
    let h = heisenberg_xxz(SITES, 1.0, 0.5, 0.0)?;
    let psi = random_mps(SITES, BOND, 7)?;
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = options(devices, caps, &args[1]);
    let before = status_bytes("VmRSS")?;
    let (train, info) = src(&layers, &options)?;
    let high = status_bytes("VmHWM")?;
    // FNV-1a over the result's bits: equal runs, equal digests.
    let digest = train
        .cores()
        .iter()
        .flat_map(|core| core.data.iter())
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, x| {
            (hash ^ x.to_bits()).wrapping_mul(0x0100_0000_01b3)
        });
    let line = json!({
        "rss_before": before,
        "hwm": high,
        "peak": high.saturating_sub(before),
        "seconds": info.seconds,
        "on_disk": info.environments.on_disk,
        "spilled_bytes": info.environments.spilled_bytes,
        "digest": format!("{digest:016x}"),
    });
    println!("{line}");
    Ok(())
}

/// Runs a child process and parses its line.
fn run_child(
    devices: usize,
    scratch: &str,
    caps: Option<(u64, u64)>,
) -> Result<Value, Box<dyn Error>> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["child", &devices.to_string(), scratch]);
    if let Some((device, host)) = caps {
        command.args([device.to_string(), host.to_string()]);
    }
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!("child failed: {}", String::from_utf8_lossy(&output.stderr)).into());
    }
    let text = String::from_utf8(output.stdout)?;
    Ok(serde_json::from_str(text.trim())?)
}

fn environments(plan: &Plan) -> Vec<u64> {
    plan.placements()
        .iter()
        .filter(|p| p.object.name().starts_with("environment "))
        .map(|p| p.bytes)
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        return child(&args[1..]);
    }
    let scratch = std::env::temp_dir();
    let scratch = scratch
        .to_str()
        .ok_or("the temporary directory is not UTF-8")?;
    let h = heisenberg_xxz(SITES, 1.0, 0.5, 0.0)?;
    let psi = random_mps(SITES, BOND, 7)?;
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    println!(
        "sweep_out_of_core: XXZ x random MPS, n {SITES}, D = chi = {BOND}; peak = VmHWM - VmRSS \
         before the sweep, each run in a fresh process"
    );
    let mut rows = Vec::new();
    for devices in [1, 2] {
        // Caps from the uncapped plan: the device tier holds the per-site working set and two
        // staged environments; the host cap leaves the environments a quarter of their bytes.
        let free = plan(&layers, &options(devices, None, scratch))?;
        let envs = environments(&free);
        let env_total: u64 = envs.iter().sum::<u64>() * devices as u64;
        let largest = envs.iter().copied().max().unwrap_or(0);
        let working = free.used(Tier::Device) - envs.iter().sum::<u64>() + 2 * largest;
        let host_plan = plan(
            &layers,
            &options(devices, Some((working, u64::MAX)), scratch),
        )?;
        let env_host: u64 = environments(&host_plan).iter().sum();
        let host_cap = host_plan.used(Tier::Host) - env_host + env_host / 4;
        let caps = (working, host_cap);
        let capped_plan = plan(&layers, &options(devices, Some(caps), scratch))?;

        let uncapped = run_child(devices, scratch, None)?;
        let capped = run_child(devices, scratch, Some(caps))?;
        let figure = |run: &Value, key: &str| run[key].as_f64().unwrap_or(f64::NAN);
        // One site's working set: the plan's device-tier objects on every device.
        let site_working_set = working * devices as u64;
        let within = figure(&capped, "peak") / (host_cap + site_working_set) as f64;
        let of_cap = figure(&capped, "peak") / host_cap as f64;
        let same_bits = uncapped["digest"] == capped["digest"];
        println!(
            "G {devices}: environments {} in all, host cap {} (room for 1/{} of the environments); \
             plan {}",
            format_bytes(env_total),
            format_bytes(host_cap),
            env_total / (env_host / 4).max(1),
            capped_plan.summary()
        );
        println!(
            "  peak uncapped {}, capped {} (cap + one site's working set {}: ratio {within:.2}; \
             of the cap alone {of_cap:.2}), spilled {} in {} files; time capped / uncapped \
             {:.2}; same bits: {same_bits}",
            format_bytes(figure(&uncapped, "peak") as u64),
            format_bytes(figure(&capped, "peak") as u64),
            format_bytes(host_cap + site_working_set),
            format_bytes(figure(&capped, "spilled_bytes") as u64),
            capped["on_disk"],
            figure(&capped, "seconds") / figure(&uncapped, "seconds"),
        );
        rows.push(json!({
            "devices": devices,
            "environment_bytes": env_total,
            "device_cap": working,
            "host_cap": host_cap,
            "site_working_set": site_working_set,
            "uncapped": uncapped,
            "capped": capped,
            "capped_peak_over_cap_plus_working_set": within,
            "capped_peak_over_cap": of_cap,
            "same_bits": same_bits,
        }));
    }
    let path = write_results(
        "sweep_out_of_core",
        json!({ "sites": SITES, "bond": BOND, "chi": BOND, "runs": rows }),
    )?;
    println!("wrote {}", path.display());
    Ok(())
}
