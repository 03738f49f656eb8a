//! `tutti adjoint`: Gaussian-basis RHF energies, and their gradient with respect to every
//! basis-set parameter (exponents and contraction coefficients).

use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::json;
use tutti_adjoint::{
    plan, plan_gradient, rhf_gradient_on, rhf_on, AngularKind, Basis, BasisSet, EnergySummary,
    GradientOptions, Molecule, RhfGradient, ScfOptions,
};

use crate::failure::Failure;
use crate::processes::Processes;
use crate::report::{device_kind, print_json};
use crate::resources::DeviceArgs;

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
    /// RHF energy and its gradient w.r.t. every basis exponent and contraction coefficient.
    Gradient(GradientArgs),
}

/// The molecule, basis and SCF limit of `tutti adjoint energy|gradient`.
#[derive(Args, Clone, Debug)]
struct MoleculeArgs {
    /// Molecule as an XYZ file (Angstrom).
    #[arg(long, value_name = "FILE")]
    xyz: String,
    /// A shipped basis set (sto-3g, 6-31g, 6-31g*, cc-pvdz, cc-pvtz, def2-svp, def2-tzvp) or a path to
    /// an NWChem-format basis file.
    #[arg(long, value_name = "NAME|FILE")]
    basis: String,
    /// Total charge of the molecule.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    charge: i32,
    /// Cartesian instead of spherical functions.
    #[arg(long)]
    cartesian: bool,
    /// The SCF's iteration limit (default 128); an SCF that has not converged by then fails
    /// with exit status 1.
    #[arg(long, value_name = "N")]
    max_iterations: Option<usize>,
}

impl MoleculeArgs {
    /// The `inputs` of `--json`: these options and `devices`'.
    fn to_json(&self, devices: &DeviceArgs) -> serde_json::Value {
        json!({
            "xyz": self.xyz,
            "basis": self.basis,
            "charge": self.charge,
            "cartesian": self.cartesian,
            "max_iterations": self.max_iterations,
            "resources": devices.to_json(),
        })
    }

    /// `options` with `--max-iterations` applied, and the progress display (rank 0 alone
    /// reports, and it runs in the printing process).
    fn scf_options(&self, options: ScfOptions) -> ScfOptions {
        let options = match self.max_iterations {
            Some(limit) => options.with_max_iterations(limit),
            None => options,
        };
        match crate::progress::reporter(true) {
            Some(report) => options.with_progress(report),
            None => options,
        }
    }
}

/// Options of `tutti adjoint energy`.
#[derive(Args)]
struct EnergyArgs {
    #[command(flatten)]
    molecule: MoleculeArgs,
    /// The devices: one rank each, every J/K build split among them.
    #[command(flatten)]
    devices: DeviceArgs,
    /// Print the memory plan (density, Fock, J/K matrices, the ranks' partial sums, the ERI
    /// pair data on each device) and exit; exits non-zero with the numbers when it does not
    /// fit.
    #[arg(long)]
    plan: bool,
    /// Converged when the energy changes by less than 1e-10 Eh and the orbital gradient (the
    /// norm PySCF's `conv_tol_grad` bounds) is below G: PySCF's criterion, whose default for
    /// `conv_tol` 1e-10 is 1e-5. 0 converges instead when no density element changes by more
    /// than 1e-8 (the basis-set gradient's criterion: a density converged to about 1e-8
    /// rather than G, in 3-4 more iterations)
    #[arg(long, value_name = "G", default_value_t = ScfOptions::DEFAULT_GRADIENT_TOLERANCE)]
    gradient_tolerance: f64,
}

/// Options of `tutti adjoint gradient`.
#[derive(Args)]
struct GradientArgs {
    #[command(flatten)]
    molecule: MoleculeArgs,
    /// The devices: one rank each, the SCF's J/K builds and every gradient loop split among
    /// them.
    #[command(flatten)]
    devices: DeviceArgs,
    /// Run the serial reference implementation (on every rank, unsplit) instead of the split,
    /// threaded one.
    #[arg(long)]
    serial: bool,
    /// Print the memory plan (the SCF's objects and the gradient's) and exit; exits non-zero
    /// with the numbers when it does not fit.
    #[arg(long)]
    plan: bool,
    /// Where to write the JSON gradient (energy, per-atom shells with grad_exponents and
    /// grad_coefficients, per-element sums, timings); `-` for standard output, the summary
    /// then going to standard error (and `--json`, which would print a second object there,
    /// refused).
    #[arg(long, value_name = "FILE", required_unless_present = "plan")]
    out: Option<String>,
}

pub fn run(args: &AdjointArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    match &args.command {
        AdjointCommand::Energy(energy) => run_energy(energy, processes, json),
        AdjointCommand::Gradient(gradient) => run_gradient(gradient, processes, json),
    }
}

/// The molecule of `--xyz` with `--charge`, the basis set of `--basis`, and the basis
/// placed on the molecule.
fn load_input(args: &MoleculeArgs) -> Result<(Molecule, BasisSet, Basis), Failure> {
    let MoleculeArgs {
        xyz,
        basis,
        charge,
        cartesian,
        max_iterations: _,
    } = args;
    let (charge, cartesian) = (*charge, *cartesian);
    let text = std::fs::read_to_string(xyz)
        .map_err(|err| Failure::input(format!("cannot read --xyz `{xyz}`: {err}")))?;
    let molecule = Molecule::from_xyz(&text)
        .and_then(|m| m.with_charge(charge))
        .map_err(|err| Failure::from(err).context(format_args!("--xyz `{xyz}`")))?;
    let basis_set = BasisSet::load(basis).map_err(|err| Failure::from(err).context("--basis"))?;
    let kind = if cartesian {
        AngularKind::Cartesian
    } else {
        AngularKind::Spherical
    };
    let placed = Basis::new(&molecule, &basis_set, kind)?;
    Ok((molecule, basis_set, placed))
}

/// The largest |value| of one kind of parameter and where it is: (value, shell index,
/// primitive index, parameter).
fn largest(
    gradient: &RhfGradient,
    pick: impl Fn(&tutti_adjoint::ShellGradient) -> (&[f64], &[f64]),
) -> Option<(f64, usize, usize, f64)> {
    let mut best: Option<(f64, usize, usize, f64)> = None;
    for (index, shell) in gradient.shells.iter().enumerate() {
        let (grads, params) = pick(shell);
        for (primitive, (&grad, &param)) in grads.iter().zip(params).enumerate() {
            if best.is_none_or(|(b, ..)| grad.abs() > b.abs()) {
                best = Some((grad, index, primitive, param));
            }
        }
    }
    best
}

fn run_gradient(args: &GradientArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    let started = Instant::now();
    if json && args.out.as_deref() == Some("-") {
        return Err(Failure::input(
            "`--json` and `--out -` both print a JSON object on standard output: give `--out` \
             a file with `--json`, or leave `--json` out to print the gradient document",
        ));
    }
    let (molecule, basis_set, basis) = load_input(&args.molecule)?;
    let mut options = GradientOptions::default()
        .with_resources(args.devices.resources())
        .with_serial(args.serial);
    options.scf = args.molecule.scf_options(options.scf);
    let mut inputs = args.molecule.to_json(&args.devices);
    inputs["serial"] = args.serial.into();
    inputs["plan"] = args.plan.into();
    inputs["out"] = args.out.as_deref().into();
    if args.plan {
        processes.refuse_spanning("tutti adjoint gradient --plan")?;
        let plan = plan_gradient(&molecule, &basis, &options)?;
        if json {
            let fields = json!({ "inputs": inputs, "plan": plan.to_string() });
            print_json("adjoint gradient", started, fields);
        } else {
            println!("{plan}");
        }
        return Ok(());
    }
    let Some(out) = args.out.as_deref() else {
        return Err(Failure::input(
            "`--out FILE` is needed unless `--plan` is given",
        ));
    };
    // Over MPI every process reads the inputs and takes its share of the shell pairs; every
    // process holds the gradient, rank 0 writes and prints it.
    let group = processes.group(&options.scf.resources, tutti_adjoint::GPU_USE)?;
    let gradient = rhf_gradient_on(&group, &molecule, &basis, &options)?;
    if !processes.prints() {
        return Ok(());
    }
    let document = gradient.to_json(&molecule, basis_set.name());
    if out == "-" {
        println!("{document}");
    } else {
        std::fs::write(out, format!("{document}\n"))
            .map_err(|err| format!("cannot write --out `{out}`: {err}"))?;
    }
    if json {
        let fields = json!({
            "inputs": inputs,
            "basis": basis_set.name(),
            "atoms": molecule.atoms().len(),
            "shells": gradient.shells.len(),
            "parameters": gradient.shells.iter().map(|s| 2 * s.exponents.len()).sum::<usize>(),
            "energy": gradient.energy,
            "iterations": gradient.iterations,
            "max_abs_grad_exponent": largest(&gradient, |s| (&s.grad_exponents, &s.exponents))
                .map(|(grad, ..)| grad.abs()),
            "max_abs_grad_coefficient": largest(&gradient, |s| (&s.grad_coefficients, &s.coefficients))
                .map(|(grad, ..)| grad.abs()),
            "processes": processes.size(),
            "devices": gradient.devices,
            "device_kind": device_kind(group.devices()),
            "outputs": { "gradient": out },
            "timings": gradient.timings,
        });
        print_json("adjoint gradient", started, fields);
        return Ok(());
    }
    // With `--out -` the JSON owns standard output; the summary goes to standard error.
    let summary = gradient_summary(args, out, &molecule, basis_set.name(), &gradient);
    if out == "-" {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    Ok(())
}

/// The human summary of a gradient run: sizes, energy, the largest components, timings.
fn gradient_summary(
    args: &GradientArgs,
    out: &str,
    molecule: &Molecule,
    basis_name: &str,
    gradient: &RhfGradient,
) -> String {
    use std::fmt::Write;

    let primitives: usize = gradient.shells.iter().map(|s| s.exponents.len()).sum();
    let angular = if args.molecule.cartesian {
        "cartesian"
    } else {
        "spherical"
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "RHF/{basis_name} ({angular}) gradient, {} atoms, {} shells, {} parameters \
         ({primitives} exponents, {primitives} coefficients)",
        molecule.atoms().len(),
        gradient.shells.len(),
        2 * primitives,
    );
    let _ = writeln!(
        text,
        "  E(RHF)        = {:.10} Eh ({} SCF iterations)",
        gradient.energy, gradient.iterations
    );
    let location = |shell: usize, primitive: usize| {
        let shell_data = &gradient.shells[shell];
        let symbol = molecule
            .atoms()
            .get(shell_data.atom)
            .map_or("?", |atom| atom.symbol());
        format!(
            "atom {} ({symbol}), shell {shell} (l = {}), primitive {primitive}",
            shell_data.atom, shell_data.l
        )
    };
    if let Some((grad, shell, primitive, alpha)) =
        largest(gradient, |s| (&s.grad_exponents, &s.exponents))
    {
        let _ = writeln!(
            text,
            "  max |dE/dalpha| = {:.6e} Eh bohr^2 at {}, alpha = {alpha}",
            grad.abs(),
            location(shell, primitive)
        );
    }
    if let Some((grad, shell, primitive, coefficient)) =
        largest(gradient, |s| (&s.grad_coefficients, &s.coefficients))
    {
        let _ = writeln!(
            text,
            "  max |dE/dc|     = {:.6e} Eh at {}, c = {coefficient}",
            grad.abs(),
            location(shell, primitive)
        );
    }
    let devices = match (args.serial, gradient.devices) {
        (true, _) => "serial".to_string(),
        (false, 1) => "1 device".to_string(),
        (false, n) => format!("{n} devices"),
    };
    let t = &gradient.timings;
    let _ = writeln!(
        text,
        "  time: SCF {:.3} s, overlap {:.3} s, core Hamiltonian {:.3} s, two-electron {:.3} s, \
         Fock {:.3} s, total {:.3} s ({devices})",
        t.scf, t.overlap, t.core_hamiltonian, t.two_electron, t.fock, t.total
    );
    if out != "-" {
        let _ = writeln!(text, "  wrote {out}");
    }
    text
}

fn run_energy(args: &EnergyArgs, processes: &Processes, json: bool) -> Result<(), Failure> {
    let start = Instant::now();
    let (molecule, basis_set, basis) = load_input(&args.molecule)?;
    let input_seconds = start.elapsed().as_secs_f64();
    let options = args.molecule.scf_options(
        ScfOptions::default()
            .with_resources(args.devices.resources())
            .with_gradient_tolerance(
                (args.gradient_tolerance != 0.0).then_some(args.gradient_tolerance),
            ),
    );
    let mut inputs = args.molecule.to_json(&args.devices);
    inputs["plan"] = args.plan.into();
    // null: the density criterion.
    inputs["gradient_tolerance"] = (args.gradient_tolerance != 0.0)
        .then_some(args.gradient_tolerance)
        .into();
    if args.plan {
        processes.refuse_spanning("tutti adjoint energy --plan")?;
        let plan = plan(&molecule, &basis, &options)?;
        if json {
            let fields = json!({ "inputs": inputs, "plan": plan.to_string() });
            print_json("adjoint energy", start, fields);
        } else {
            println!("{plan}");
        }
        return Ok(());
    }
    let group = processes.group(&options.resources, tutti_adjoint::GPU_USE)?;
    let result = rhf_on(&group, &molecule, &basis, &options)?;
    if !processes.prints() {
        return Ok(());
    }
    let summary = EnergySummary::new(&result, &basis, &molecule, basis_set.name(), input_seconds);
    if json {
        // The library's summary (energy, sizes, convergence, timings), and the run's inputs.
        let mut fields = serde_json::to_value(&summary)
            .map_err(|err| format!("the energy summary as JSON: {err}"))?;
        fields["inputs"] = inputs;
        fields["processes"] = processes.size().into();
        fields["device_kind"] = device_kind(group.devices());
        print_json("adjoint energy", start, fields);
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
        "  converged in {} iterations (last dE {:.1e} Eh, dP {:.1e}, orbital gradient {:.1e})",
        summary.iterations, summary.delta_energy, summary.delta_density, summary.orbital_gradient
    );
    let devices = match summary.devices {
        1 => "1 device".to_string(),
        n => format!("{n} devices"),
    };
    println!(
        "  time: input {:.3} s, setup {:.3} s, Fock {:.3} s ({:.4} s per build, {devices}), SCF total {:.3} s",
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

    /// A process on its own (no MPI).
    fn alone() -> Processes {
        Processes::start(tutti_mpi::launch::MpiMode::Off).expect("no MPI")
    }

    fn molecule(xyz: &str, basis: &str) -> MoleculeArgs {
        MoleculeArgs {
            xyz: xyz.to_string(),
            basis: basis.to_string(),
            charge: 0,
            cartesian: false,
            max_iterations: None,
        }
    }

    fn two_devices() -> DeviceArgs {
        DeviceArgs {
            devices: Some(2),
            kind: tutti_backend::KindRequest::Cpu,
            ..DeviceArgs::default()
        }
    }

    fn args(xyz: &str, basis: &str) -> EnergyArgs {
        EnergyArgs {
            molecule: molecule(xyz, basis),
            devices: two_devices(),
            plan: false,
            gradient_tolerance: ScfOptions::DEFAULT_GRADIENT_TOLERANCE,
        }
    }

    #[test]
    fn energy_runs_and_bad_input_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("tutti-cli-h2-{}.xyz", std::process::id()));
        std::fs::write(&path, "2\nH2\nH 0 0 0\nH 0 0 0.74\n").unwrap();
        let xyz = path.to_str().unwrap();
        assert!(run_energy(&args(xyz, "sto-3g"), &alone(), true).is_ok());
        // --plan prints the plan and succeeds; a cap it cannot hold is refused with numbers.
        let mut planned = args(xyz, "sto-3g");
        planned.plan = true;
        assert!(run_energy(&planned, &alone(), true).is_ok());
        planned.devices.device_memory_mib = Some(1);
        assert!(
            run_energy(&planned, &alone(), true).is_ok(),
            "1 MiB holds H2/sto-3g"
        );
        let mut zero = args(xyz, "sto-3g");
        zero.devices.devices = Some(0);
        let failure = run_energy(&zero, &alone(), true).unwrap_err();
        assert!(failure.message().contains("zero devices"), "{failure}");
        assert_eq!(failure.exit_code(), 2);
        let failure = run_energy(&args(xyz, "no-such-basis"), &alone(), true).unwrap_err();
        let message = failure.message();
        assert!(
            message.contains("--basis") && message.contains("sto-3g"),
            "{message}"
        );
        assert_eq!(failure.exit_code(), 2);
        // An SCF stopped before it converges is a computation failure.
        let mut stopped = args(xyz, "sto-3g");
        stopped.molecule.max_iterations = Some(1);
        let failure = run_energy(&stopped, &alone(), true).unwrap_err();
        assert!(failure.message().contains("did not converge"), "{failure}");
        assert_eq!(failure.exit_code(), 1);
        std::fs::remove_file(&path).unwrap();
        let failure = run_energy(&args(xyz, "sto-3g"), &alone(), true).unwrap_err();
        assert!(failure.message().contains("--xyz"), "{failure}");
        assert_eq!(failure.exit_code(), 2);
    }

    /// PySCF 2.14's built-in sto-3g digits for H, as an NWChem file.
    const PYSCF_STO3G_H: &str = "H    S
      3.42525091             0.15432897
      0.62391373             0.53532814
      0.16885540             0.44463454
";

    /// /work/shared/reference/adjoint/h2_sto3g.json: H2 with R = 1.4 bohr (z = -+0.7 bohr,
    /// here in Angstrom), PySCF 2.14 `e_rhf` and, for atom 0, `gradient.flat_richardson`
    /// (central finite differences, Richardson-extrapolated): dE/dalpha_i then dE/dc_i.
    const H2_XYZ: &str = "2\nH2\nH 0 0 -0.370424047644\nH 0 0 0.370424047644\n";
    const H2_ENERGY: f64 = -1.116714325062551;
    const H2_ATOM0_FD: [f64; 6] = [
        0.0009702490320461712,
        0.02753801233085289,
        0.06245298329777559,
        0.0875149751777826,
        0.004781982939257763,
        -0.03613310382011292,
    ];

    fn gradient_args(xyz: &str, basis: &str, out: &str) -> GradientArgs {
        GradientArgs {
            molecule: molecule(xyz, basis),
            devices: two_devices(),
            serial: false,
            plan: false,
            out: Some(out.to_string()),
        }
    }

    #[test]
    fn gradient_writes_json_matching_pyscf_finite_differences() {
        let dir = std::env::temp_dir().join(format!("tutti-cli-grad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let xyz = dir.join("h2.xyz");
        let basis = dir.join("sto3g-pyscf.nw");
        let out = dir.join("grad.json");
        std::fs::write(&xyz, H2_XYZ).unwrap();
        std::fs::write(&basis, PYSCF_STO3G_H).unwrap();
        let args = gradient_args(
            xyz.to_str().unwrap(),
            basis.to_str().unwrap(),
            out.to_str().unwrap(),
        );
        run_gradient(&args, &alone(), false).expect("h2/sto-3g gradient");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("JSON");
        let energy = json["energy"].as_f64().expect("energy");
        assert!((energy - H2_ENERGY).abs() < 1e-8, "{energy}");
        let shell = &json["basis"][0]["shells"][0];
        assert_eq!(json["basis"][0]["symbol"], "H");
        assert_eq!(shell["l"], 0);
        let values = |key: &str| -> Vec<f64> {
            shell[key]
                .as_array()
                .unwrap_or_else(|| panic!("{key} in {shell}"))
                .iter()
                .map(|v| v.as_f64().expect("a number"))
                .collect()
        };
        let got = [values("grad_exponents"), values("grad_coefficients")].concat();
        assert_eq!(got.len(), 6);
        for (k, (&got, &reference)) in got.iter().zip(&H2_ATOM0_FD).enumerate() {
            assert!(
                (got - reference).abs() <= (1e-6 * reference.abs()).max(1e-8),
                "parameter {k}: {got} vs {reference}"
            );
        }

        // The summary names the largest component: here dE/dalpha of the most diffuse
        // primitive (0.0625 Eh bohr^2 on either atom).
        let rhf = tutti_adjoint::rhf_gradient(
            &Molecule::from_xyz(H2_XYZ).unwrap(),
            &Basis::new(
                &Molecule::from_xyz(H2_XYZ).unwrap(),
                &BasisSet::load(basis.to_str().unwrap()).unwrap(),
                AngularKind::Spherical,
            )
            .unwrap(),
            &GradientOptions::default().with_serial(true),
        )
        .expect("serial gradient");
        let (grad, _, primitive, alpha) =
            largest(&rhf, |s| (&s.grad_exponents, &s.exponents)).expect("a largest");
        assert_eq!((primitive, alpha), (2, 0.1688554));
        assert!((grad - H2_ATOM0_FD[2]).abs() < 1e-8, "{grad}");

        let message = run_gradient(
            &gradient_args(
                xyz.to_str().unwrap(),
                "no-such-basis",
                out.to_str().unwrap(),
            ),
            &alone(),
            false,
        )
        .unwrap_err();
        assert!(message.message().contains("--basis"), "{message}");
        assert_eq!(message.exit_code(), 2);
        let message = run_gradient(
            &gradient_args(
                xyz.to_str().unwrap(),
                "sto-3g",
                dir.join("missing").join("grad.json").to_str().unwrap(),
            ),
            &alone(),
            false,
        )
        .unwrap_err();
        assert!(message.message().contains("--out"), "{message}");
        assert_eq!(
            message.exit_code(),
            1,
            "writing the output is part of the computation"
        );
        std::fs::write(&xyz, "1\nH\nH 0 0 0\n").unwrap();
        let message = run_gradient(
            &gradient_args(xyz.to_str().unwrap(), "sto-3g", out.to_str().unwrap()),
            &alone(),
            false,
        )
        .unwrap_err();
        assert!(message.message().contains("even"), "{message}");
        assert_eq!(message.exit_code(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
