//! `tutti sweep`: compress the product of a stack of tensor trains by SRC.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use tutti_sweep::{
    plan, src_on, write_train, Complex64, Layer, NpyTrain, Scalar, SrcOptions, SweepProgress,
};

use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{device_kind, print_json};
use crate::resources::{DeviceArgs, KernelsArg};

/// Options of `tutti sweep`.
#[derive(Args)]
pub struct SweepArgs {
    /// A train directory (000.npy, 001.npy, ...); repeat in mathematical order: `--train U
    /// --train psi` computes U|psi>. An MPS may only come first (a bra, not conjugated) or last.
    #[arg(long = "train", value_name = "DIR", required = true)]
    trains: Vec<PathBuf>,
    /// The largest bond of the result.
    #[arg(long, value_name = "N")]
    chi: usize,
    /// Extra sketch columns, truncated away by a final SVD sweep.
    #[arg(long, value_name = "K", default_value_t = 0)]
    oversample: usize,
    /// Relative singular-value cutoff per bond, in [0, 1).
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    cutoff: f64,
    /// Seed of the random sketch.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Where to write the result (a train directory, written atomically).
    #[arg(long, value_name = "DIR", required_unless_present = "plan")]
    out: Option<PathBuf>,
    /// Print the memory plan (the layers' cores, the sketch, the work and collective buffers,
    /// each site's sketched environment and the result, with the tier of each: environments
    /// that fit neither the device nor the host caps spill to the scratch directory) and exit,
    /// or fail with the numbers when it does not fit the devices, caps and scratch limit.
    #[arg(long)]
    plan: bool,
    /// Where the contractions run: on the device for GPU ranks and on the host for simulated
    /// devices (auto), on the device for every rank (always; on simulated devices the host
    /// implementations of the same calls), or on the host (never).
    #[arg(long, value_enum, default_value_t = KernelsArg::Auto)]
    kernels: KernelsArg,
    #[command(flatten)]
    devices: DeviceArgs,
}

pub fn run(args: &SweepArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let trains = args
        .trains
        .iter()
        .map(NpyTrain::open)
        .collect::<Result<Vec<_>, _>>()?;
    let reporting = Reporting {
        json,
        started,
        processes,
    };
    if trains.iter().any(NpyTrain::is_complex) {
        run_typed::<Complex64>(args, &trains, &reporting)
    } else {
        run_typed::<f64>(args, &trains, &reporting)
    }
}

/// How and where a run reports.
struct Reporting<'a> {
    json: bool,
    started: Instant,
    processes: &'a Processes,
}

/// The `inputs` of `--json`: the trains and the options.
fn inputs(args: &SweepArgs) -> serde_json::Value {
    json!({
        "trains": args.trains,
        "chi": args.chi,
        "oversample": args.oversample,
        "cutoff": args.cutoff,
        "seed": args.seed,
        "out": args.out,
        "plan": args.plan,
        "kernels": args.kernels.name(),
        "resources": args.devices.to_json(),
    })
}

fn run_typed<T: Scalar>(
    args: &SweepArgs,
    trains: &[NpyTrain],
    reporting: &Reporting<'_>,
) -> Result<(), Failure> {
    let processes = reporting.processes;
    let layers: Vec<&dyn Layer<T>> = trains.iter().map(|t| t as &dyn Layer<T>).collect();
    let options = SrcOptions::new(args.chi)
        .with_oversample(args.oversample)
        .with_cutoff(args.cutoff)
        .with_seed(args.seed)
        .with_kernels(args.kernels.into())
        .with_resources(args.devices.resources());
    if args.plan {
        processes.refuse_spanning("tutti sweep --plan")?;
        let plan = plan(&layers, &options)?;
        if reporting.json {
            let fields = json!({
                "inputs": inputs(args),
                "scalar": T::NAME,
                "plan": plan.to_string(),
            });
            print_json("sweep", reporting.started, fields);
        } else {
            println!("{plan}");
        }
        return Ok(());
    }
    let Some(out) = &args.out else {
        return Err(Failure::input(
            "`--out DIR` is needed unless `--plan` is given",
        ));
    };
    let options = match crate::progress::reporter(processes.prints()) {
        Some(report) => options.with_progress(Arc::new(move |p: SweepProgress| {
            report.report(&p.as_progress())
        })),
        None => options,
    };
    // Over MPI every process reads the trains and sweeps its block of sketch columns; rank
    // 0 (the only one that reports progress) writes the result and prints.
    let group = processes.group(&options.resources, tutti_sweep::GPU_USE)?;
    let outcome = src_on(&group, &layers, &options);
    if !processes.prints() {
        return Ok(outcome.map(|_| ())?);
    }
    let (train, info) = outcome?;
    let wrote = Instant::now();
    write_train(&train, out).map_err(|e| Failure::from(e).in_output())?;
    if reporting.json {
        let fields = json!({
            "inputs": inputs(args),
            "scalar": T::NAME,
            "trains": trains.len(),
            "sites": train.len(),
            "processes": processes.size(),
            "devices": info.devices,
            "device_kind": device_kind(group.devices()),
            "sketch_width": info.sketch_width,
            "exact_fallback": info.exact_fallback,
            "bonds": info.bonds,
            "norm": info.norm,
            "truncated_weight": info.truncated_weight,
            "plan": info.plan.summary(),
            "environments": {
                "on_device": info.environments.on_device,
                "on_host": info.environments.on_host,
                "on_disk": info.environments.on_disk,
                "spilled_bytes": info.environments.spilled_bytes,
            },
            "outputs": { "train": out },
            "timings": {
                "sweep": info.seconds,
                "write": wrote.elapsed().as_secs_f64(),
            },
        });
        print_json("sweep", reporting.started, fields);
        return Ok(());
    }
    println!(
        "sweep: {} trains x {} sites ({}), chi {} (sketch width {}), {} device(s){}",
        trains.len(),
        train.len(),
        T::NAME,
        args.chi,
        info.sketch_width,
        info.devices,
        if info.exact_fallback {
            ", exact (2 sites)"
        } else {
            ""
        },
    );
    println!("plan:  {}", info.plan.summary());
    let env = &info.environments;
    if env.on_host + env.on_disk > 0 {
        println!(
            "environments: {} on device, {} on host, {} on disk ({} spilled)",
            env.on_device,
            env.on_host,
            env.on_disk,
            tutti_backend::format_bytes(env.spilled_bytes)
        );
    }
    println!("bonds: {:?}", info.bonds);
    println!("norm:  {:.12e}", info.norm);
    if info.truncated_weight > 0.0 {
        println!(
            "truncated weight (final SVD sweep): {:.3e}",
            info.truncated_weight
        );
    }
    println!("time:  {:.3} s", info.seconds);
    println!("wrote: {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tutti_sweep::{read_train, right_orthonormality_error, TensorTrain, TrainKind};

    use super::*;

    /// A process on its own (no MPI).
    fn alone() -> Processes {
        Processes::start(tutti_mpi::launch::MpiMode::Off).expect("no MPI")
    }

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: SweepArgs,
    }

    fn train(kind: TrainKind, n: usize, bond: usize, salt: f64) -> TensorTrain<f64> {
        let cores = (0..n)
            .map(|k| {
                let (left, right) = (
                    if k == 0 { 1 } else { bond },
                    if k + 1 == n { 1 } else { bond },
                );
                let dims = match kind {
                    TrainKind::Mps => vec![left, 2, right],
                    TrainKind::Mpo => vec![left, 2, 2, right],
                };
                let len: usize = dims.iter().product();
                let data = (0..len).map(|i| ((i as f64 + salt) * 0.7).sin()).collect();
                (dims, data)
            })
            .collect();
        TensorTrain::from_arrays(kind, cores).unwrap()
    }

    #[test]
    fn sweep_command_writes_the_library_result() {
        let dir = std::env::temp_dir().join(format!("tutti-cli-sweep-{}", std::process::id()));
        let (h, psi) = (
            train(TrainKind::Mpo, 6, 3, 0.5),
            train(TrainKind::Mps, 6, 4, 1.5),
        );
        write_train(&h, dir.join("h")).unwrap();
        write_train(&psi, dir.join("psi")).unwrap();
        let out = dir.join("out");
        let (h_dir, psi_dir, bad_dir) = (dir.join("h"), dir.join("psi"), dir.join("bad"));
        let argv = [
            "sweep",
            "--train",
            h_dir.to_str().unwrap(),
            "--train",
            psi_dir.to_str().unwrap(),
            "--chi",
            "5",
            "--seed",
            "3",
            "--devices",
            "2",
            "--kind",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ];
        run(&Wrapper::parse_from(argv).args, &alone(), false).unwrap();
        let written: TensorTrain<f64> = read_train(&out).unwrap();
        // The library on one device: two agree with it to rounding.
        let options = SrcOptions::new(5)
            .with_seed(3)
            .with_resources(tutti_backend::Resources::cpu(1));
        let (expected, _) = tutti_sweep::src(&[&h as &dyn Layer<f64>, &psi], &options).unwrap();
        assert!(written.bonds().iter().all(|&b| b <= 5));
        assert!(right_orthonormality_error(&written) < 1e-12);
        assert!(tutti_sweep::distance(&written, &expected).unwrap() < 1e-12);
        // A bad stack is an error message, not a panic.
        let argv = [
            "sweep",
            "--train",
            out.to_str().unwrap(),
            "--train",
            out.to_str().unwrap(),
            "--chi",
            "5",
            "--out",
            bad_dir.to_str().unwrap(),
        ];
        let err = run(&Wrapper::parse_from(argv).args, &alone(), false).unwrap_err();
        assert!(err.message().contains("number, not a train"), "{err}");
        assert_eq!(err.exit_code(), 2, "a bad stack is bad input");

        // --plan: the table, nothing written, exit 0; a cap too small: refused with the
        // numbers. psi of bond 96 at chi 64: some MiB of work buffers per device.
        let big_dir = dir.join("big");
        write_train(&train(TrainKind::Mps, 12, 96, 2.5), &big_dir).unwrap();
        let h12_dir = dir.join("h12");
        write_train(&train(TrainKind::Mpo, 12, 3, 0.5), &h12_dir).unwrap();
        let planned = dir.join("planned");
        let plan_argv = |cap: Option<&str>| {
            let mut argv: Vec<String> = [
                "sweep",
                "--train",
                h12_dir.to_str().unwrap(),
                "--train",
                big_dir.to_str().unwrap(),
                "--chi",
                "64",
                "--kind",
                "cpu",
                "--plan",
                "--out",
                planned.to_str().unwrap(),
            ]
            .map(String::from)
            .to_vec();
            if let Some(cap) = cap {
                argv.extend(["--device-memory-mib".to_string(), cap.to_string()]);
            }
            argv
        };
        run(&Wrapper::parse_from(plan_argv(None)).args, &alone(), false).unwrap();
        assert!(!planned.exists(), "--plan writes nothing");
        let err = run(
            &Wrapper::parse_from(plan_argv(Some("1"))).args,
            &alone(),
            false,
        )
        .unwrap_err();
        let message = err.message();
        assert!(
            message.contains("memory plan")
                && message.contains("needs")
                && message.contains("free"),
            "{err}"
        );
        assert_eq!(
            err.exit_code(),
            2,
            "a plan that does not fit the caps is refused as input"
        );
        // The same refusal without --plan, before any work.
        let mut argv = plan_argv(Some("1"));
        argv.retain(|a| a != "--plan");
        let err = run(&Wrapper::parse_from(argv).args, &alone(), false).unwrap_err();
        assert!(err.message().contains("memory plan"), "{err}");
        assert!(!planned.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Caps in MiB that hold the per-site working set but leave the environments no host
    /// room: they spill to `--scratch`, and the result is the uncapped run's, bit for bit.
    #[test]
    fn environments_spill_to_the_scratch_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (h, psi) = (
            train(TrainKind::Mpo, 16, 4, 0.5),
            train(TrainKind::Mps, 16, 128, 1.5),
        );
        let (h_dir, psi_dir) = (dir.path().join("h"), dir.path().join("psi"));
        write_train(&h, &h_dir).unwrap();
        write_train(&psi, &psi_dir).unwrap();
        let scratch = dir.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();

        // The working set from the library's uncapped plan, rounded up to MiB.
        let files = [
            NpyTrain::open(&h_dir).unwrap(),
            NpyTrain::open(&psi_dir).unwrap(),
        ];
        let layers: [&dyn Layer<f64>; 2] = [&files[0], &files[1]];
        let options = SrcOptions::new(64)
            .with_seed(2)
            .with_resources(tutti_backend::Resources::cpu(1));
        let free = plan(&layers, &options).unwrap();
        let environments: Vec<u64> = free
            .placements()
            .iter()
            .filter(|p| p.object.name().starts_with("environment "))
            .map(|p| p.bytes)
            .collect();
        let largest = environments.iter().max().unwrap();
        let working =
            free.used(tutti_plan::Tier::Device) - environments.iter().sum::<u64>() + 2 * largest;
        let mib = working.div_ceil(1 << 20).to_string();

        let argv = |out: &std::path::Path, capped: bool| {
            let mut argv = vec![
                "sweep".to_string(),
                "--train".into(),
                h_dir.display().to_string(),
                "--train".into(),
                psi_dir.display().to_string(),
                "--chi".into(),
                "64".into(),
                "--seed".into(),
                "2".into(),
                "--kind".into(),
                "cpu".into(),
                "--devices".into(),
                "1".into(),
                "--out".into(),
                out.display().to_string(),
            ];
            if capped {
                for flag in ["--device-memory-mib", "--host-memory-mib"] {
                    argv.extend([flag.to_string(), mib.clone()]);
                }
                argv.extend(["--scratch".to_string(), scratch.display().to_string()]);
            }
            argv
        };
        let (free_out, capped_out) = (dir.path().join("free"), dir.path().join("capped"));
        run(
            &Wrapper::parse_from(argv(&free_out, false)).args,
            &alone(),
            false,
        )
        .unwrap();
        run(
            &Wrapper::parse_from(argv(&capped_out, true)).args,
            &alone(),
            false,
        )
        .unwrap();
        let (a, b): (TensorTrain<f64>, TensorTrain<f64>) = (
            read_train(&free_out).unwrap(),
            read_train(&capped_out).unwrap(),
        );
        assert_eq!(a.cores(), b.cores());
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
        let capped = options.with_resources(
            tutti_backend::Resources::cpu(1)
                .with_device_memory_cap(working.div_ceil(1 << 20) << 20)
                .with_host_memory_cap(working.div_ceil(1 << 20) << 20)
                .with_scratch_dir(&scratch),
        );
        let spilled = plan(&layers, &capped).unwrap();
        assert!(spilled.used(tutti_plan::Tier::Disk) > 0, "{spilled}");

        // --plan shows the environments on disk; a scratch limit of 1 MiB is refused.
        let mut plan_argv = argv(&capped_out, true);
        plan_argv.push("--plan".into());
        run(&Wrapper::parse_from(&plan_argv).args, &alone(), false).unwrap();
        plan_argv.extend(["--scratch-limit-mib".to_string(), "1".to_string()]);
        let err = run(&Wrapper::parse_from(&plan_argv).args, &alone(), false).unwrap_err();
        assert!(err.message().contains("scratch disk"), "{err}");
    }
}
