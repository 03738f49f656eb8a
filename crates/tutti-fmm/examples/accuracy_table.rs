//! Prints the accuracy table of `docs/fmm.md`: relative L2 error of accelerations and
//! potentials against the direct sum, and the time, for p = 2..=10 at theta = 0.5 on the
//! committed cube_10k and plummer_10k cases and a generated thin disk of 10^4 bodies.
//!
//! `cargo run --release -p tutti-fmm --example accuracy_table`

use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_fmm::{direct, fmm, relative_l2, FmmOptions};

type Bodies = (Vec<[f64; 3]>, Vec<f64>);

fn committed(name: &str) -> Result<Bodies, tutti_fmm::FmmError> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    Ok((
        tutti_fmm::io::read_positions(dir.join("positions.npy"))?,
        tutti_fmm::io::read_masses(dir.join("masses.npy"))?,
    ))
}

/// The thin exponential disk of the tests (radial scale 1, vertical scale 0.01).
fn thin_disk(n: usize) -> Bodies {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let positions = (0..n)
        .map(|_| {
            let radius = -(rng.random::<f64>() * rng.random::<f64>()).max(1e-300).ln();
            let angle = rng.random::<f64>() * std::f64::consts::TAU;
            // Box-Muller for the height.
            let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
            let z = 0.01 * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos();
            [
                radius.min(10.0) * angle.cos(),
                radius.min(10.0) * angle.sin(),
                z,
            ]
        })
        .collect();
    (positions, vec![1.0 / n as f64; n])
}

fn main() -> Result<(), tutti_fmm::FmmError> {
    let theta = std::env::args()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0.5);
    let cases = [
        ("cube_10k", committed("cube_10k")?),
        ("plummer_10k", committed("plummer_10k")?),
        ("thin_disk_10k", thin_disk(10_000)),
    ];
    println!("| case | p | theta | accel rel L2 | potential rel L2 | M2L pairs | time (s) |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, (positions, masses)) in &cases {
        let (exact_potential, exact_accel) = direct(positions, masses, 0.0)?;
        let exact_potential: Vec<[f64; 1]> = exact_potential.iter().map(|&p| [p]).collect();
        for order in 2..=10 {
            let options = FmmOptions::default().with_order(order).with_theta(theta);
            let out = fmm(positions, masses, &options)?;
            let potential: Vec<[f64; 1]> = out.potential.iter().map(|&p| [p]).collect();
            println!(
                "| {name} | {order} | {theta} | {:.2e} | {:.2e} | {} | {:.3} |",
                relative_l2(&out.accel, &exact_accel),
                relative_l2(&potential, &exact_potential),
                out.info.m2l_pairs,
                out.info.setup_seconds + out.info.evaluate_seconds,
            );
        }
    }
    Ok(())
}
