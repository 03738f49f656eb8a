//! The adjoint workload's threaded Fock (J/K) build and RHF over thread counts.
//!
//! For ch4/def2-svp, c2h6/def2-svp and h2o/def2-tzvp: one J/K build of the converged density
//! by the serial reference and by the threaded build at each thread count (best of a few
//! runs), and a whole RHF on as many simulated devices as the count (`Resources::cpu(n)`:
//! the host's cores split among n ranks, each J/K build split among them) with the Fock
//! build's share of its time.
//! Baselines in the same run: the serial reference and one thread. When `python3` (or
//! `$TUTTI_PYSCF_PYTHON`) can import PySCF, PySCF on the same molecule and basis name is
//! timed too, at the same thread counts: its direct J/K build (`scf.hf.get_jk`, integrals
//! computed in the build, as ours), J/K from the ERI tensor its SCF keeps in memory, and
//! that SCF (its built-in basis data can differ from the shipped sets in the last digits; the
//! timings compare, not the energies).
//!
//! PySCF's direct SCF (ERIs computed in every build, as ours; PySCF keeps the ERI tensor in
//! memory whenever it fits unless told not to) is timed beside our RHF at the defaults (the
//! same criterion as PySCF's: energy change 1e-10 Eh and orbital gradient 1e-5), and beside
//! our RHF at the density criterion (every density element within 1e-8 instead of the
//! orbital gradient), as ratios of speed. Both SCFs are timed as the best of `--repeats`
//! runs (default 3): the machines drift in speed over tens of seconds.
//!
//! `cargo run --release -p tutti-benches --bin adjoint_threads [-- --threads 1 2 4]
//! [--repeats 3] [--large]` (`--large` adds h2o/cc-pVTZ, c2h6/def2-TZVP and benzene/def2-SVP:
//! 58, 98 and 114 AOs).

use std::error::Error;
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};
use tutti_adjoint::fock::{CoulombExchange, FockBuilder};
use tutti_adjoint::integrals::EriEngine;
use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, Molecule, ScfOptions};
use tutti_backend::Resources;
use tutti_benches::{best_time, write_results};

/// One benchmark case: a molecule (bohr) and a shipped basis.
struct Case {
    name: &'static str,
    basis: &'static str,
    atoms: Vec<(&'static str, [f64; 3])>,
}

fn cases(large: bool) -> Vec<Case> {
    // Methane, Td, r(CH) = 1.087 A (as crates/tutti-adjoint/tests/data/ch4_def2svp.json).
    let a = 1.1859538348562775;
    let methane = vec![
        ("C", [0.0, 0.0, 0.0]),
        ("H", [a, a, a]),
        ("H", [-a, -a, a]),
        ("H", [-a, a, -a]),
        ("H", [a, -a, -a]),
    ];
    // Staggered ethane: r(CC) = 1.536 A, r(CH) = 1.094 A, angle(HCC) = 111.2 deg.
    let bohr = 1.0 / tutti_adjoint::molecule::ANGSTROM_PER_BOHR;
    let (half_cc, ch, hcc) = (0.768, 1.094, 111.2_f64.to_radians());
    let (radial, height) = (ch * hcc.sin(), half_cc - ch * hcc.cos());
    let mut ethane = vec![
        ("C", [0.0, 0.0, half_cc * bohr]),
        ("C", [0.0, 0.0, -half_cc * bohr]),
    ];
    for k in 0..6 {
        let angle = (60.0 * k as f64).to_radians();
        let z = if k % 2 == 0 { height } else { -height };
        ethane.push((
            "H",
            [
                radial * angle.cos() * bohr,
                radial * angle.sin() * bohr,
                z * bohr,
            ],
        ));
    }
    // Water, r(OH) = 0.9572 A, angle 104.52 deg (as the h2o reference files).
    let water = vec![
        ("O", [0.0, 0.0, 0.0]),
        ("H", [0.0, 1.4304288084282137, 1.107157044045246]),
        ("H", [0.0, -1.4304288084282137, 1.107157044045246]),
    ];
    // Benzene, D6h, r(CC) = 1.397 A, r(CH) = 1.084 A: 114 AOs in def2-SVP.
    let mut benzene = Vec::new();
    for (symbol, radius) in [("C", 1.397), ("H", 2.481)] {
        for k in 0..6 {
            let angle = (60.0 * k as f64).to_radians();
            benzene.push((
                symbol,
                [
                    radius * angle.cos() * bohr,
                    radius * angle.sin() * bohr,
                    0.0,
                ],
            ));
        }
    }
    let mut cases = vec![
        Case {
            name: "ch4",
            basis: "def2-svp",
            atoms: methane,
        },
        Case {
            name: "c2h6",
            basis: "def2-svp",
            atoms: ethane.clone(),
        },
        Case {
            name: "h2o",
            basis: "def2-tzvp",
            atoms: water.clone(),
        },
    ];
    if large {
        cases.push(Case {
            name: "h2o",
            basis: "cc-pvtz",
            atoms: water,
        });
        cases.push(Case {
            name: "c2h6",
            basis: "def2-tzvp",
            atoms: ethane,
        });
        cases.push(Case {
            name: "benzene",
            basis: "def2-svp",
            atoms: benzene,
        });
    }
    cases
}

/// `--threads 1 2 4` and `--repeats 3` (the defaults), and `--large` (adds h2o/cc-pVTZ,
/// 58 AOs, c2h6/def2-TZVP, 98, and benzene/def2-SVP, 114).
fn arguments() -> Result<(Vec<usize>, usize, bool), Box<dyn Error>> {
    let mut threads = Vec::new();
    let mut repeats = 3;
    let mut large = false;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => {
                while let Some(value) = args.next_if(|next| !next.starts_with("--")) {
                    let count: usize = value
                        .parse()
                        .map_err(|err| format!("--threads `{value}`: {err}"))?;
                    if count == 0 {
                        return Err("--threads: counts must be at least 1".into());
                    }
                    threads.push(count);
                }
            }
            "--large" => large = true,
            "--repeats" => {
                let value = args.next().ok_or("--repeats needs a count")?;
                repeats = value
                    .parse()
                    .map_err(|err| format!("--repeats `{value}`: {err}"))?;
            }
            other => {
                return Err(format!(
                "unknown argument `{other}`; usage: adjoint_threads [--threads N...] [--repeats R] [--large]"
            )
                .into())
            }
        }
    }
    if threads.is_empty() {
        threads = vec![1, 2, 4];
    }
    Ok((threads, repeats.max(1), large))
}

/// Largest |a - b| over J and K, relative to the largest |a|.
fn relative_difference(a: &CoulombExchange, b: &CoulombExchange) -> f64 {
    let n = a.coulomb.nrows();
    let (mut largest, mut difference) = (0.0_f64, 0.0_f64);
    for i in 0..n {
        for j in 0..n {
            largest = largest
                .max(a.coulomb[(i, j)].abs())
                .max(a.exchange[(i, j)].abs());
            difference = difference
                .max((a.coulomb[(i, j)] - b.coulomb[(i, j)]).abs())
                .max((a.exchange[(i, j)] - b.exchange[(i, j)]).abs());
        }
    }
    difference / largest.max(f64::MIN_POSITIVE)
}

/// The best wall time, in seconds, of `repeats` runs of the SCF `run`, and its last result:
/// the machine's speed drifts over tens of seconds, and the best of a few runs (PySCF's
/// too) is what two programs can be compared by.
fn best_scf<T, E>(repeats: usize, mut run: impl FnMut() -> Result<T, E>) -> Result<(f64, T), E> {
    let mut best = f64::INFINITY;
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let started = Instant::now();
        last = Some(run()?);
        best = best.min(started.elapsed().as_secs_f64());
    }
    match last {
        Some(result) => Ok((best, result)),
        None => unreachable!("at least one run"),
    }
}

/// PySCF's timings of the same case, or `None` when PySCF cannot be imported.
fn pyscf_timings(case: &Case, threads: &[usize], repeats: usize) -> Option<Value> {
    let python = std::env::var("TUTTI_PYSCF_PYTHON").unwrap_or_else(|_| "python3".into());
    let atoms: Vec<Value> = case
        .atoms
        .iter()
        .map(|(symbol, xyz)| json!([symbol, xyz]))
        .collect();
    let input = json!({
        "atoms": atoms, "basis": case.basis, "threads": threads, "repeats": repeats,
    });
    let script = r#"
import json, sys, time
from pyscf import gto, lib, scf
spec = json.loads(sys.argv[1])
mol = gto.M(atom=[(s, tuple(x)) for s, x in spec["atoms"]], unit="Bohr",
            basis=spec["basis"], verbose=0)
rows = []
for threads in spec["threads"]:
    lib.num_threads(threads)
    mf = scf.RHF(mol); mf.conv_tol = 1e-10
    started = time.perf_counter(); energy = mf.kernel(); scf_s = time.perf_counter() - started
    dm = mf.make_rdm1()
    # Its direct SCF: PySCF keeps the ERI tensor in memory whenever it fits (these cases all
    # do), so the integrals-in-every-build SCF, like ours, must be asked for.
    # Best of `repeats` runs, as ours.
    direct_scf_s = float("inf")
    for _ in range(spec["repeats"]):
        direct_mf = scf.RHF(mol); direct_mf.conv_tol = 1e-10; direct_mf.direct_scf = True
        direct_mf._is_mem_enough = lambda: False
        started = time.perf_counter(); direct_mf.kernel()
        direct_scf_s = min(direct_scf_s, time.perf_counter() - started)
        assert direct_mf._eri is None
    def best(build):
        build(); seconds = float("inf")
        for _ in range(spec["repeats"]):
            started = time.perf_counter(); build(); seconds = min(seconds, time.perf_counter() - started)
        return seconds
    # Direct J/K (integrals computed in the build, like ours), and J/K from the ERI tensor
    # that PySCF's SCF keeps in memory for molecules this small.
    direct = best(lambda: scf.hf.get_jk(mol, dm))
    incore = best(lambda: mf.get_jk(mol, dm))
    rows.append({"threads": threads, "jk_seconds": direct, "jk_incore_seconds": incore,
                 "scf_seconds": scf_s, "energy": energy, "direct_scf_seconds": direct_scf_s,
                 "direct_scf_cycles": direct_mf.cycles})
print(json.dumps({"pyscf": __import__("pyscf").__version__, "nao": mol.nao, "rows": rows}))
"#;
    let output = Command::new(python)
        .args(["-c", script, &input.to_string()])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    serde_json::from_slice(&output.stdout).ok()
}

fn main() -> Result<(), Box<dyn Error>> {
    let (threads, repeats, large) = arguments()?;
    println!(
        "adjoint_threads: J/K build (best of {repeats}) and RHF at {threads:?} thread(s), {} core(s) here",
        tutti_backend::system::host_cores()
    );
    let mut results = Vec::new();
    for case in cases(large) {
        let molecule = Molecule::from_bohr(&case.atoms)?;
        let basis = Basis::new(
            &molecule,
            &BasisSet::named(case.basis)?,
            AngularKind::Spherical,
        )?;
        let label = format!("{}/{}", case.name, case.basis);
        let reference = rhf(&molecule, &basis, &ScfOptions::default())?;
        println!(
            "{label}: {} AOs, {} shells, E = {:.10} Eh in {} iterations",
            basis.nao(),
            basis.shells().len(),
            reference.energy,
            reference.iterations
        );
        let engine = EriEngine::new(&basis);
        let builder = FockBuilder::new(&engine, ScfOptions::default().schwarz_threshold);
        let density = reference.density.as_ref();
        let (serial_time, serial) = best_time(repeats, || builder.serial(density));
        let serial_seconds = serial_time.as_secs_f64();
        println!("  J/K serial reference: {serial_seconds:.4} s");

        let mut rows = Vec::new();
        // (threads, RHF seconds, iterations, at the density criterion: seconds, iterations).
        let mut ours: Vec<(usize, f64, usize, f64, usize)> = Vec::new();
        let (mut one_fock, mut one_scf) = (None, None);
        for &count in &threads {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(count).build()?;
            let (fock_time, threaded) =
                best_time(repeats, || pool.install(|| builder.threaded(density)));
            let fock_seconds = fock_time.as_secs_f64();
            let difference = relative_difference(&serial, &threaded);
            let defaults = ScfOptions::default().with_resources(Resources::cpu(count));
            let (scf_seconds, result) = best_scf(repeats, || rhf(&molecule, &basis, &defaults))?;
            // The density criterion: every density element within 1e-8 instead of the
            // orbital gradient within 1e-5 (PySCF's conv_tol_grad default, ours).
            let density_criterion = defaults.clone().with_gradient_tolerance(None);
            let (density_criterion_seconds, tight) =
                best_scf(repeats, || rhf(&molecule, &basis, &density_criterion))?;
            ours.push((
                count,
                scf_seconds,
                result.iterations,
                density_criterion_seconds,
                tight.iterations,
            ));
            let fock_share = result.timings.fock / result.timings.total;
            let fock_base = *one_fock.get_or_insert(fock_seconds);
            let scf_base = *one_scf.get_or_insert(scf_seconds);
            println!(
                "  {count} thread(s): J/K {fock_seconds:.4} s ({:.2}x vs {} thread(s), {:.2}x vs serial; \
                 differs from serial by {difference:.1e} rel.) | RHF on {count} device(s) {scf_seconds:.3} s ({:.2}x), \
                 {} J/K builds = {:.0}% of it, |dE| vs all cores {:.1e} Eh",
                fock_base / fock_seconds,
                threads[0],
                serial_seconds / fock_seconds,
                scf_base / scf_seconds,
                result.timings.fock_builds,
                100.0 * fock_share,
                (result.energy - reference.energy).abs()
            );
            rows.push(json!({
                "threads": count,
                "scf_devices": result.devices,
                "fock_seconds": fock_seconds,
                "fock_speedup": fock_base / fock_seconds,
                "fock_vs_serial": serial_seconds / fock_seconds,
                "fock_relative_difference_vs_serial": difference,
                "scf_seconds": scf_seconds,
                "scf_speedup": scf_base / scf_seconds,
                "scf_fock_seconds": result.timings.fock,
                "scf_fock_share": fock_share,
                "scf_fock_builds": result.timings.fock_builds,
                "iterations": result.iterations,
                "energy": result.energy,
                "scf_density_criterion_seconds": density_criterion_seconds,
                "scf_density_criterion_iterations": tight.iterations,
                "scf_density_criterion_energy": tight.energy,
            }));
        }
        let pyscf = pyscf_timings(&case, &threads, repeats);
        match &pyscf {
            Some(value) => {
                for row in value["rows"].as_array().into_iter().flatten() {
                    println!(
                        "  PySCF {} ({} thread(s)): direct J/K {:.4} s (from its in-memory ERIs {:.4} s), \
                         SCF with in-memory ERIs {:.3} s",
                        value["pyscf"].as_str().unwrap_or("?"),
                        row["threads"],
                        row["jk_seconds"].as_f64().unwrap_or(f64::NAN),
                        row["jk_incore_seconds"].as_f64().unwrap_or(f64::NAN),
                        row["scf_seconds"].as_f64().unwrap_or(f64::NAN)
                    );
                    let count = row["threads"].as_u64().unwrap_or(0) as usize;
                    let direct = row["direct_scf_seconds"].as_f64().unwrap_or(f64::NAN);
                    if let Some((_, seconds, iterations, tight, tight_iterations)) =
                        ours.iter().find(|row| row.0 == count)
                    {
                        println!(
                            "    direct SCF (integrals in every build, as ours) {direct:.3} s in {} cycles | \
                             ours on {count} device(s) sharing the {} core(s) {seconds:.3} s in {iterations} \
                             iterations, the same criterion ({:.2}x PySCF's speed); at the density \
                             criterion {tight:.3} s in {tight_iterations} ({:.2}x)",
                            row["direct_scf_cycles"],
                            tutti_backend::system::host_cores(),
                            direct / seconds,
                            direct / tight
                        );
                    }
                }
            }
            None => println!("  PySCF: not importable here (set TUTTI_PYSCF_PYTHON to compare)"),
        }
        results.push(json!({
            "case": label,
            "nao": basis.nao(),
            "shells": basis.shells().len(),
            "energy": reference.energy,
            "fock_serial_seconds": serial_seconds,
            "threads": rows,
            "pyscf": pyscf,
        }));
    }
    // Other work on the machine skews thread scaling; the load says how much there was.
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_string));
    println!(
        "load average (1 min) at the end: {}",
        load_average.as_deref().unwrap_or("?")
    );
    let path = write_results(
        "adjoint_threads",
        json!({ "repeats": repeats, "load_average_1min": load_average, "cases": results }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}
