//! One far outlier beside N bodies in the unit cube (finding M6 of the hardening review):
//! the FMM time with and without a body at 1e15, their ratio (about 1 when the tree adapts
//! to each cell's own bodies; the old fixed Morton grid put the cube into one leaf, an
//! O(N^2) direct sum), and the tree shape of both.
//!
//! ```sh
//! cargo run --release -p tutti-benches --bin fmm_outlier               # N = 80000
//! cargo run --release -p tutti-benches --bin fmm_outlier -- 200000
//! ```

use std::error::Error;

use tutti_benches::{best_time, SplitMix};
use tutti_fmm::{fmm, FmmOptions};

fn main() -> Result<(), Box<dyn Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 80_000,
    };
    let mut rng = SplitMix(2026);
    let positions: Vec<[f64; 3]> = (0..n)
        .map(|_| [rng.next_unit(), rng.next_unit(), rng.next_unit()])
        .collect();
    let masses = vec![1.0; n];
    let mut far_positions = positions.clone();
    far_positions.push([1e15, 0.0, 0.0]);
    let mut far_masses = masses.clone();
    far_masses.push(1.0);
    let options = FmmOptions::default();
    let (plain_time, plain) = best_time(3, || fmm(&positions, &masses, &options));
    let (far_time, far) = best_time(3, || fmm(&far_positions, &far_masses, &options));
    let (plain, far) = (plain?.info, far?.info);
    for (label, info, time) in [("without", &plain, plain_time), ("with", &far, far_time)] {
        println!(
            "{label:>7} outlier: {:.3} s; {} nodes, {} leaves, depth {}, {} P2P, {} M2L",
            time.as_secs_f64(),
            info.nodes,
            info.leaves,
            info.depth,
            info.p2p_pairs,
            info.m2l_pairs
        );
    }
    println!(
        "N = {n}: time with / without outlier = {:.2}",
        far_time.as_secs_f64() / plain_time.as_secs_f64()
    );
    Ok(())
}
