//! One J/K build of a fixed density (1 on the diagonal, 0.01 elsewhere), Schwarz screening
//! at 1e-14 and no density screening: the kernel's work without an SCF around it, for
//! instruction counts (`valgrind --tool=callgrind --toggle-collect='*FockBuilder*serial*'`)
//! and timing.
//!
//! `cargo run --release -p tutti-adjoint --example one_build -- FILE.xyz BASIS [time]
//! [cartesian]`: one serial build (prints J_00); with `time`, the best of 7 serial and 7
//! two-thread builds; with `cartesian`, in Cartesian functions.

use tutti_adjoint::fock::FockBuilder;
use tutti_adjoint::integrals::EriEngine;
use tutti_adjoint::{AngularKind, Basis, BasisSet, Molecule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(xyz), Some(basis_name)) = (args.get(1), args.get(2)) else {
        return Err("usage: one_build FILE.xyz BASIS [time] [cartesian]".into());
    };
    let flag = |name: &str| args[3..].iter().any(|arg| arg == name);
    let kind = if flag("cartesian") {
        AngularKind::Cartesian
    } else {
        AngularKind::Spherical
    };
    let molecule = Molecule::from_xyz(&std::fs::read_to_string(xyz)?)?;
    let basis = Basis::new(&molecule, &BasisSet::load(basis_name)?, kind)?;
    let engine = EriEngine::new(&basis);
    let builder = FockBuilder::new(&engine, 1e-14);
    let n = basis.nao();
    let density = faer::Mat::<f64>::from_fn(n, n, |i, j| if i == j { 1.0 } else { 0.01 });
    if !flag("time") {
        let jk = builder.serial(density.as_ref());
        println!("J_00 = {:.12}", jk.coulomb[(0, 0)]);
        return Ok(());
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build()?;
    let (mut serial, mut threaded) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..7 {
        let start = std::time::Instant::now();
        builder.serial(density.as_ref());
        serial = serial.min(start.elapsed().as_secs_f64());
        let start = std::time::Instant::now();
        pool.install(|| builder.threaded(density.as_ref()));
        threaded = threaded.min(start.elapsed().as_secs_f64());
    }
    println!(
        "nao {n}: J/K serial {serial:.4} s, 2 threads {threaded:.4} s ({:.2}x), best of 7",
        serial / threaded
    );
    Ok(())
}
