//! `tutti demo`: a short run on an embedded default that checks what it computes.

use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};
use tutti_backend::{format_bytes, DeviceRequest, GpuUse, KindRequest, Resources};
use tutti_group::{CommError, Group, RunError};
use tutti_plan::{Budget, ObjectSpec, Planner, SpillStore, Tier};

use crate::failure::Failure;
use crate::report::{device_kind, print_json, Text};
use crate::resources::kind_name;

/// Options of `tutti demo`.
#[derive(Args)]
pub struct DemoArgs {
    /// Number of devices.
    #[arg(long, short = 'd', default_value_t = 4)]
    devices: usize,
    /// Device kind: cpu (simulated), gpu, or auto.
    #[arg(long, default_value = "cpu")]
    kind: KindRequest,
    /// Elements per rank in the collective round trip.
    #[arg(long, default_value_t = 1 << 18)]
    len: usize,
}

/// Runs every check, each printing its lines (to standard error with `--json`) and
/// returning what it measured; the first that fails ends the demo.
pub fn run(args: &DemoArgs, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let text = Text::new(json);
    let resources = Resources::default()
        .with_kind(args.kind)
        .with_devices(DeviceRequest::Count(args.devices));
    let group = Group::from_resources(&resources, GpuUse::HostOnly)?;
    let names: Vec<String> = group.devices().iter().map(ToString::to_string).collect();
    writeln!(
        text,
        "tutti {} demo: {} rank(s) on {}",
        env!("CARGO_PKG_VERSION"),
        group.size(),
        names.join(", ")
    );
    let checks = json!({
        "collectives": collective_round_trip(text, &group, args.len)?,
        "abort": abort_round_trip(text, &group)?,
        "plan_and_spill": plan_and_spill(text, &resources)?,
        "fit": fit_on_devices(text, args.devices)?,
        "sweep": sweep_on_devices(text, &resources)?,
        "fmm": fmm_on_devices(text, args.devices)?,
        "adjoint": adjoint_water(text, args.devices)?,
    });
    writeln!(text, "demo: all checks passed");
    if json {
        let fields = json!({
            "inputs": {
                "devices": args.devices,
                "kind": kind_name(args.kind),
                "len": args.len,
            },
            "devices": group.size(),
            "device_kind": device_kind(group.devices()),
            "checks": checks,
            "passed": true,
        });
        print_json("demo", started, fields);
    }
    Ok(())
}

/// Rank r's contribution to the reduction: values that do not sum exactly in floating point,
/// so only a fixed summation order reproduces the reference bit for bit.
fn contribution(rank: usize, len: usize) -> Vec<f64> {
    (0..len)
        .map(|i| ((i as f64) * 0.37 + rank as f64).sin() / (rank as f64 + 1.0))
        .collect()
}

/// Allreduce, uneven scatter and gather, and all-to-all, each checked against a sequential
/// reference computed on the host.
fn collective_round_trip(text: Text, group: &Group, len: usize) -> Result<Value, Failure> {
    let size = group.size();
    writeln!(
        text,
        "collectives: {len} f64 per rank ({} per rank)",
        format_bytes((len * 8) as u64)
    );
    let mut reference = contribution(0, len);
    for rank in 1..size {
        for (acc, x) in reference.iter_mut().zip(contribution(rank, len)) {
            *acc += x;
        }
    }
    // Uneven blocks: rank r gets r + 1 parts of the scattered vector.
    let scattered: Vec<f64> = (0..size * (size + 1) / 2).map(|i| i as f64).collect();
    let started = Instant::now();
    let per_rank = group
        .run(|comm| {
            let rank = comm.rank();
            let mut sum = comm.device().upload(&contribution(rank, len))?;
            let t0 = Instant::now();
            comm.allreduce_sum_buffer(&mut sum)?;
            let allreduce_time = t0.elapsed();
            let sum = sum.to_host_vec()?;
            let sum_matches = sum
                .iter()
                .zip(&reference)
                .all(|(a, b)| a.to_bits() == b.to_bits());

            let blocks = (rank == 0).then(|| {
                let mut start = 0;
                (0..comm.size())
                    .map(|r| {
                        let block = scattered[start..start + r + 1].to_vec();
                        start += r + 1;
                        block
                    })
                    .collect::<Vec<_>>()
            });
            let mine = comm.scatter(0, blocks.as_deref())?;
            let doubled: Vec<f64> = mine.iter().map(|x| 2.0 * x).collect();
            let gathered = comm.gather(0, &doubled)?.map(|blocks| blocks.concat());

            let outgoing: Vec<Vec<u64>> = (0..comm.size())
                .map(|dest| vec![(rank * 100 + dest) as u64; dest + 1])
                .collect();
            let incoming = comm.all_to_all(&outgoing)?;
            let all_to_all_ok = incoming
                .iter()
                .enumerate()
                .all(|(src, block)| block == &vec![(src * 100 + rank) as u64; rank + 1]);
            Ok::<_, CommError>((sum_matches, allreduce_time, gathered, all_to_all_ok))
        })
        .map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    let reduce_ok = per_rank.iter().all(|r| r.0);
    let slowest = per_rank.iter().map(|r| r.1).max().unwrap_or_default();
    let expected_gather: Vec<f64> = scattered.iter().map(|x| 2.0 * x).collect();
    let gather_ok = per_rank[0].2.as_ref() == Some(&expected_gather);
    let all_to_all_ok = per_rank.iter().all(|r| r.3);
    let verdict = |ok: bool| if ok { "ok" } else { "FAILED" };
    writeln!(
        text,
        "  allreduce_sum  {:>9.3} ms  bitwise equal to the sequential sum on every rank: {}",
        slowest.as_secs_f64() * 1e3,
        verdict(reduce_ok)
    );
    writeln!(
        text,
        "  scatter/gather uneven blocks (rank r holds r+1 values), doubled and gathered back: {}",
        verdict(gather_ok)
    );
    writeln!(
        text,
        "  all_to_all     uneven blocks, every (source, destination) pair checked: {}",
        verdict(all_to_all_ok)
    );
    writeln!(
        text,
        "  round trip     {:>9.3} ms in all",
        elapsed.as_secs_f64() * 1e3
    );
    if reduce_ok && gather_ok && all_to_all_ok {
        Ok(json!({
            "len": len,
            "allreduce_ms": slowest.as_secs_f64() * 1e3,
            "round_trip_ms": elapsed.as_secs_f64() * 1e3,
            "ok": true,
        }))
    } else {
        Err(Failure::computation("a collective returned a wrong result"))
    }
}

/// The last rank fails in the middle of a run; the others are released and the original
/// error comes back.
fn abort_round_trip(text: Text, group: &Group) -> Result<Value, Failure> {
    if group.size() < 2 {
        return Ok(Value::Null);
    }
    let failing = group.size() - 1;
    let started = Instant::now();
    let outcome = group.run(|comm| {
        for step in 0..5 {
            if comm.rank() == failing && step == 3 {
                return Err(format!("injected failure at step {step}"));
            }
            comm.barrier().map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    let released_in = started.elapsed();
    match outcome {
        Err(RunError::Failed { rank, error }) if rank == failing => {
            writeln!(
                text,
                "abort: rank {rank} failed (\"{error}\"); the other ranks were released and \
                 the original error returned in {:.3} ms: ok",
                released_in.as_secs_f64() * 1e3
            );
            Ok(json!({
                "failed_rank": rank,
                "released_ms": released_in.as_secs_f64() * 1e3,
                "ok": true,
            }))
        }
        Err(other) => Err(format!("abort returned the wrong error: {other}").into()),
        Ok(_) => Err(Failure::computation(
            "the injected failure was not reported",
        )),
    }
}

/// A plan for a made-up out-of-core problem on devices capped at 64 MiB, a refusal of one
/// that cannot fit, and a spill file written, read back and removed.
fn plan_and_spill(text: Text, resources: &Resources) -> Result<Value, Failure> {
    const CAP: u64 = 64 << 20;
    let capped = resources.clone().with_device_memory_cap(CAP);
    let devices = capped.select_for(GpuUse::HostOnly)?;
    let budget = Budget::from_devices(&devices, &capped)?;
    let objects = [
        ObjectSpec::shared("operator cores", 4 << 20, 8).first_used_at(0),
        ObjectSpec::per_device("sketch environments", 24 << 20, 1).first_used_at(1),
        ObjectSpec::shared("state cores", 256 << 20, 4).first_used_at(2),
    ];
    let plan = Planner::new(budget).plan(&objects)?;
    writeln!(text, "plan: devices capped at {}", format_bytes(CAP));
    for line in plan.to_string().lines() {
        writeln!(text, "  {line}");
    }
    let expected = [Tier::Device, Tier::Device, Tier::Host];
    let placed_as_expected = objects
        .iter()
        .zip(expected)
        .all(|(object, tier)| plan.tier_of(object.name()) == Some(tier));
    if !placed_as_expected {
        return Err(Failure::computation(
            "the planner placed the demo objects unexpectedly",
        ));
    }

    let too_big = Budget::new(devices.len(), CAP, 1 << 30, 1 << 30)?;
    match Planner::new(too_big).plan(&[ObjectSpec::per_device("dense operator", 40 << 30, 1)]) {
        Err(refusal) => writeln!(
            text,
            "plan: an infeasible problem is refused up front: {refusal}"
        ),
        Ok(_) => {
            return Err(Failure::computation(
                "the planner accepted an infeasible problem",
            ))
        }
    }

    let store = SpillStore::for_resources(&capped)?;
    let dir = store.dir().to_path_buf();
    let values: Vec<f64> = (0..1 << 16).map(|i| (i as f64).sqrt()).collect();
    let mut writer = store.create_file("demo-block")?;
    writer.write_f64s(&values)?;
    let written = writer.finish()?;
    let mut back = vec![0.0; values.len()];
    store
        .open_file("demo-block")
        .and_then(|mut reader| reader.read_f64s(&mut back))?;
    store.close()?;
    let round_trip_ok = back == values && !dir.exists();
    writeln!(
        text,
        "spill: wrote {} to {}, read it back {}, directory removed: {}",
        format_bytes(written),
        dir.display(),
        if back == values {
            "identical"
        } else {
            "DIFFERENT"
        },
        if dir.exists() { "no" } else { "yes" }
    );
    if round_trip_ok {
        Ok(json!({ "spill_bytes": written, "ok": true }))
    } else {
        Err(Failure::computation("the spill round trip failed"))
    }
}

/// The example fit on one simulated device and on the demo's device count: the same bits,
/// and the true rates within four standard errors.
fn fit_on_devices(text: Text, devices: usize) -> Result<Value, Failure> {
    let started = Instant::now();
    let split = crate::fit::example_fit(devices, 2026)?;
    let seconds = started.elapsed().as_secs_f64();
    let single = crate::fit::example_fit(1, 2026)?;
    crate::fit::print_fit(text, &split, devices, seconds);
    let identical = split.parameters == single.parameters && split.cost == single.cost;
    let errors = split.standard_errors().unwrap_or_default();
    let within = split
        .parameters
        .iter()
        .zip(tutti_fit::example::TRUE_RATES)
        .zip(&errors)
        .all(|((fitted, truth), se)| (fitted - truth).abs() < 4.0 * se);
    writeln!(
        text,
        "  the same bits as on one device: {}; every rate within 4 standard errors of the truth: {}",
        if identical { "ok" } else { "FAILED" },
        if within { "ok" } else { "FAILED" }
    );
    if identical && within && split.converged() {
        Ok(json!({
            "parameters": split.parameters,
            "standard_errors": errors,
            "seconds": seconds,
            "ok": true,
        }))
    } else {
        Err(Failure::computation("the example fit did not reproduce"))
    }
}

/// SRC of the Heisenberg XXZ MPO times a random MPS (16 sites, D_psi = 16, chi = 16, 8 extra
/// sketch columns) against the optimal truncation, and the split run against one device.
fn sweep_on_devices(text: Text, resources: &Resources) -> Result<Value, Failure> {
    use tutti_sweep::{
        compress_exact, distance, exact_product, heisenberg_xxz, norm, src, Layer, SrcOptions,
        TensorTrain, TrainKind,
    };
    let (sites, bond, chi) = (16, 16, 16);
    let mut state = 0x2026_u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    };
    let cores = (0..sites)
        .map(|k| {
            let dims = vec![
                if k == 0 { 1 } else { bond },
                2,
                if k + 1 == sites { 1 } else { bond },
            ];
            let data = (0..dims.iter().product()).map(|_| uniform()).collect();
            (dims, data)
        })
        .collect();
    let psi = TensorTrain::<f64>::from_arrays(TrainKind::Mps, cores)?;
    let h = heisenberg_xxz(sites, 1.0, 0.5, 0.0)?;
    let stack: [&dyn Layer<f64>; 2] = [&h, &psi];
    let exact = exact_product(&stack)?;
    let scale = norm(&exact);
    let options = SrcOptions::new(chi).with_oversample(8).with_seed(1);
    let (single, _) = src(&stack, &options)?;
    let (split, info) = src(&stack, &options.with_resources(resources.clone()))?;
    let started = Instant::now();
    let (_, optimal) = compress_exact(&stack, chi, 0.0)?;
    let exact_seconds = started.elapsed().as_secs_f64();
    let src_error = distance(&split, &exact)? / scale;
    let ratio = src_error / optimal.relative_error;
    let agreement = distance(&split, &single)? / scale;
    writeln!(
        text,
        "sweep: H_XXZ |psi> on {sites} sites (D_H = 5, D_psi = {bond}), chi {chi} + 8 oversampled, \
         {} device(s)",
        info.devices
    );
    writeln!(
        text,
        "  SRC error {src_error:.4e} ({:.3} s), optimal (compress_exact) {:.4e} ({exact_seconds:.3} s), \
         ratio {ratio:.3}",
        info.seconds, optimal.relative_error
    );
    let agrees = agreement <= 1e-10;
    let near = ratio <= 2.0;
    writeln!(
        text,
        "  {} device(s) vs 1: relative difference {agreement:.1e}: {}; within 2x of optimal: {}",
        info.devices,
        if agrees { "ok" } else { "FAILED" },
        if near { "ok" } else { "FAILED" }
    );
    if agrees && near {
        Ok(json!({
            "src_error": src_error,
            "optimal_error": optimal.relative_error,
            "ratio": ratio,
            "device_difference": agreement,
            "seconds": info.seconds,
            "ok": true,
        }))
    } else {
        Err(Failure::computation("the sweep demo did not reproduce"))
    }
}

/// 20 000 bodies of a Plummer sphere by the FMM on one simulated device and on the demo's
/// device count: the same bits, and a sampled relative L2 error below 1e-4 against the
/// direct sum.
fn fmm_on_devices(text: Text, devices: usize) -> Result<Value, Failure> {
    const BODIES: usize = 20_000;
    // A Plummer sphere (scale radius 1, truncated at 20) from a SplitMix64 stream, so the
    // demo needs no random-number crate and draws the same bodies every time.
    let mut state: u64 = 2026;
    let mut uniform = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    let positions: Vec<[f64; 3]> = (0..BODIES)
        .map(|_| {
            let radius = loop {
                let u = uniform().max(1e-10);
                let r = 1.0 / (u.powf(-2.0 / 3.0) - 1.0).sqrt();
                if r < 20.0 {
                    break r;
                }
            };
            let cos_t = 2.0 * uniform() - 1.0;
            let sin_t = (1.0 - cos_t * cos_t).sqrt();
            let phi = std::f64::consts::TAU * uniform();
            [
                radius * sin_t * phi.cos(),
                radius * sin_t * phi.sin(),
                radius * cos_t,
            ]
        })
        .collect();
    let masses = vec![1.0 / BODIES as f64; BODIES];
    let options = tutti_fmm::FmmOptions::default();
    let evaluate = |count: usize| -> Result<_, Failure> {
        let started = Instant::now();
        let options = options.clone().with_resources(Resources::cpu(count));
        let out = tutti_fmm::fmm(&positions, &masses, &options)?;
        Ok((out, started.elapsed().as_secs_f64()))
    };
    let (single, single_seconds) = evaluate(1)?;
    let (split, split_seconds) = evaluate(devices)?;
    let info = &split.info;
    writeln!(
        text,
        "fmm: {BODIES} Plummer bodies, p = {}, theta = {}: {} cells, {} M2L and {} P2P interactions",
        options.order, options.theta, info.nodes, info.m2l_pairs, info.p2p_pairs
    );
    writeln!(
        text,
        "  1 device {single_seconds:.3} s, {devices} device(s) {split_seconds:.3} s (leaves per device {:?})",
        info.leaves_per_rank
    );
    let identical = single.potential == split.potential && single.accel == split.accel;
    let started = Instant::now();
    let error = tutti_fmm::sampled_error(
        &positions,
        &masses,
        options.softening,
        &split.potential,
        &split.accel,
        1000,
        0,
    )?;
    let accurate = error.accel <= 1e-4 && error.potential <= 1e-4;
    writeln!(
        text,
        "  relative L2 error on 1000 bodies vs the direct sum ({:.3} s): accel {:.2e}, potential {:.2e}: {}",
        started.elapsed().as_secs_f64(),
        error.accel,
        error.potential,
        if accurate { "ok" } else { "FAILED" }
    );
    writeln!(
        text,
        "  the same bits as on one device: {}",
        if identical { "ok" } else { "FAILED" }
    );
    if identical && accurate {
        Ok(json!({
            "bodies": BODIES,
            "samples": error.targets.len(),
            "accel_error": error.accel,
            "potential_error": error.potential,
            "seconds": split_seconds,
            "ok": true,
        }))
    } else {
        Err(Failure::computation(
            "the FMM result was inaccurate or depended on the device count",
        ))
    }
}

/// PySCF 2.14.0's RHF/def2-tzvp energy of the demo's water, made from tutti's shipped
/// def2-tzvp file (crates/tutti-adjoint/tests/data/h2o_def2tzvp.json, `e_rhf`), hartree.
const WATER_DEF2TZVP_PYSCF: f64 = -76.05904289524872;

/// RHF/def2-tzvp of water (d and f functions on O) against PySCF, with each Fock build
/// split among `devices` simulated devices; then J and K of the converged density, threaded
/// on all cores against the serial reference.
fn adjoint_water(text: Text, devices: usize) -> Result<Value, Failure> {
    use tutti_adjoint::fock::FockBuilder;
    use tutti_adjoint::integrals::EriEngine;
    use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};

    // r(OH) = 0.9572 A, angle 104.52 deg: the reference's coordinates, in bohr.
    let water = Molecule::from_bohr(&[
        ("O", [0.0, 0.0, 0.0]),
        ("H", [0.0, 1.4304288084282137, 1.107157044045246]),
        ("H", [0.0, -1.4304288084282137, 1.107157044045246]),
    ])?;
    let set = BasisSet::named("def2-tzvp")?;
    let basis = Basis::new(&water, &set, AngularKind::Spherical)?;
    let devices = devices.max(1);
    let options = ScfOptions::default().with_resources(Resources::cpu(devices));
    let result = rhf(&water, &basis, &options)?;
    let error = (result.energy - WATER_DEF2TZVP_PYSCF).abs();
    writeln!(
        text,
        "adjoint: RHF/def2-tzvp of water, {} AOs, Fock build split among {devices} device(s): E = {:.10} Eh in {} iterations, {:.2} s",
        result.nao, result.energy, result.iterations, result.timings.total
    );
    writeln!(
        text,
        "  PySCF 2.14: {WATER_DEF2TZVP_PYSCF:.10} Eh, |difference| {error:.1e} Eh (target 1e-8): {}",
        if error < 1e-8 { "ok" } else { "FAILED" }
    );
    let engine = EriEngine::new(&basis);
    let builder = FockBuilder::new(&engine, ScfOptions::default().schwarz_threshold);
    let serial = builder.serial(result.density.as_ref());
    // On the global pool: all cores, or RAYON_NUM_THREADS.
    let threaded = builder.threaded(result.density.as_ref());
    let nao = result.nao;
    let (mut largest, mut difference) = (0.0_f64, 0.0_f64);
    for i in 0..nao {
        for j in 0..nao {
            largest = largest
                .max(serial.coulomb[(i, j)].abs())
                .max(serial.exchange[(i, j)].abs());
            difference = difference
                .max((serial.coulomb[(i, j)] - threaded.coulomb[(i, j)]).abs())
                .max((serial.exchange[(i, j)] - threaded.exchange[(i, j)]).abs());
        }
    }
    let relative = difference / largest.max(f64::MIN_POSITIVE);
    writeln!(
        text,
        "  J and K threaded (all cores) vs serial: max difference {relative:.1e} relative (target 1e-12): {}",
        if relative < 1e-12 { "ok" } else { "FAILED" }
    );
    if error < 1e-8 && relative < 1e-12 {
        Ok(json!({
            "energy": result.energy,
            "reference": WATER_DEF2TZVP_PYSCF,
            "difference": error,
            "jk_threaded_difference": relative,
            "seconds": result.timings.total,
            "ok": true,
        }))
    } else {
        Err(Failure::computation(
            "the RHF energy or the threaded Fock build did not reproduce",
        ))
    }
}
