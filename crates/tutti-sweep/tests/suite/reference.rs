//! Agreement with the shared reference data (tests/data, copied from the peer code's outputs)
//! and near-optimality against the exact SVD truncation.

use crate::common::random_train;
use tutti_sweep::{
    compress_exact, distance, exact_product, heisenberg_xxz, norm, src, Layer, NpyTrain,
    SrcOptions, TensorTrain, TrainKind,
};

fn data(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

fn reference(case: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(data(&format!("{case}/ref.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn floats(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn random_small_matches_the_reference() {
    let reference = reference("random_small");
    let h = NpyTrain::open(data("random_small/mpo")).unwrap();
    let psi = NpyTrain::open(data("random_small/mps")).unwrap();
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let chi = reference["chi"].as_u64().unwrap() as usize;

    // ||H psi|| by contraction, and the optimal error by exact contraction + SVD.
    let exact = exact_product(&layers).unwrap();
    let norm_hpsi = norm(&exact);
    let ref_norm = reference["norm_hpsi"].as_f64().unwrap();
    assert!(
        (norm_hpsi - ref_norm).abs() < 1e-12 * ref_norm,
        "{norm_hpsi} vs {ref_norm}"
    );
    let (optimal, info) = compress_exact(&layers, chi, 0.0).unwrap();
    let ref_opt = reference["optimal_err"].as_f64().unwrap();
    assert!(
        (info.relative_error - ref_opt).abs() < 1e-10,
        "{} vs {ref_opt}",
        info.relative_error
    );
    let measured = distance(&optimal, &exact).unwrap() / norm_hpsi;
    assert!((measured - ref_opt).abs() < 1e-10);

    // SRC over 5 seeds, without and with oversampling (10), against the reference's range.
    for (oversample, key) in [(0, "qr_errs"), (10, "trunc_errs")] {
        let ref_errs = floats(&reference["src"][key]);
        let ref_mean = ref_errs.iter().sum::<f64>() / ref_errs.len() as f64;
        let errs: Vec<f64> = (0..5)
            .map(|seed| {
                let options = SrcOptions::new(chi)
                    .with_seed(seed)
                    .with_oversample(oversample);
                let (out, info) = src(&layers, &options).unwrap();
                assert!(info.bonds.iter().all(|&b| b <= chi));
                distance(&out, &exact).unwrap() / norm_hpsi
            })
            .collect();
        let mean = errs.iter().sum::<f64>() / errs.len() as f64;
        println!("random_small oversample {oversample}: errs {errs:.4?} mean {mean:.4}; reference {key} {ref_errs:.4?} mean {ref_mean:.4}; optimal {ref_opt:.4}");
        assert!(errs.iter().all(|&e| e >= ref_opt * (1.0 - 1e-9)));
        assert!(
            mean < 1.5 * ref_mean && mean > ref_mean / 1.5,
            "mean {mean} vs {ref_mean}"
        );
    }
}

#[test]
fn src_is_near_optimal_on_a_decaying_spectrum() {
    // psi: Gaussian cores scaled by 0.6^b on the right bond index b; H: by 0.5^b. Exact product
    // bond 3 * 12 = 36, compressed to chi = 10.
    let n = 10;
    let psi: TensorTrain<f64> = random_train(TrainKind::Mps, &vec![(2, 1); n], 12, 0.6, 11);
    let h: TensorTrain<f64> = random_train(TrainKind::Mpo, &vec![(2, 2); n], 3, 0.5, 12);
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let chi = 10;
    let exact = exact_product(&layers).unwrap();
    let (_, info) = compress_exact(&layers, chi, 0.0).unwrap();
    let optimal = info.relative_error;
    let median_ratio = |oversample: usize| {
        let mut ratios: Vec<f64> = (0..10)
            .map(|seed| {
                let options = SrcOptions::new(chi)
                    .with_seed(seed)
                    .with_oversample(oversample);
                let (out, _) = src(&layers, &options).unwrap();
                distance(&out, &exact).unwrap() / info.norm / optimal
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        println!("decaying spectrum, oversample {oversample}: optimal rel err {optimal:.3e}; SRC/optimal ratios {ratios:.3?}");
        0.5 * (ratios[4] + ratios[5])
    };
    assert!(optimal > 1e-8, "the case must be truncated: {optimal:e}");
    let plain = median_ratio(0);
    let oversampled = median_ratio(5);
    println!("median ratio: plain {plain:.3}, oversample 5: {oversampled:.3}");
    assert!(plain <= 4.0, "median ratio {plain}");
    assert!(
        oversampled <= 1.5,
        "median ratio with oversampling {oversampled}"
    );
}

#[test]
fn heisenberg_matches_the_shared_mpo_file() {
    let reference = reference("heisenberg");
    let n = reference["n"].as_u64().unwrap() as usize;
    let model = &reference["model"];
    let built = heisenberg_xxz(
        n,
        model["J"].as_f64().unwrap(),
        model["Delta"].as_f64().unwrap(),
        model["h"].as_f64().unwrap(),
    )
    .unwrap();
    let file: TensorTrain<f64> = NpyTrain::open(data("heisenberg/mpo"))
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(built.shapes(), file.shapes());
    for (site, (a, b)) in built.cores().iter().zip(file.cores()).enumerate() {
        let worst = a
            .data
            .iter()
            .zip(&b.data)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(worst == 0.0, "site {site}: largest difference {worst}");
    }
}
