//! Times one serial and one threaded J/K build for a molecule and basis:
//! `cargo run -p tutti-adjoint --example fock_timing -- FILE.xyz BASIS [THREADS]`.

use std::time::Instant;

use tutti_adjoint::fock::FockBuilder;
use tutti_adjoint::integrals::EriEngine;
use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(xyz), Some(basis_name)) = (args.get(1), args.get(2)) else {
        return Err("usage: fock_timing FILE.xyz BASIS [THREADS]".into());
    };
    let threads: usize = args.get(3).map(|t| t.parse()).transpose()?.unwrap_or(2);
    let molecule = Molecule::from_xyz(&std::fs::read_to_string(xyz)?)?;
    let basis = Basis::new(
        &molecule,
        &BasisSet::load(basis_name)?,
        AngularKind::Spherical,
    )?;
    let result = rhf(&molecule, &basis, &ScfOptions::default())?;
    let start = Instant::now();
    let engine = EriEngine::new(&basis);
    let setup = start.elapsed().as_secs_f64();
    let builder = FockBuilder::new(&engine, 1e-14);
    let start = Instant::now();
    builder.serial(result.density.as_ref());
    let serial = start.elapsed().as_secs_f64();
    let split = FockBuilder::new(&engine, 1e-14).with_shared_columns(false);
    let mut shared_time = f64::INFINITY;
    let mut split_time = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        split.serial(result.density.as_ref());
        split_time = split_time.min(start.elapsed().as_secs_f64());
        let start = Instant::now();
        builder.serial(result.density.as_ref());
        shared_time = shared_time.min(start.elapsed().as_secs_f64());
    }
    println!(
        "J/K serial, best of 3: general contractions shared {shared_time:.4} s, split {split_time:.4} s ({:.2}x)",
        split_time / shared_time
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let start = Instant::now();
    pool.install(|| builder.threaded(result.density.as_ref()));
    let threaded = start.elapsed().as_secs_f64();
    println!(
        "nao {} E {:.10} iterations {} | pair setup {setup:.4} s | J/K serial {serial:.4} s, {threads} threads {threaded:.4} s | SCF {:.3} s, {:.4} s per J/K build ({} of {} full)",
        basis.nao(),
        result.energy,
        result.iterations,
        result.timings.total,
        result.timings.fock / result.timings.fock_builds as f64,
        result.timings.full_fock_builds,
        result.timings.fock_builds,
    );
    Ok(())
}
