//! The P2P kernel's host twin against the host near field, bit for bit.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_backend::{Device, Resources};

use super::*;
use crate::evaluate::Shared;
use crate::near::near_field;
use crate::operators::l2p;
use crate::{Kernels, Precision};

/// `n` bodies from `seed`: uniform in the unit cube, or in a few tight clusters; strengths
/// of either sign spanning 12 orders of magnitude.
fn bodies(n: usize, seed: u64, clustered: bool) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centers: Vec<[f64; 3]> = (0..4).map(|_| rng.random::<[f64; 3]>()).collect();
    let positions = (0..n)
        .map(|_| {
            let p: [f64; 3] = rng.random();
            if clustered {
                let c = centers[rng.random_range(0..centers.len())];
                let width = 10f64.powf(rng.random_range(-4.0..-1.0));
                [0, 1, 2].map(|d| c[d] + width * (p[d] - 0.5))
            } else {
                p
            }
        })
        .collect();
    let masses = (0..n)
        .map(|_| {
            let sign = if rng.random_bool(0.2) { -1.0 } else { 1.0 };
            sign * 10f64.powf(rng.random_range(-6.0..6.0))
        })
        .collect();
    (positions, masses)
}

fn devices(n: usize) -> Vec<Device> {
    Resources::cpu(n).select().expect("simulated devices")
}

fn same_bits(a: &[Field], b: &[Field]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} fields vs {}", a.len(), b.len()));
    }
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let bits = |f: &Field| [f.psi, f.grad[0], f.grad[1], f.grad[2]].map(f64::to_bits);
        if bits(x) != bits(y) {
            return Err(format!("body {i}: {x:?} vs {y:?}"));
        }
    }
    Ok(())
}

/// For every rank of `ranks`: the host near field (L2P of random locals plus P2P, in chunks
/// of `p2p_chunk` staged sources) and the kernel launched on that rank's simulated device
/// starting from the same L2P values; they must agree bit for bit.
fn check_twin_matches_near_field(
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
    ranks: usize,
    p2p_chunk: usize,
    seed: u64,
) -> Result<(), String> {
    let setup = Setup::build(positions, masses, options, ranks);
    let shared = Shared {
        tree: &setup.tree,
        lists: &setup.lists,
        basis: &setup.basis,
        partition: &setup.partition,
        wanted: None,
        softening2: options.softening * options.softening,
        precision: options.far_field,
        m2l_chunk: 1 << 20,
        p2p_chunk,
        kernels: crate::Kernels::Never,
        fma: false,
        progress: None,
    };
    let (tree, basis, t) = (&setup.tree, &setup.basis, setup.basis.len());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let locals: Vec<f64> = (0..tree.nodes.len() * t)
        .map(|_| rng.random_range(-1e-3..1e-3))
        .collect();
    let columns = BodyColumns::new(tree);
    let mut powers = vec![0.0; t];
    for (me, device) in devices(ranks).iter().enumerate() {
        let (bodies, host, _) = near_field(&shared, me, &locals).map_err(|e| e.to_string())?;
        let leaves = setup.partition.leaf_ranges[me].clone();
        if bodies != leaf_bodies(tree, leaves.clone()) {
            return Err(format!("rank {me}: bodies {bodies:?}"));
        }
        let mut initial = Vec::with_capacity(bodies.len());
        for &leaf in &tree.leaves[leaves.clone()] {
            let node = &tree.nodes[leaf as usize];
            let local = &locals[leaf as usize * t..(leaf as usize + 1) * t];
            for &x in &tree.positions[node.begin..node.end] {
                initial.push(l2p(basis, local, node.center, x, &mut powers));
            }
        }
        let launched = p2p_on_device(
            device,
            tree,
            &setup.lists,
            &columns,
            leaves,
            initial,
            shared.softening2,
            &P2P_MODULE,
        )
        .map_err(|e| e.to_string())?;
        same_bits(&launched, &host).map_err(|e| format!("rank {me} of {ranks}: {e}"))?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn the_twin_equals_the_host_near_field_bitwise(
        n in 1_usize..700,
        seed in any::<u64>(),
        clustered in any::<bool>(),
        leaf_size in 1_usize..48,
        ranks in 1_usize..=4,
        softened in any::<bool>(),
        p2p_chunk in prop::sample::select(vec![1_usize, 97, 1 << 30]),
    ) {
        let (positions, masses) = bodies(n, seed, clustered);
        let options = FmmOptions::default()
            .with_leaf_size(leaf_size)
            .with_order(3)
            .with_softening(if softened { 1e-3 } else { 0.0 });
        check_twin_matches_near_field(&positions, &masses, &options, ranks, p2p_chunk, seed)
            .map_err(TestCaseError::fail)?;
    }
}

#[test]
fn leaves_larger_than_a_block_are_strided_over() {
    // max_depth 1 keeps 2000 clustered bodies in at most 8 leaves, most of them over BLOCK.
    let (positions, masses) = bodies(2000, 7, true);
    let options = FmmOptions::default().with_max_depth(1).with_order(2);
    let setup = Setup::build(&positions, &masses, &options, 1);
    let largest = setup
        .tree
        .leaves
        .iter()
        .map(|&l| setup.tree.nodes[l as usize].bodies())
        .max()
        .unwrap_or(0);
    assert!(largest > BLOCK as usize, "largest leaf {largest}");
    check_twin_matches_near_field(&positions, &masses, &options, 2, 1 << 30, 3)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn the_p2p_near_field_is_the_direct_sum_over_near_pairs_on_any_number_of_devices() {
    let (positions, masses) = bodies(1500, 11, false);
    let options = FmmOptions::default()
        .with_leaf_size(16)
        .with_softening(1e-2);
    let (phi1, acc1) =
        p2p_near_field(&positions, &masses, &options, &devices(1), &P2P_MODULE).expect("p2p");
    let (phi3, acc3) =
        p2p_near_field(&positions, &masses, &options, &devices(3), &P2P_MODULE).expect("p2p");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&phi1), bits(&phi3));
    assert_eq!(
        bits(&acc1.concat()),
        bits(&acc3.concat()),
        "accelerations on 1 and 3 devices"
    );

    // Against a plain sum over the same near pairs, in input order.
    let setup = Setup::build(&positions, &masses, &options, 1);
    let tree = &setup.tree;
    let eps2 = options.softening * options.softening;
    let mut worst: f64 = 0.0;
    for &leaf in &tree.leaves {
        let node = &tree.nodes[leaf as usize];
        for b in node.begin..node.end {
            let mut exact = Field::default();
            for &s in setup.lists.p2p_of(leaf as usize) {
                let source = &tree.nodes[s as usize];
                for j in (source.begin..source.end).filter(|&j| j != b) {
                    crate::kernel::add_source(
                        &mut exact,
                        &tree.positions[b],
                        &tree.positions[j],
                        tree.masses[j],
                        eps2,
                    );
                }
            }
            let input = tree.input_index[b];
            let scale = exact.psi.abs().max(1e-300);
            worst = worst.max((phi1[input] + exact.psi).abs() / scale);
        }
    }
    assert!(worst < 1e-12, "worst relative potential error {worst:e}");
}

#[test]
fn the_twin_rejects_leaves_that_share_bodies() {
    let (positions, masses) = bodies(300, 5, false);
    let options = FmmOptions::default().with_leaf_size(8);
    let setup = Setup::build(&positions, &masses, &options, 1);
    let tree = &setup.tree;
    let device = &devices(1)[0];
    let leaf = tree.leaves[0];
    let node = &tree.nodes[leaf as usize];
    let run = |leaves: &[u32]| -> Result<(), BackendError> {
        let list = setup.lists.p2p_of(leaf as usize);
        let starts: Vec<u64> = (0..=leaves.len() as u64)
            .map(|k| k * list.len() as u64)
            .collect();
        let sources: Vec<u32> = leaves.iter().flat_map(|_| list.iter().copied()).collect();
        let columns = BodyColumns::new(tree);
        let begin: Vec<u64> = tree.nodes.iter().map(|n| n.begin as u64).collect();
        let end: Vec<u64> = tree.nodes.iter().map(|n| n.end as u64).collect();
        let up = |v: &[f64]| device.upload(v);
        let (x, y, z, m) = (
            up(&columns.x)?,
            up(&columns.y)?,
            up(&columns.z)?,
            up(&columns.m)?,
        );
        let mut f: Vec<_> = (0..4)
            .map(|_| device.alloc_zeros::<f64>(node.bodies()))
            .collect::<Result<_, _>>()?;
        let [psi, gx, gy, gz] = &mut f[..] else {
            unreachable!()
        };
        let (leaves_b, starts_b, sources_b) = (
            device.upload(leaves)?,
            device.upload(&starts)?,
            device.upload(&sources)?,
        );
        let (begin_b, end_b) = (device.upload(&begin)?, device.upload(&end)?);
        device.launch(
            &P2P_MODULE,
            P2P_ENTRY,
            LaunchDims::linear(leaves.len() as u64, 1)?,
            &mut [
                Arg::u32(leaves.len() as u32),
                Arg::input(&leaves_b),
                Arg::input(&starts_b),
                Arg::input(&sources_b),
                Arg::input(&begin_b),
                Arg::input(&end_b),
                Arg::input(&x),
                Arg::input(&y),
                Arg::input(&z),
                Arg::input(&m),
                Arg::f64(0.0),
                Arg::u64(node.begin as u64),
                Arg::output(psi),
                Arg::output(gx),
                Arg::output(gy),
                Arg::output(gz),
            ],
        )
    };
    run(&[leaf]).expect("one leaf");
    let err = run(&[leaf, leaf]).expect_err("the same leaf twice");
    assert!(err.to_string().contains("share bodies"), "{err}");
}

/// The bits of an evaluation's potentials and accelerations, or its error's text.
fn evaluation_bits(
    positions: &[[f64; 3]],
    masses: &[f64],
    options: &FmmOptions,
) -> Result<Vec<u64>, String> {
    let out = crate::fmm(positions, masses, options).map_err(|e| e.to_string())?;
    Ok(out
        .potential
        .iter()
        .chain(out.accel.iter().flatten())
        .map(|x| x.to_bits())
        .collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// The whole evaluation through the device path (M2L and P2P launched, on simulated
    /// devices their twins) gives the host path's bits, for either precision, any chunking
    /// and 1..4 ranks.
    #[test]
    fn the_device_path_equals_the_host_path_bitwise(
        n in 1_usize..500,
        seed in any::<u64>(),
        clustered in any::<bool>(),
        leaf_size in 1_usize..40,
        order in 1_usize..=6,
        ranks in 1_usize..=4,
        softened in any::<bool>(),
        f32_far_field in any::<bool>(),
        fma in any::<bool>(),
        chunk_items in prop::sample::select(vec![None, Some(1_usize), Some(7), Some(64)]),
    ) {
        let (positions, masses) = bodies(n, seed, clustered);
        let mut options = FmmOptions::default()
            .with_leaf_size(leaf_size)
            .with_order(order)
            .with_softening(if softened { 1e-3 } else { 0.0 })
            .with_far_field(if f32_far_field { Precision::F32 } else { Precision::F64 })
            .with_fused_multiply_add(fma)
            .with_resources(Resources::cpu(ranks));
        if let Some(items) = chunk_items {
            options = options.with_chunk_items(items);
        }
        let host = evaluation_bits(&positions, &masses, &options.clone().with_kernels(Kernels::Never));
        let device = evaluation_bits(&positions, &masses, &options.with_kernels(Kernels::Always));
        prop_assert!(host == device, "host {:?} vs device {:?}", host.err(), device.err());
    }
}

#[test]
fn coincident_bodies_are_reported_alike_on_both_paths() {
    let (mut positions, masses) = bodies(400, 21, false);
    positions[250] = positions[17];
    for ranks in [1, 3] {
        let options = FmmOptions::default()
            .with_leaf_size(8)
            .with_resources(Resources::cpu(ranks));
        let host = crate::fmm(
            &positions,
            &masses,
            &options.clone().with_kernels(Kernels::Never),
        )
        .expect_err("coincident bodies on the host path");
        let device = crate::fmm(&positions, &masses, &options.with_kernels(Kernels::Always))
            .expect_err("coincident bodies on the device path");
        assert!(
            matches!(
                host,
                FmmError::CoincidentBodies {
                    first: 17,
                    second: 250,
                    ..
                }
            ),
            "{host}"
        );
        assert_eq!(host.to_string(), device.to_string());
    }
}

#[test]
fn auto_runs_the_host_code_on_simulated_devices_and_always_the_kernels() {
    let (positions, masses) = bodies(600, 8, true);
    let options = FmmOptions::default()
        .with_leaf_size(16)
        .with_chunk_items(50)
        .with_resources(Resources::cpu(2));
    let run = |kernels| {
        crate::fmm(&positions, &masses, &options.clone().with_kernels(kernels))
            .expect("evaluation")
            .info
    };
    let (auto, never, always) = (
        run(Kernels::Auto),
        run(Kernels::Never),
        run(Kernels::Always),
    );
    // The host near field stages at most 50 source bodies per chunk; the device path
    // launches each rank's P2P once.
    assert!(auto.p2p_chunks > 1, "{auto:?}");
    assert_eq!(auto.p2p_chunks, never.p2p_chunks);
    assert_eq!(always.p2p_chunks, 1);
    assert_eq!(always.m2l_chunks, never.m2l_chunks);
}

/// Launches the f64 contraction over `run_start` on one group table whose groups all have
/// target 1 and one source, node 0, with the basis's M2L table, its first list lengthened by
/// `longer` entries.
fn contract_with_runs(run_start: &[u32], longer: u32) -> Result<(), BackendError> {
    let device = &devices(1)[0];
    let terms = crate::basis::terms(2);
    let basis = crate::basis::Basis::new(2);
    let groups = run_start.last().copied().unwrap_or(0) as usize;
    let table: Vec<u32> = (0..groups).flat_map(|_| [1, 0, 0, 0, 0, 1]).collect();
    let m2l_start: Vec<u32> = basis
        .m2l_start
        .iter()
        .enumerate()
        .map(|(k, &s)| s as u32 + if k > 0 { longer } else { 0 })
        .collect();
    let mut m2l: Vec<u32> = basis.m2l.iter().map(|&i| u32::from(i)).collect();
    m2l.splice(0..0, (0..longer).map(|_| 0));
    let multipoles = device.upload(&vec![1.0; 2 * terms])?;
    let derivatives = device.upload(&vec![0.5; groups * terms * 4])?;
    let mut locals = device.alloc_zeros::<f64>(2 * terms)?;
    let runs = run_start.len() as u32 - 1;
    device.launch(
        &M2L_MODULE,
        M2L_CONTRACT_F64_ENTRY,
        LaunchDims::linear(u64::from(runs), 1)?,
        &mut [
            Arg::u32(runs),
            Arg::u32(terms as u32),
            Arg::input(&device.upload(run_start)?),
            Arg::input(&device.upload(&table)?),
            Arg::input(&device.upload(&m2l_start)?),
            Arg::input(&device.upload(&m2l)?),
            Arg::input(&multipoles),
            Arg::input(&derivatives),
            Arg::output(&mut locals),
        ],
    )
}

#[test]
fn the_contraction_twin_rejects_runs_that_share_a_target() {
    contract_with_runs(&[0, 2], 0).expect("one run of two groups");
    let err = contract_with_runs(&[0, 1, 2], 0).expect_err("two runs, one target");
    assert!(err.to_string().contains("share target 1"), "{err}");
}

#[test]
fn the_contraction_twin_rejects_a_list_longer_than_an_expansion() {
    // The first coefficient's list covers every multipole entry: one more would read past a
    // source's multipole (on a GPU, into the next node's or past the buffer).
    let err = contract_with_runs(&[0, 1], 1).expect_err("a list of terms + 1 entries");
    assert!(err.to_string().contains("m2l table out of range"), "{err}");
}
