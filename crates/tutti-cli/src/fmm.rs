//! `tutti fmm`: potentials and accelerations of N bodies by the fast multipole method.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde_json::json;
use tutti_fmm::{fmm_on, io, order_for_accuracy, plan, sampled_error, FmmOptions, Precision};

use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{device_kind, print_json};
use crate::resources::{DeviceArgs, KernelsArg};

/// Options of `tutti fmm`.
#[derive(Args)]
pub struct FmmArgs {
    /// Positions: a float64 .npy array of shape (N, 3).
    #[arg(long, value_name = "P.npy")]
    positions: PathBuf,
    /// Strengths (masses or charges): a float64 .npy array of shape (N,).
    #[arg(long, value_name = "M.npy")]
    masses: PathBuf,
    /// Expansion order p, 1..=12 (default 7).
    #[arg(long)]
    order: Option<usize>,
    /// Opening angle theta in (0, 1) (default 0.5).
    #[arg(long)]
    theta: Option<f64>,
    /// A relative L2 error on accelerations to reach instead of an order: the lowest order
    /// measured to reach it (docs/fmm.md, "Accuracy") at theta 0.5; 8.53e-7 at best.
    #[arg(long, conflicts_with_all = ["order", "theta"])]
    eps: Option<f64>,
    /// Largest number of bodies in a leaf (default 64).
    #[arg(long)]
    leaf_size: Option<usize>,
    /// Plummer softening length, >= 0 (default 0).
    #[arg(long)]
    softening: Option<f64>,
    /// Far field (M2L) in f32 with f64 accumulation.
    #[arg(long)]
    f32_far_field: bool,
    /// Items per M2L / P2P chunk, overriding the planner's choice.
    #[arg(long)]
    chunk_items: Option<usize>,
    /// Where M2L and P2P run: as kernels on GPU ranks and host code on simulated devices
    /// (auto), as kernels on every rank (always; on simulated devices their host twins), or
    /// as host code everywhere (never).
    #[arg(long, value_enum, default_value_t = KernelsArg::Auto)]
    kernels: KernelsArg,
    /// GPU kernels without fused multiply-adds: the host code's results bit for bit.
    #[arg(long)]
    no_fma: bool,
    /// Output directory: potential.npy (N,) and accel.npy (N, 3) are written there.
    #[arg(long, value_name = "DIR", required_unless_present = "plan")]
    out: Option<PathBuf>,
    /// Print the memory plan (the tree, expansions and working memory on each device) and
    /// exit without evaluating; refused with the numbers when it does not fit.
    #[arg(long)]
    plan: bool,
    /// Measure the relative L2 error against the direct sum on K random bodies.
    #[arg(long, value_name = "K")]
    check_direct: Option<usize>,
    #[command(flatten)]
    devices: DeviceArgs,
}

impl FmmArgs {
    fn options(&self) -> FmmOptions {
        let mut options = FmmOptions::default().with_resources(self.devices.resources());
        // `run` has refused a bad eps with the library's message; here it sets the order.
        if let Some((order, _)) = self.eps.and_then(|eps| order_for_accuracy(eps).ok()) {
            options = options.with_order(order);
        }
        if let Some(order) = self.order {
            options = options.with_order(order);
        }
        if let Some(theta) = self.theta {
            options = options.with_theta(theta);
        }
        if let Some(leaf_size) = self.leaf_size {
            options = options.with_leaf_size(leaf_size);
        }
        if let Some(softening) = self.softening {
            options = options.with_softening(softening);
        }
        if self.f32_far_field {
            options = options.with_far_field(Precision::F32);
        }
        if let Some(items) = self.chunk_items {
            options = options.with_chunk_items(items);
        }
        options
            .with_kernels(self.kernels.into())
            .with_fused_multiply_add(!self.no_fma)
    }
}

pub fn run(args: &FmmArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    if let Some(eps) = args.eps {
        order_for_accuracy(eps).map_err(Failure::from)?;
    }
    let options = args.options();
    let options = match crate::progress::reporter(processes.prints()) {
        Some(report) => options.with_progress(report),
        None => options,
    };
    options.validate()?;
    if args.check_direct == Some(0) {
        return Err(Failure::input(
            "invalid `--check-direct`: expected a number of bodies >= 1, got 0",
        ));
    }
    let started = Instant::now();
    if processes.prints() {
        log::info!(
            "reading {} and {}",
            args.positions.display(),
            args.masses.display()
        );
    }
    let positions = io::read_positions(&args.positions)?;
    let masses = io::read_masses(&args.masses)?;
    let inputs = inputs(args, &options);
    if args.plan {
        processes.refuse_spanning("tutti fmm --plan")?;
        let plan = plan(&positions, &masses, &options)?;
        if json {
            let fields = json!({
                "inputs": inputs,
                "bodies": positions.len(),
                "plan": plan.to_string(),
            });
            print_json("fmm", started, fields);
        } else {
            println!("{plan}");
        }
        return Ok(());
    }
    let Some(out_dir) = &args.out else {
        return Err(Failure::input(
            "`--out DIR` is needed unless `--plan` is given",
        ));
    };
    // Over MPI every process reads the inputs, evaluates its share and gathers the rest;
    // rank 0 writes the outputs and prints.
    let group = processes.group(&options.resources, tutti_fmm::GPU_USE)?;
    if processes.prints() {
        log::info!("evaluating {} bodies", positions.len());
    }
    let out = fmm_on(&group, &positions, &masses, &options)?;
    if !processes.prints() {
        return Ok(());
    }
    log::info!("writing {}", out_dir.display());
    io::write_outputs(out_dir, &out.potential, &out.accel)
        .map_err(|e| Failure::from(e).in_output())?;
    let written = started.elapsed().as_secs_f64();
    let check = match args.check_direct {
        Some(samples) => {
            let checked = Instant::now();
            let error = sampled_error(
                &positions,
                &masses,
                options.softening,
                &out.potential,
                &out.accel,
                samples,
                0,
            )?;
            Some((error, checked.elapsed().as_secs_f64()))
        }
        None => None,
    };
    let info = &out.info;
    let (potential, accel) = (out_dir.join("potential.npy"), out_dir.join("accel.npy"));
    if json {
        let fields = json!({
            "inputs": inputs,
            "bodies": info.bodies,
            "processes": processes.size(),
            "devices": info.ranks,
            "device_kind": device_kind(group.devices()),
            "kernel_devices": info.kernel_ranks,
            "tree": {
                "nodes": info.nodes,
                "leaves": info.leaves,
                "depth": info.depth,
                "m2l_pairs": info.m2l_pairs,
                "p2p_pairs": info.p2p_pairs,
                "leaves_per_device": info.leaves_per_rank,
            },
            "outputs": { "potential": potential, "accel": accel },
            "check": check.as_ref().map(|(error, seconds)| json!({
                "samples": error.targets.len(),
                "accel_error": error.accel,
                "potential_error": error.potential,
                "seconds": seconds,
            })),
            "timings": {
                "setup": info.setup_seconds,
                "evaluate": info.evaluate_seconds,
                "total_with_io": written,
            },
        });
        print_json("fmm", started, fields);
        return Ok(());
    }
    println!(
        "fmm: N = {}, p = {}, theta = {}, leaf size {}, softening {}, {} device(s)",
        info.bodies, options.order, options.theta, options.leaf_size, options.softening, info.ranks
    );
    println!(
        "tree: {} nodes, {} leaves, depth {}; {} M2L and {} P2P interactions; leaves per device {:?}",
        info.nodes, info.leaves, info.depth, info.m2l_pairs, info.p2p_pairs, info.leaves_per_rank
    );
    let fma = if options.fused_multiply_add {
        "with"
    } else {
        "without"
    };
    println!(
        "M2L and P2P: device kernels on {} of {} device(s) ({fma} FMA), host code on the rest",
        info.kernel_ranks, info.ranks
    );
    println!(
        "time: setup {:.3} s, evaluation {:.3} s, total with I/O {written:.3} s",
        info.setup_seconds, info.evaluate_seconds,
    );
    if let Some((error, seconds)) = &check {
        println!(
            "check: relative L2 error on {} bodies vs the direct sum: accel {:.3e}, potential {:.3e} ({seconds:.3} s)",
            error.targets.len(),
            error.accel,
            error.potential,
        );
    }
    println!("wrote {} and accel.npy", potential.display());
    Ok(())
}

/// The `inputs` of `--json`: the files and the options in effect (defaults filled in).
fn inputs(args: &FmmArgs, options: &FmmOptions) -> serde_json::Value {
    json!({
        "positions": args.positions,
        "masses": args.masses,
        "order": options.order,
        "theta": options.theta,
        "leaf_size": options.leaf_size,
        "softening": options.softening,
        "f32_far_field": args.f32_far_field,
        "chunk_items": args.chunk_items,
        "kernels": args.kernels.name(),
        "fma": options.fused_multiply_add,
        "out": args.out,
        "plan": args.plan,
        "check_direct": args.check_direct,
        "resources": args.devices.to_json(),
    })
}
