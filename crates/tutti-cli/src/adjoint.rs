//! `tutti adjoint`: Gaussian-basis RHF (and, next, its gradient w.r.t. basis parameters).

use std::time::Instant;

use clap::{Args, Subcommand};
use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, EnergySummary, Molecule, ScfOptions};

/// Options of `tutti adjoint`.
#[derive(Args)]
pub struct AdjointArgs {
    #[command(subcommand)]
    command: AdjointCommand,
}

#[derive(Subcommand)]
enum AdjointCommand {
    /// Closed-shell RHF energy of a molecule in a Gaussian basis.
    Energy(EnergyArgs),
}

/// Options of `tutti adjoint energy`.
#[derive(Args)]
struct EnergyArgs {
    /// Molecule as an XYZ file (Angstrom).
    #[arg(long, value_name = "FILE")]
    xyz: String,
    /// A shipped basis set (sto-3g, 6-31g, 6-31g*, cc-pvdz, def2-svp, def2-tzvp) or a path to
    /// an NWChem-format basis file.
    #[arg(long, value_name = "NAME|FILE")]
    basis: String,
    /// Threads of the Fock build (0 = all cores, or RAYON_NUM_THREADS).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Total charge of the molecule.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    charge: i32,
    /// Cartesian instead of spherical functions.
    #[arg(long)]
    cartesian: bool,
    /// Print one JSON object (energy, nao, iterations, timings, ...) instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &AdjointArgs) -> Result<(), String> {
    match &args.command {
        AdjointCommand::Energy(energy) => run_energy(energy),
    }
}

fn run_energy(args: &EnergyArgs) -> Result<(), String> {
    let start = Instant::now();
    let text = std::fs::read_to_string(&args.xyz)
        .map_err(|err| format!("cannot read --xyz `{}`: {err}", args.xyz))?;
    let molecule = Molecule::from_xyz(&text)
        .and_then(|m| m.with_charge(args.charge))
        .map_err(|err| format!("--xyz `{}`: {err}", args.xyz))?;
    let basis_set = BasisSet::load(&args.basis).map_err(|err| format!("--basis: {err}"))?;
    let kind = if args.cartesian {
        AngularKind::Cartesian
    } else {
        AngularKind::Spherical
    };
    let basis = Basis::new(&molecule, &basis_set, kind).map_err(|err| err.to_string())?;
    let input_seconds = start.elapsed().as_secs_f64();
    let options = ScfOptions::default().with_threads(args.threads);
    let result = rhf(&molecule, &basis, &options).map_err(|err| err.to_string())?;
    let summary = EnergySummary::new(
        &result,
        &basis,
        &molecule,
        basis_set.name(),
        args.threads,
        input_seconds,
    );
    if args.json {
        println!("{}", summary.to_json());
        return Ok(());
    }
    println!(
        "RHF/{} ({}), {} atoms, {} electrons, {} AOs in {} shells",
        summary.basis,
        summary.angular,
        summary.atoms,
        summary.electrons,
        summary.nao,
        summary.shells
    );
    println!("  E(RHF)        = {:.10} Eh", summary.energy);
    println!("  E(nuclear)    = {:.10} Eh", summary.nuclear_repulsion);
    if let (Some(homo), Some(lumo)) = (summary.homo, summary.lumo) {
        println!("  HOMO, LUMO    = {homo:.6}, {lumo:.6} Eh");
    }
    println!(
        "  converged in {} iterations (last dE {:.1e} Eh, dP {:.1e})",
        summary.iterations, summary.delta_energy, summary.delta_density
    );
    let threads = if args.threads == 0 {
        "all cores".to_string()
    } else {
        format!("{} threads", args.threads)
    };
    println!(
        "  time: input {:.3} s, setup {:.3} s, Fock {:.3} s ({:.4} s per build, {threads}), SCF total {:.3} s",
        summary.timings.input,
        summary.timings.setup,
        summary.timings.fock,
        summary.timings.fock_per_build,
        summary.timings.scf
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(xyz: &str, basis: &str) -> EnergyArgs {
        EnergyArgs {
            xyz: xyz.to_string(),
            basis: basis.to_string(),
            threads: 2,
            charge: 0,
            cartesian: false,
            json: true,
        }
    }

    #[test]
    fn energy_runs_and_bad_input_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("tutti-cli-h2-{}.xyz", std::process::id()));
        std::fs::write(&path, "2\nH2\nH 0 0 0\nH 0 0 0.74\n").unwrap();
        let xyz = path.to_str().unwrap();
        assert!(run_energy(&args(xyz, "sto-3g")).is_ok());
        let message = run_energy(&args(xyz, "no-such-basis")).unwrap_err();
        assert!(
            message.contains("--basis") && message.contains("sto-3g"),
            "{message}"
        );
        std::fs::remove_file(&path).unwrap();
        let message = run_energy(&args(xyz, "sto-3g")).unwrap_err();
        assert!(message.contains("--xyz"), "{message}");
    }
}
