//! A fixed workload for profiling the sweep: the XXZ MPO applied to a random MPS.
//!
//! `cargo run --release -p tutti-sweep --example profile_src -- N D_PSI [REPEATS] [exact]`
//! runs SRC (chi = D_psi, plain path) `REPEATS` times and prints the times; with `exact`,
//! `compress_exact` once as well. Meant for `valgrind --tool=callgrind` on a reduced case.

use std::time::Instant;

use tutti_sweep::{compress_exact, heisenberg_xxz, src, Layer, SrcOptions, TensorTrain, TrainKind};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args.first().map_or(Ok(16), |a| a.parse())?;
    let bond: usize = args.get(1).map_or(Ok(32), |a| a.parse())?;
    let repeats: usize = args.get(2).map_or(Ok(1), |a| a.parse())?;
    let exact = args.iter().any(|a| a == "exact");
    // A fixed pseudo-random MPS (xorshift), rows scaled to keep the norm near 1.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut draw = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    };
    let cores = (0..n)
        .map(|k| {
            let left = if k == 0 { 1 } else { bond };
            let right = if k + 1 == n { 1 } else { bond };
            let scale = (3.0 / (2 * left) as f64).sqrt();
            let data = (0..left * 2 * right).map(|_| scale * draw()).collect();
            (vec![left, 2, right], data)
        })
        .collect();
    let psi = TensorTrain::<f64>::from_arrays(TrainKind::Mps, cores)?;
    let h = heisenberg_xxz(n, 1.0, 0.5, 0.0)?;
    let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
    let options = SrcOptions::new(bond).with_seed(1);
    for _ in 0..repeats {
        let (_, info) = src(&layers, &options)?;
        println!("src: {:.4} s, norm {:.6}", info.seconds, info.norm);
    }
    if exact {
        let started = Instant::now();
        let (_, info) = compress_exact(&layers, bond, 0.0)?;
        println!(
            "exact: {:.4} s, optimal error {:.6}",
            started.elapsed().as_secs_f64(),
            info.relative_error
        );
    }
    Ok(())
}
