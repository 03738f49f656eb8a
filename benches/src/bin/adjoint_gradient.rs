//! The basis-parameter gradient of the RHF energy: where its time goes and how it scales.
//!
//! For h2o/def2-tzvp and ch4/def2-svp (and h2o/cc-pvtz, c2h6/def2-svp and c2h6/def2-tzvp
//! with `--large`): the serial reference gradient's time breakdown (overlap, core
//! Hamiltonian, two-electron, Fock/reduction); the
//! gradient's measured serial part (pair set-up, densities, sums) with its Amdahl ceiling;
//! the gradient on n simulated devices at each count n (`Resources::cpu(n)`: the host's cores
//! split among n ranks, the work split among them) with its speedup over one device (which
//! holds every core in one pool) and over the serial reference and the serial fraction that
//! speedup implies (Karp–Flatt, ceiling 1/e);
//! and the ratio of the gradient's time (after its SCF) and of the whole run (its SCF, with
//! the gradient's tighter density tolerance, plus the gradient) to one SCF energy with the
//! default settings on the same devices (the baseline in the same run). The split result is
//! checked against the serial one at every count. Memory: the plans' large objects on each
//! device (`plan_gradient` beside `plan` for the energy) and the process's peak resident
//! memory so far.
//!
//! `cargo run --release -p tutti-benches --bin adjoint_gradient [-- --devices 1 2 4]
//! [--repeats 1] [--large]`. Results: `benches/results/adjoint_gradient.json`.

use std::error::Error;

use serde_json::json;
use tutti_adjoint::integrals::EriEngine;
use tutti_adjoint::{
    plan, plan_gradient, rhf, rhf_gradient, AngularKind, Basis, BasisSet, GradientOptions,
    Molecule, RhfGradient, ScfOptions,
};
use tutti_backend::Resources;
use tutti_benches::{best_time, write_results};
use tutti_plan::Tier;

/// One case: a molecule (bohr) and a shipped basis.
struct Case {
    name: &'static str,
    basis: &'static str,
    atoms: Vec<(&'static str, [f64; 3])>,
}

fn cases(large: bool) -> Vec<Case> {
    // Water, r(OH) = 0.9572 A, angle 104.52 deg (as the h2o reference files).
    let water = vec![
        ("O", [0.0, 0.0, 0.0]),
        ("H", [0.0, 1.4304288084282137, 1.107157044045246]),
        ("H", [0.0, -1.4304288084282137, 1.107157044045246]),
    ];
    // Methane, Td, r(CH) = 1.087 A (as tests/data/ch4_def2svp.json).
    let a = 1.1859538348562775;
    let methane = vec![
        ("C", [0.0, 0.0, 0.0]),
        ("H", [a, a, a]),
        ("H", [-a, -a, a]),
        ("H", [-a, a, -a]),
        ("H", [a, -a, -a]),
    ];
    let mut out = vec![
        Case {
            name: "h2o",
            basis: "def2-tzvp",
            atoms: water.clone(),
        },
        Case {
            name: "ch4",
            basis: "def2-svp",
            atoms: methane,
        },
    ];
    if large {
        // General contractions: oxygen's s columns share their primitives.
        out.push(Case {
            name: "h2o",
            basis: "cc-pvtz",
            atoms: water,
        });
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
        out.push(Case {
            name: "c2h6",
            basis: "def2-svp",
            atoms: ethane.clone(),
        });
        // The size: 98 AOs with d and f functions.
        out.push(Case {
            name: "c2h6",
            basis: "def2-tzvp",
            atoms: ethane,
        });
    }
    out
}

/// `--devices 1 2 4`, `--repeats 1`, `--large` (the defaults: 1 2 4, 1, off).
fn arguments() -> Result<(Vec<usize>, usize, bool), Box<dyn Error>> {
    let mut threads = Vec::new();
    let mut repeats = 1;
    let mut large = false;
    let mut args = std::env::args().skip(1).peekable();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--devices" => {
                while let Some(value) = args.next_if(|next| !next.starts_with("--")) {
                    let count: usize = value
                        .parse()
                        .map_err(|err| format!("--devices `{value}`: {err}"))?;
                    if count == 0 {
                        return Err("--devices: counts must be at least 1".into());
                    }
                    threads.push(count);
                }
            }
            "--repeats" => {
                let value = args.next().ok_or("--repeats needs a count")?;
                repeats = value
                    .parse()
                    .map_err(|err| format!("--repeats `{value}`: {err}"))?;
            }
            "--large" => large = true,
            other => {
                return Err(format!(
                    "unknown argument `{other}`; usage: adjoint_gradient [--devices N...] [--repeats R] [--large]"
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

/// max |a - b| / max |b| over every parameter.
fn relative_difference(a: &RhfGradient, b: &RhfGradient) -> f64 {
    let values = |g: &RhfGradient| -> Vec<f64> {
        g.shells
            .iter()
            .flat_map(|s| s.grad_exponents.iter().chain(&s.grad_coefficients).copied())
            .collect()
    };
    let (a, b) = (values(a), values(b));
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let difference = a
        .iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
    difference / scale.max(f64::MIN_POSITIVE)
}

/// The process's peak resident memory so far (`VmHWM`), bytes; `None` off Linux.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The gradient's own time (everything after the SCF), seconds.
fn gradient_seconds(gradient: &RhfGradient) -> f64 {
    gradient.timings.total - gradient.timings.scf
}

fn main() -> Result<(), Box<dyn Error>> {
    let (threads, repeats, large) = arguments()?;
    println!(
        "adjoint_gradient: serial breakdown, split over {threads:?} device(s) (best of {repeats}), {} core(s) here",
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
        let parameters: usize = basis.shells().iter().map(|s| 2 * s.exponents.len()).sum();
        let serial_options = GradientOptions::default()
            .with_serial(true)
            .with_resources(Resources::cpu(1));
        let (_, serial) = best_time(repeats, || rhf_gradient(&molecule, &basis, &serial_options));
        let serial = serial?;
        let t = &serial.timings;
        let serial_gradient = gradient_seconds(&serial);
        println!(
            "{label}: {} AOs, {} shells, {parameters} parameters, E = {:.10} Eh",
            basis.nao(),
            basis.shells().len(),
            serial.energy
        );
        println!(
            "  serial reference: SCF {:.3} s; gradient {:.3} s = overlap {:.4} + core Hamiltonian {:.4} + two-electron {:.3} + Fock/reduction {:.4}",
            t.scf, serial_gradient, t.overlap, t.core_hamiltonian, t.two_electron, t.fock
        );
        // The gradient's serial part: the engine's canonical pairs and Schwarz bounds (the
        // derivative pairs are built inside the threaded tasks), densities and sums.
        let (setup, _) = best_time(repeats, || EriEngine::new(&basis));
        let setup = setup.as_secs_f64() + t.fock;
        let structural = setup / serial_gradient;
        println!(
            "  serial part of the gradient (pair set-up, densities, sums): {setup:.4} s = {:.1}% of the serial gradient: Amdahl ceiling {:.0}x",
            100.0 * structural,
            1.0 / structural.max(1e-9)
        );
        let mut rows = Vec::new();
        let mut one_thread: Option<f64> = None;
        for &count in &threads {
            let options = GradientOptions::default().with_resources(Resources::cpu(count));
            // The baseline: one plain SCF energy, the SCF's default settings, same devices.
            let scf_options = ScfOptions::default().with_resources(Resources::cpu(count));
            let (scf_time, scf) = best_time(repeats, || rhf(&molecule, &basis, &scf_options));
            let scf = scf?;
            let (_, threaded) = best_time(repeats, || rhf_gradient(&molecule, &basis, &options));
            let threaded = threaded?;
            let seconds = gradient_seconds(&threaded);
            let base = *one_thread.get_or_insert(seconds);
            let speedup = base / seconds;
            // Karp–Flatt: the serial fraction e that Amdahl's law needs for this speedup.
            let serial_fraction = if count > 1 {
                Some((1.0 / speedup - 1.0 / count as f64) / (1.0 - 1.0 / count as f64))
            } else {
                None
            };
            let scf_seconds = scf_time.as_secs_f64();
            let difference = relative_difference(&threaded, &serial);
            // Memory: the plans' large objects on each device, the gradient's beside the
            // energy's, and the process's measured peak so far (every earlier run included).
            let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
            let gradient_plan = plan_gradient(&molecule, &basis, &options)?.used(Tier::Device);
            let energy_plan = plan(&molecule, &basis, &scf_options)?.used(Tier::Device);
            let peak = peak_resident_bytes();
            let tt = &threaded.timings;
            println!(
                "  {count} device(s): gradient {seconds:.3} s (overlap {:.4}, core {:.4}, two-electron {:.3}, Fock {:.4}), speedup {speedup:.2}x vs 1 device, {:.2}x vs serial{}; one SCF energy {scf_seconds:.3} s ({} iterations): gradient / SCF = {:.2}, whole run (its tighter SCF + gradient) / SCF = {:.2}; |threaded - serial| {difference:.1e} rel",
                tt.overlap,
                tt.core_hamiltonian,
                tt.two_electron,
                tt.fock,
                serial_gradient / seconds,
                serial_fraction.map_or(String::new(), |e| if e > 0.0 {
                    format!(", serial fraction {e:.3} (Amdahl ceiling {:.1}x)", 1.0 / e)
                } else {
                    // A speedup at or above the thread count (timing noise) implies no
                    // serial part: there is no finite ceiling to print.
                    format!(", serial fraction {e:.3} (at or above linear: no ceiling)")
                }),
                scf.iterations,
                seconds / scf_seconds,
                threaded.timings.total / scf_seconds,
            );
            println!(
                "    memory: planned {:.2} MiB on each device for the gradient, {:.2} MiB for the energy; the process's peak resident so far {}",
                mib(gradient_plan),
                mib(energy_plan),
                peak.map_or("?".to_string(), |bytes| format!("{:.1} MiB", mib(bytes)))
            );
            rows.push(json!({
                "devices": count,
                "gradient_seconds": seconds,
                "timings": tt,
                "speedup_vs_one_device": speedup,
                "speedup_vs_serial": serial_gradient / seconds,
                "serial_fraction_karp_flatt": serial_fraction,
                "amdahl_ceiling": serial_fraction.filter(|e| *e > 0.0).map(|e| 1.0 / e),
                "scf_energy_seconds": scf_seconds,
                "scf_iterations": scf.iterations,
                "gradient_over_scf": seconds / scf_seconds,
                "whole_run_seconds": threaded.timings.total,
                "whole_run_over_scf": threaded.timings.total / scf_seconds,
                "relative_difference_vs_serial": difference,
                "planned_device_bytes_gradient": gradient_plan,
                "planned_device_bytes_energy": energy_plan,
                "peak_resident_bytes_so_far": peak,
            }));
        }
        results.push(json!({
            "case": label,
            "nao": basis.nao(),
            "shells": basis.shells().len(),
            "parameters": parameters,
            "energy": serial.energy,
            "serial": { "gradient_seconds": serial_gradient, "timings": serial.timings },
            "serial_part_seconds": setup,
            "serial_part_fraction": structural,
            "serial_part_amdahl_ceiling": 1.0 / structural.max(1e-9),
            "threaded": rows,
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
        "adjoint_gradient",
        json!({ "repeats": repeats, "load_average_1min": load_average, "cases": results }),
    )?;
    println!("wrote {}", path.display());
    Ok(())
}
