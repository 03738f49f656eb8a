//! Shared helpers of the integration tests: reference cases and generated bodies.
#![allow(dead_code)]

use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// A committed reference case: bodies and their exact direct sums.
pub struct Case {
    pub positions: Vec<[f64; 3]>,
    pub masses: Vec<f64>,
    pub potential: Vec<f64>,
    pub accel: Vec<[f64; 3]>,
}

/// Loads `tests/data/<name>/`.
pub fn case(name: &str) -> Case {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let potential = tutti_fmm::io::read_masses(dir.join("potential.npy")).expect("potential");
    Case {
        positions: tutti_fmm::io::read_positions(dir.join("positions.npy")).expect("positions"),
        masses: tutti_fmm::io::read_masses(dir.join("masses.npy")).expect("masses"),
        potential,
        accel: tutti_fmm::io::read_positions(dir.join("accel.npy")).expect("accel"),
    }
}

/// Relative L2 errors (accelerations, potentials) of `fmm` against exact values.
pub fn errors(out: &tutti_fmm::FmmOutput, potential: &[f64], accel: &[[f64; 3]]) -> (f64, f64) {
    let p: Vec<[f64; 1]> = out.potential.iter().map(|&x| [x]).collect();
    let e: Vec<[f64; 1]> = potential.iter().map(|&x| [x]).collect();
    (
        tutti_fmm::relative_l2(&out.accel, accel),
        tutti_fmm::relative_l2(&p, &e),
    )
}

/// Uniform bodies in the unit cube with strengths in [0.5, 1.5).
pub fn uniform(n: usize, seed: u64) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let positions = (0..n)
        .map(|_| [rng.random(), rng.random(), rng.random()])
        .collect();
    let masses = (0..n).map(|_| rng.random_range(0.5..1.5)).collect();
    (positions, masses)
}

/// A thin exponential disk: radius ~ Exp(1) (truncated at 10), height ~ N(0, 0.01), equal
/// masses summing to 1.
pub fn thin_disk(n: usize, seed: u64) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let height = Normal::new(0.0, 0.01).expect("normal");
    let positions = (0..n)
        .map(|_| {
            let radius = loop {
                // Surface density exp(-R): R ~ Gamma(2, 1), drawn as a sum of two exponentials.
                let u: f64 = rng.random::<f64>() * rng.random::<f64>();
                let r = -(u.max(1e-300)).ln();
                if r < 10.0 {
                    break r;
                }
            };
            let angle = rng.random::<f64>() * std::f64::consts::TAU;
            [
                radius * angle.cos(),
                radius * angle.sin(),
                height.sample(&mut rng),
            ]
        })
        .collect();
    (positions, vec![1.0 / n as f64; n])
}

/// A Plummer sphere (scale radius 1, truncated at radius 20), equal masses summing to 1.
pub fn plummer(n: usize, seed: u64) -> (Vec<[f64; 3]>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let positions = (0..n)
        .map(|_| {
            let radius = loop {
                let u: f64 = rng.random_range(1e-10..1.0);
                let r = 1.0 / (u.powf(-2.0 / 3.0) - 1.0).sqrt();
                if r < 20.0 {
                    break r;
                }
            };
            let cos_t: f64 = rng.random_range(-1.0..1.0);
            let sin_t = (1.0 - cos_t * cos_t).sqrt();
            let phi = rng.random::<f64>() * std::f64::consts::TAU;
            [
                radius * sin_t * phi.cos(),
                radius * sin_t * phi.sin(),
                radius * cos_t,
            ]
        })
        .collect();
    (positions, vec![1.0 / n as f64; n])
}
