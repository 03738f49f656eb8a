//! The FMM with M2L and P2P as GPU kernels beside the host code on all the host's cores, in
//! one run: for each case (a uniform cube and a Plummer sphere) and each N, the wall time,
//! bodies per second, the GPU / CPU speed ratio, and each path's relative L2 error against
//! the direct sum on 1000 sampled targets (p = 7, theta = 0.5). Then the GPU split as two
//! ranks of one GPU (ordinals `[0, 0]`) at the smallest N.
//!
//! ```sh
//! cargo run --release -p tutti-benches --features cuda --bin fmm_gpu               # 1e6, 1e7
//! cargo run --release -p tutti-benches --features cuda --bin fmm_gpu -- --n 100000,1000000
//! cargo run --release -p tutti-benches --bin fmm_gpu -- --simulate --n 20000
//! ```
//!
//! The CPU path runs up to `--cpu-max-n` bodies (default 1e6: 1e7 bodies take minutes on
//! the host); above it the CPU column is the largest measured N's bodies per second, marked
//! `extrapolated`. `--simulate` runs the device path on one simulated device instead of a
//! GPU (the kernels' host twins): a check of the program without a GPU, not a GPU figure.
//! Without a GPU and without `--simulate` it prints why and measures the CPU alone. Results
//! go to `benches/results/fmm_gpu.json`.

use std::error::Error;
use std::time::Instant;

use serde_json::{json, Value};
use tutti_backend::{gpu_count, DeviceRequest, Resources};
use tutti_benches::{plummer_bodies, uniform_bodies, write_results, Bodies};
use tutti_fmm::{direct_sum, fmm, relative_l2, FmmOptions, FmmOutput, Kernels};

/// Targets on which the error against the direct sum is measured.
const SAMPLES: usize = 1000;

struct Args {
    sizes: Vec<usize>,
    cpu_max_n: usize,
    simulate: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        sizes: vec![1_000_000, 10_000_000],
        cpu_max_n: 1_000_000,
        simulate: false,
    };
    let number = |flag: &str, text: Option<String>| -> Result<usize, String> {
        let text = text.ok_or_else(|| format!("{flag} needs a number"))?;
        text.parse()
            .map_err(|_| format!("{flag}: expected a number of bodies, got {text:?}"))
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        match word.as_str() {
            "--n" => {
                let list = words
                    .next()
                    .ok_or("--n needs a list such as 1000000,10000000")?;
                args.sizes = list
                    .split(',')
                    .map(|item| number("--n", Some(item.to_string())))
                    .collect::<Result<_, _>>()?;
            }
            "--cpu-max-n" => args.cpu_max_n = number("--cpu-max-n", words.next())?,
            "--simulate" => args.simulate = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; expected --n N[,N...], --cpu-max-n N or --simulate"
                ))
            }
        }
    }
    if args.sizes.iter().any(|&n| n < 2) {
        return Err("--n: every size must be at least 2 bodies".into());
    }
    Ok(args)
}

/// One evaluation and its wall time in seconds.
fn timed(bodies: &Bodies, options: &FmmOptions) -> Result<(FmmOutput, f64), Box<dyn Error>> {
    let started = Instant::now();
    let out = fmm(&bodies.0, &bodies.1, options)?;
    Ok((out, started.elapsed().as_secs_f64()))
}

/// The sampled targets and their direct sums (potential, accel).
struct Reference {
    targets: Vec<usize>,
    potential: Vec<[f64; 1]>,
    accel: Vec<[f64; 3]>,
}

impl Reference {
    fn new(bodies: &Bodies) -> Result<Self, Box<dyn Error>> {
        let n = bodies.0.len();
        let targets: Vec<usize> = (0..SAMPLES.min(n))
            .map(|k| k * n / SAMPLES.min(n))
            .collect();
        let (potential, accel) = direct_sum(&bodies.0, &bodies.1, 0.0, &targets)?;
        Ok(Self {
            targets,
            potential: potential.into_iter().map(|p| [p]).collect(),
            accel,
        })
    }

    /// Relative L2 errors (accel, potential) of `out` on the targets.
    fn errors(&self, out: &FmmOutput) -> (f64, f64) {
        let accel: Vec<[f64; 3]> = self.targets.iter().map(|&i| out.accel[i]).collect();
        let potential: Vec<[f64; 1]> = self.targets.iter().map(|&i| [out.potential[i]]).collect();
        (
            relative_l2(&accel, &self.accel),
            relative_l2(&potential, &self.potential),
        )
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let args = parse_args()?;
    let cores = tutti_backend::system::host_cores();
    let device = if args.simulate {
        Some(("simulated device (kernels' host twins)", Resources::cpu(1)))
    } else {
        match gpu_count() {
            Ok(count) if count > 0 => Some(("GPU 0", Resources::gpu(1))),
            Ok(_) => {
                println!("fmm_gpu: the CUDA driver reports no GPU; measuring the CPU alone");
                None
            }
            Err(err) => {
                println!("fmm_gpu: no GPU ({err}); measuring the CPU alone");
                None
            }
        }
    };
    let options = FmmOptions::default();
    let on_device = device.as_ref().map(|(_, resources)| {
        options
            .clone()
            .with_resources(resources.clone())
            .with_kernels(Kernels::Always)
    });
    let device_name = device.as_ref().map(|(name, _)| *name);
    let on_host = options
        .clone()
        .with_resources(Resources::cpu(1))
        .with_kernels(Kernels::Never);
    println!(
        "fmm_gpu: p = {}, theta = {}, leaf size {}; device: {}; host: one simulated device on \
         all {cores} core(s)",
        options.order,
        options.theta,
        options.leaf_size,
        device.as_ref().map_or("none", |(name, _)| name)
    );
    println!(
        "  {:<8} {:>9} {:>9} {:>14} {:>10} {:>9} {:>14} {:>10} {:>9}",
        "case",
        "N",
        "dev (s)",
        "dev bodies/s",
        "dev accel",
        "cpu (s)",
        "cpu bodies/s",
        "cpu accel",
        "dev/cpu"
    );
    // A warm-up evaluation: the device's context, library loads and the kernels' compilation
    // are not part of the timings.
    if let Some(options) = &on_device {
        let warm = uniform_bodies(20_000, 9);
        fmm(&warm.0, &warm.1, options)?;
    }
    let mut rows = Vec::new();
    for &n in &args.sizes {
        for (case, bodies) in [
            ("uniform", uniform_bodies(n, 1)),
            ("plummer", plummer_bodies(n, 2)),
        ] {
            let reference = Reference::new(&bodies)?;
            let device_run = match &on_device {
                Some(options) => {
                    let (out, seconds) = timed(&bodies, options)?;
                    Some((reference.errors(&out), seconds, out.info.kernel_ranks))
                }
                None => None,
            };
            let host_run = if n <= args.cpu_max_n {
                let (out, seconds) = timed(&bodies, &on_host)?;
                Some((reference.errors(&out), seconds))
            } else {
                None
            };
            rows.push((case, n, device_run, host_run));
            print_row(rows.last().expect("the row just pushed"), &rows);
            // Written after every case, so that a run cut short keeps what it measured.
            write_results(
                "fmm_gpu",
                results(&rows, &options, cores, device_name, Value::Null),
            )?;
        }
    }
    let split = match &device {
        Some((_, resources)) if !args.simulate => {
            two_ranks(resources, &options, args.sizes.iter().min().copied())?
        }
        _ => Value::Null,
    };
    let results = results(&rows, &options, cores, device_name, split);
    let path = write_results("fmm_gpu", results)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The JSON results of the cases measured so far and of the two-rank run.
fn results(
    rows: &[Row],
    options: &FmmOptions,
    cores: usize,
    device: Option<&str>,
    split: Value,
) -> Value {
    json!({
        "order": options.order,
        "theta": options.theta,
        "leaf_size": options.leaf_size,
        "host_cores": cores,
        "device": device,
        "cases": rows.iter().map(|(case, n, device_run, host_run)| json!({
            "case": case,
            "n": n,
            "device_seconds": device_run.map(|(_, s, _)| s),
            "device_kernel_ranks": device_run.map(|(_, _, k)| k),
            "device_accel_error": device_run.map(|((a, _), _, _)| a),
            "device_potential_error": device_run.map(|((_, p), _, _)| p),
            "cpu_seconds": host_run.map(|(_, s)| s),
            "cpu_accel_error": host_run.map(|((a, _), _)| a),
            "cpu_potential_error": host_run.map(|((_, p), _)| p),
            "cpu_bodies_per_second": cpu_rate(rows, case, *n).map(|(rate, _)| rate),
            "cpu_extrapolated": cpu_rate(rows, case, *n).map(|(_, extrapolated)| extrapolated),
        })).collect::<Vec<_>>(),
        "two_ranks_of_one_gpu": split,
    })
}

/// One measured case: its name, N, the device run ((accel, potential) errors, seconds,
/// kernel ranks) and the host run ((accel, potential) errors, seconds).
type Row = (
    &'static str,
    usize,
    Option<((f64, f64), f64, usize)>,
    Option<((f64, f64), f64)>,
);

/// The host's bodies per second for `case` at `n`: measured, or (`true`) the rate of the
/// largest N measured for that case.
fn cpu_rate(rows: &[Row], case: &str, n: usize) -> Option<(f64, bool)> {
    let measured = |(c, m, _, host): &Row| -> Option<(usize, f64)> {
        (*c == case).then_some(())?;
        host.map(|(_, seconds)| (*m, *m as f64 / seconds))
    };
    if let Some((_, rate)) = rows.iter().filter(|r| r.1 == n).find_map(measured) {
        return Some((rate, false));
    }
    rows.iter()
        .filter_map(measured)
        .max_by_key(|(m, _)| *m)
        .map(|(_, rate)| (rate, true))
}

fn print_row(row: &Row, rows: &[Row]) {
    let (case, n, device_run, host_run) = row;
    let dash = || "-".to_string();
    let device_rate = device_run.map(|(_, seconds, _)| *n as f64 / seconds);
    let cpu = cpu_rate(rows, case, *n);
    println!(
        "  {:<8} {:>9} {:>9} {:>14} {:>10} {:>9} {:>14} {:>10} {:>9}",
        case,
        n,
        device_run.map_or_else(dash, |(_, s, _)| format!("{s:.3}")),
        device_rate.map_or_else(dash, |r| format!("{r:.3e}")),
        device_run.map_or_else(dash, |((a, _), _, _)| format!("{a:.2e}")),
        host_run.map_or_else(dash, |(_, s)| format!("{s:.3}")),
        cpu.map_or_else(dash, |(r, extrapolated)| {
            format!("{r:.3e}{}", if extrapolated { "*" } else { "" })
        }),
        host_run.map_or_else(dash, |((a, _), _)| format!("{a:.2e}")),
        device_rate
            .zip(cpu)
            .map_or_else(dash, |(d, (c, _))| format!("{:.2}", d / c)),
    );
    if cpu.is_some_and(|(_, extrapolated)| extrapolated) {
        println!("           (* the CPU rate of the largest N measured, not run at this N)");
    }
}

/// The smallest N on two ranks of one GPU against one rank: seconds and whether the bits
/// agree (they must: the result does not depend on the rank count).
fn two_ranks(
    resources: &Resources,
    options: &FmmOptions,
    n: Option<usize>,
) -> Result<Value, Box<dyn Error>> {
    let Some(n) = n else { return Ok(Value::Null) };
    let bodies = uniform_bodies(n, 1);
    let one = options.clone().with_resources(resources.clone());
    let two = options.clone().with_resources(
        resources
            .clone()
            .with_devices(DeviceRequest::Ordinals(vec![0, 0])),
    );
    let (out1, seconds1) = timed(&bodies, &one)?;
    let (out2, seconds2) = timed(&bodies, &two)?;
    let bits = |out: &FmmOutput| -> Vec<u64> {
        out.potential
            .iter()
            .chain(out.accel.iter().flatten())
            .map(|x| x.to_bits())
            .collect()
    };
    let identical = bits(&out1) == bits(&out2);
    println!(
        "  two ranks of one GPU, uniform N = {n}: {seconds2:.3} s against {seconds1:.3} s on one \
         rank; identical bits: {identical}"
    );
    if !identical {
        return Err("two ranks of one GPU gave other bits than one rank".into());
    }
    Ok(json!({
        "n": n,
        "one_rank_seconds": seconds1,
        "two_ranks_seconds": seconds2,
        "identical": identical,
    }))
}
