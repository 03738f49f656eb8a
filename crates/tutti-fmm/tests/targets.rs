//! Evaluation at separate targets (`fmm_at_targets`): accuracy against the direct sum, the
//! convention for targets at sources, duplicates, device counts, processes and bad input.

mod common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use tutti_backend::{Kernels, Resources};
use tutti_fmm::{
    direct_at_targets, fmm, fmm_at_targets, fmm_at_targets_on, relative_l2, FmmError, FmmOptions,
    FmmOutput,
};

/// `n` sources in five Gaussian clusters of widths 0.003 to 0.1 around points of the unit
/// cube, strengths of either sign with magnitudes in [0.5, 1.5).
fn clustered_sources(n: usize, seed: u64) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let clusters: Vec<([f64; 3], f64)> = (0..5)
        .map(|_| {
            let center = [0.1, 0.1, 0.1].map(|low: f64| low + 0.8 * rng.random::<f64>());
            (center, 10f64.powf(rng.random_range(-2.5..-1.0)))
        })
        .collect();
    let unit = Normal::new(0.0, 1.0).expect("normal");
    let positions = (0..n)
        .map(|_| {
            let (center, width) = clusters[rng.random_range(0..clusters.len())];
            center.map(|c| c + width * unit.sample(&mut rng))
        })
        .collect();
    let masses = (0..n)
        .map(|_| {
            let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            sign * rng.random_range(0.5..1.5)
        })
        .collect();
    (positions, masses)
}

/// `m` targets: half uniform in the unit cube (among the sources), half uniform in the cube
/// [-1, 2]^3 around it (most of them outside the sources' box).
fn scattered_targets(m: usize, seed: u64) -> Vec<[f64; 3]> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..m)
        .map(|i| {
            let p: [f64; 3] = rng.random();
            if i % 2 == 0 {
                p
            } else {
                p.map(|x| 3.0 * x - 1.0)
            }
        })
        .collect()
}

/// The bits of an output's fields, for bitwise comparisons that also tell -0.0 from 0.0.
fn bits(out: &FmmOutput) -> Vec<[u64; 4]> {
    out.potential
        .iter()
        .zip(&out.accel)
        .map(|(p, a)| [p.to_bits(), a[0].to_bits(), a[1].to_bits(), a[2].to_bits()])
        .collect()
}

/// `fmm_at_targets` on `devices` simulated devices.
fn on(
    devices: usize,
    sources: &[[f64; 3]],
    masses: &[f64],
    targets: &[[f64; 3]],
    options: &FmmOptions,
) -> Result<FmmOutput, FmmError> {
    let options = options.clone().with_resources(Resources::cpu(devices));
    fmm_at_targets(sources, masses, targets, &options)
}

/// Relative L2 errors (accelerations, potentials) of the targets `picked`.
fn errors_of(
    out: &FmmOutput,
    potential: &[f64],
    accel: &[[f64; 3]],
    picked: &[usize],
) -> (f64, f64) {
    let approx_accel: Vec<[f64; 3]> = picked.iter().map(|&t| out.accel[t]).collect();
    let exact_accel: Vec<[f64; 3]> = picked.iter().map(|&t| accel[t]).collect();
    let approx_potential: Vec<[f64; 1]> = picked.iter().map(|&t| [out.potential[t]]).collect();
    let exact_potential: Vec<[f64; 1]> = picked.iter().map(|&t| [potential[t]]).collect();
    (
        relative_l2(&approx_accel, &exact_accel),
        relative_l2(&approx_potential, &exact_potential),
    )
}

#[test]
fn targets_inside_and_outside_the_sources_match_the_direct_sum() {
    let (sources, masses) = clustered_sources(4000, 31);
    let mut targets = scattered_targets(3000, 32);
    // Some targets at sources too: those sources are left out of their sums.
    targets.extend(sources.iter().step_by(80).copied());
    let groups: [(&str, Vec<usize>); 3] = [
        ("inside", (0..3000).step_by(2).collect()),
        ("outside", (1..3000).step_by(2).collect()),
        ("at sources", (3000..targets.len()).collect()),
    ];
    // p = 12 and theta = 0.3 (theta^(p+1) = 1.6e-7 per M2L at worst) for errors near 1e-8.
    // Measured relative L2 errors per group, accelerations / potentials: without softening
    // 5.2e-10 / 4.4e-10 inside, 2.4e-9 / 8.3e-10 outside (weaker fields of cancelling
    // signed strengths), 2.5e-11 / 2.9e-11 at sources; with softening 0.01 (its expansions
    // converge more slowly near clusters narrower than it) 5.5e-9 / 4.2e-10, 5.7e-9 /
    // 8.3e-10 and 3.7e-10 / 5.1e-11. At theta 0.35 the worst grows to 5.4e-8: 2e-8 bounds
    // every group with a margin of 3.5 over the worst measured.
    for softening in [0.0, 0.01] {
        let options = FmmOptions::default()
            .with_order(12)
            .with_theta(0.3)
            .with_softening(softening);
        let out = fmm_at_targets(&sources, &masses, &targets, &options).expect("fmm");
        assert_eq!(out.info.targets, targets.len());
        assert_eq!(
            out.info.bodies,
            sources.len() + 3000,
            "one body per new position"
        );
        assert!(out.info.m2l_pairs > 0, "the far field is used");
        assert_eq!(out.potential.len(), targets.len());
        let (potential, accel) =
            direct_at_targets(&sources, &masses, &targets, softening).expect("direct");
        for (name, picked) in &groups {
            let (ea, ep) = errors_of(&out, &potential, &accel, picked);
            println!("softening {softening}, {name}: accel {ea:.3e}, potential {ep:.3e}");
            assert!(
                ea <= 2e-8 && ep <= 2e-8,
                "softening {softening}, {name}: {ea} {ep}"
            );
        }
    }
}

/// Targets all at sources (in another order, some twice, one written with -0.0 where the
/// source has 0.0) add no body: the tree is `fmm`'s, and each target gets bitwise the field
/// `fmm` gives its source, which is the direct sum without that source.
#[test]
fn a_target_at_a_source_gets_that_sources_own_field() {
    let (mut sources, masses) = clustered_sources(3000, 41);
    sources[17] = [0.0, 0.5, 0.25];
    let mut picked: Vec<usize> = (0..sources.len()).rev().step_by(7).collect();
    picked.extend([17, 3, 3]);
    let mut targets: Vec<[f64; 3]> = picked.iter().map(|&i| sources[i]).collect();
    targets.push([-0.0, 0.5, 0.25]);
    picked.push(17);
    for softening in [0.0, 0.01] {
        let options = FmmOptions::default().with_softening(softening);
        let plain = fmm(&sources, &masses, &options).expect("fmm");
        let out = fmm_at_targets(&sources, &masses, &targets, &options).expect("targets");
        assert_eq!(out.info.bodies, sources.len());
        assert_eq!(out.info.nodes, plain.info.nodes);
        for (t, &i) in picked.iter().enumerate() {
            assert_eq!(
                out.potential[t].to_bits(),
                plain.potential[i].to_bits(),
                "target {t} at source {i}"
            );
            assert_eq!(
                out.accel[t].map(f64::to_bits),
                plain.accel[i].map(f64::to_bits)
            );
        }
        // The reference leaves out the source at the target: bitwise the direct sum over
        // every other body (distinct positions, the same sources in the same order).
        let (potential, accel) =
            direct_at_targets(&sources, &masses, &targets, softening).expect("direct");
        let (body_potential, body_accel) =
            tutti_fmm::direct_sum(&sources, &masses, softening, &picked).expect("direct_sum");
        assert_eq!(potential, body_potential);
        assert_eq!(accel, body_accel);
        let (ea, ep) = common::errors(&out, &potential, &accel);
        println!("softening {softening}: accel {ea:.3e}, potential {ep:.3e}");
        assert!(ea <= 1e-4 && ep <= 1e-4, "{ea} {ep}");
    }
}

/// With softening two sources may share a position; a target there leaves both out (as the
/// direct reference does). Without softening they are an error, target or not.
#[test]
fn several_sources_at_a_target() {
    let (mut sources, mut masses) = common::uniform(40, 42);
    sources[7] = sources[3];
    masses[7] = -2.5;
    let targets = [sources[3], [0.5, 0.5, 0.5], sources[3]];
    // theta tiny: everything is near field, so the FMM is the direct sum up to rounding.
    let options = FmmOptions::default()
        .with_theta(1e-6)
        .with_leaf_size(4)
        .with_softening(0.1);
    let out = fmm_at_targets(&sources, &masses, &targets, &options).expect("softened");
    let (potential, accel) = direct_at_targets(&sources, &masses, &targets, 0.1).expect("direct");
    let (ea, ep) = common::errors(&out, &potential, &accel);
    assert!(ea <= 1e-13 && ep <= 1e-13, "{ea} {ep}");
    assert_eq!(bits(&out)[0], bits(&out)[2]);

    let error = fmm_at_targets(&sources, &masses, &targets, &options.with_softening(0.0))
        .expect_err("coincident sources");
    assert!(
        matches!(
            error,
            FmmError::CoincidentBodies {
                first: 3,
                second: 7,
                ..
            }
        ),
        "{error}"
    );
    let error = fmm_at_targets(&sources, &masses, &[[9.0; 3]], &FmmOptions::default())
        .expect_err("coincident sources, no target there");
    assert!(error.to_string().contains("bodies 3 and 7"), "{error}");
}

/// Duplicate targets (at sources or not, 0.0 and -0.0) give bitwise equal fields, and no
/// field is NaN, even for distinct targets so close that their squared distance underflows
/// (those are summed directly).
#[test]
fn duplicate_targets_are_bitwise_equal_and_nothing_is_nan() {
    let (sources, masses) = clustered_sources(2000, 51);
    let mut targets = scattered_targets(500, 52);
    let repeated: Vec<[f64; 3]> = targets.iter().step_by(3).copied().collect();
    targets.extend(&repeated);
    targets.extend(sources.iter().step_by(50).copied());
    targets.extend(sources.iter().step_by(50).copied());
    targets.extend([[0.0, -0.0, 0.3], [-0.0, 0.0, 0.3], [0.0, 0.0, 0.3]]);
    for softening in [0.0, 0.01] {
        let options = FmmOptions::default().with_softening(softening);
        let out = fmm_at_targets(&sources, &masses, &targets, &options).expect("fmm");
        let fields = bits(&out);
        for (t, target) in targets.iter().enumerate() {
            let first = targets.iter().position(|u| u == target).expect("itself");
            assert_eq!(fields[t], fields[first], "target {t} and {first}");
        }
        assert!(out.potential.iter().all(|p| p.is_finite()));
        assert!(out.accel.iter().flatten().all(|a| a.is_finite()));
    }

    // 1e-170 apart: the squared distance underflows to 0, and a body of strength 0 would
    // add 0 * inf. These targets' values are the direct sums, bit for bit.
    let near_zero = [[1e-170, 0.0, 0.0], [2e-170, 0.0, 0.0], [0.0, 1e-170, 0.0]];
    let sources = [[0.5, 0.0, 0.0], [0.0, -0.25, 0.125], [1.0, 1.0, 1.0]];
    let masses = [1.0, -2.0, 0.5];
    let out = fmm_at_targets(&sources, &masses, &near_zero, &FmmOptions::default()).expect("fmm");
    let (potential, accel) = direct_at_targets(&sources, &masses, &near_zero, 0.0).expect("direct");
    assert_eq!(out.potential, potential);
    assert_eq!(out.accel, accel);
    assert!(out.potential.iter().all(|p| p.is_finite()));
}

/// 1, 2 and 3 simulated devices, and the device kernels' host twins, give the same bits.
#[test]
fn device_counts_and_kernels_do_not_change_a_bit() {
    let (sources, masses) = clustered_sources(5000, 61);
    let mut targets = scattered_targets(3000, 62);
    targets.extend(sources.iter().step_by(10).copied());
    let options = FmmOptions::default().with_softening(1e-3);
    let one = on(1, &sources, &masses, &targets, &options).expect("one device");
    for devices in 2..=3 {
        let many = on(devices, &sources, &masses, &targets, &options).expect("devices");
        assert_eq!(many.info.ranks, devices);
        assert!(
            many.info.leaves_per_rank.iter().all(|&l| l > 0),
            "{:?}",
            many.info
        );
        assert_eq!(bits(&many), bits(&one), "{devices} devices");
    }
    let twins = on(
        2,
        &sources,
        &masses,
        &targets,
        &options.clone().with_kernels(Kernels::Always),
    )
    .expect("kernels");
    assert_eq!(twins.info.kernel_ranks, 2);
    assert_eq!(bits(&twins), bits(&one), "device kernels' host twins");
}

/// Processes (threads over the loopback wire, each with its own spanning group) give
/// bitwise the output of as many threads; no targets is an empty run on every process.
#[test]
fn processes_give_bitwise_the_output_of_threads() {
    let (sources, masses) = clustered_sources(2000, 71);
    let targets = scattered_targets(1000, 72);
    let options = FmmOptions::default();
    let threads = on(2, &sources, &masses, &targets, &options).expect("threads");
    let processes = tutti_mpi::on_loopback_processes(2, |group| {
        let out =
            fmm_at_targets_on(group, &sources, &masses, &targets, &options).expect("processes");
        let empty = fmm_at_targets_on(group, &sources, &masses, &[], &options).expect("no targets");
        (out, empty)
    })
    .expect("simulated devices");
    for (out, empty) in &processes {
        assert_eq!(bits(out), bits(&threads));
        assert_eq!(out.info.leaves_per_rank, threads.info.leaves_per_rank);
        assert!(empty.potential.is_empty() && empty.accel.is_empty());
    }
}

#[test]
fn bad_and_empty_input() {
    let (sources, masses) = common::uniform(100, 81);
    let options = FmmOptions::default();
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let targets = [[0.5; 3], [0.1, 0.2, 0.3], [0.0, 0.0, bad]];
        let error = fmm_at_targets(&sources, &masses, &targets, &options).expect_err("bad");
        assert!(
            matches!(
                error,
                FmmError::NonFinite {
                    argument: "targets",
                    index: 2,
                    ..
                }
            ),
            "{error}"
        );
        assert!(
            error.to_string().contains("`targets` of body 2 is"),
            "{error}"
        );
        let direct_error = direct_at_targets(&sources, &masses, &targets, 0.0).expect_err("bad");
        assert_eq!(direct_error.to_string(), error.to_string());
    }
    let error = fmm_at_targets(&sources, &masses[1..], &[[0.5; 3]], &options).expect_err("lengths");
    assert!(matches!(error, FmmError::LengthMismatch { .. }), "{error}");
    let error = fmm_at_targets(
        &sources,
        &masses,
        &[[0.5; 3]],
        &options.clone().with_order(0),
    )
    .expect_err("order");
    assert!(error.to_string().contains("`order`"), "{error}");

    let out = fmm_at_targets(&sources, &masses, &[], &options).expect("no targets");
    assert!(out.potential.is_empty() && out.accel.is_empty());
    assert_eq!((out.info.targets, out.info.bodies), (0, 0));
    let targets = [[0.5; 3], [2.0, 0.0, 0.0]];
    let out = fmm_at_targets(&[], &[], &targets, &options).expect("no sources");
    assert_eq!(out.potential, vec![0.0; 2]);
    assert_eq!(out.accel, vec![[0.0; 3]; 2]);
    assert_eq!(out.info.targets, 2);
    assert!(fmm_at_targets(&[], &[], &[], &options)
        .expect("nothing")
        .potential
        .is_empty());
    // Plain `fmm` evaluates no targets.
    assert_eq!(
        fmm(&sources, &masses, &options).expect("fmm").info.targets,
        0
    );
    // A lone source and a target elsewhere: one exact pair.
    let out =
        fmm_at_targets(&[[1.0, 0.0, 0.0]], &[2.0], &[[0.0, 0.0, 0.0]], &options).expect("one pair");
    assert_eq!(out.potential, vec![-2.0]);
    assert_eq!(out.accel, vec![[2.0, 0.0, 0.0]]);
}
