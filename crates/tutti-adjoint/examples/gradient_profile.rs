//! Runs one serial gradient of water/def2-tzvp, for profilers:
//! `cargo run --release -p tutti-adjoint --example gradient_profile`.

use tutti_adjoint::{rhf_gradient, AngularKind, Basis, BasisSet, GradientOptions, Molecule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let water = Molecule::from_bohr(&[
        ("O", [0.0, 0.0, 0.0]),
        ("H", [0.0, 1.430_428_808_428_213_7, 1.107_157_044_045_246]),
        ("H", [0.0, -1.430_428_808_428_213_7, 1.107_157_044_045_246]),
    ])?;
    let basis = Basis::new(
        &water,
        &BasisSet::named("def2-tzvp")?,
        AngularKind::Spherical,
    )?;
    let gradient = rhf_gradient(
        &water,
        &basis,
        &GradientOptions::default().with_serial(true),
    )?;
    println!("{:?}", gradient.timings);
    Ok(())
}
