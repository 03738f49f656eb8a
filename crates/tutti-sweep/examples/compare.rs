//! Compares SRC with the exact baseline on a stack read from train directories.
//!
//! `cargo run --release -p tutti-sweep --example compare -- CHI OVERSAMPLE SEEDS DIR [DIR ...]`
//! prints, per seed, SRC's relative error against the exact product and its time, then the
//! optimal (exact contraction + SVD) error and time.

use std::time::Instant;

use tutti_sweep::{
    compress_exact, distance, exact_product, norm, src, Layer, NpyTrain, SrcOptions,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 4 {
        return Err("usage: compare CHI OVERSAMPLE SEEDS DIR [DIR ...]".into());
    }
    let chi: usize = args[0].parse()?;
    let oversample: usize = args[1].parse()?;
    let seeds: u64 = args[2].parse()?;
    let trains = args[3..]
        .iter()
        .map(NpyTrain::open)
        .collect::<Result<Vec<_>, _>>()?;
    let layers: Vec<&dyn Layer<f64>> = trains.iter().map(|t| t as &dyn Layer<f64>).collect();
    let exact = exact_product(&layers)?;
    let scale = norm(&exact);
    for seed in 0..seeds {
        let options = SrcOptions::new(chi)
            .with_seed(seed)
            .with_oversample(oversample);
        let (out, info) = src(&layers, &options)?;
        let err = distance(&out, &exact)? / scale;
        println!(
            "src seed {seed}: rel err {err:.6} time {:.3} s",
            info.seconds
        );
    }
    let started = Instant::now();
    let (_, info) = compress_exact(&layers, chi, 0.0)?;
    println!(
        "exact: optimal rel err {:.6} time {:.3} s (norm {scale:.6})",
        info.relative_error,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
