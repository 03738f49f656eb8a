//! Optimizes the exponents of a basis set with the analytic basis-parameter gradient:
//! steepest descent in log-exponent space with a backtracking (Armijo) line search, one set
//! of exponents per element (the per-element sums of the gradient), contraction coefficients
//! held fixed. Starts from sto-3g for water and prints the energy at every step.
//!
//! `cargo run --release -p tutti-adjoint --example optimize_basis [-- STEPS]`.

use std::collections::BTreeMap;

use tutti_adjoint::{
    rhf, rhf_gradient, AngularKind, Basis, BasisSet, GradientOptions, Molecule, Result, ScfOptions,
    ShellData,
};

/// One accepted step: the energy and the gradient norm in log-exponent space.
#[derive(Clone, Debug)]
pub struct Step {
    /// RHF energy, hartree.
    pub energy: f64,
    /// |dE/d ln alpha| over every exponent of every element.
    pub gradient_norm: f64,
    /// Line-search step length accepted to reach this point (0 for the start).
    pub step_length: f64,
}

/// Water, r(OH) = 0.9572 A, angle 104.52 degrees, in bohr.
pub fn water() -> Result<Molecule> {
    Molecule::from_bohr(&[
        ("O", [0.0, 0.0, 0.0]),
        ("H", [0.0, 1.430_429_6, 1.107_157_2]),
        ("H", [0.0, -1.430_429_6, 1.107_157_2]),
    ])
}

/// dE/d ln alpha per element (by nuclear charge), shell and primitive.
type LogGradient = BTreeMap<u32, Vec<Vec<f64>>>;

/// Tight, on the density change (the gradient's criterion).
fn scf_options() -> ScfOptions {
    let mut scf = ScfOptions::default()
        .with_resources(tutti_backend::Resources::cpu(1))
        .with_gradient_tolerance(None);
    scf.energy_tolerance = 1e-12;
    scf.density_tolerance = 1e-10;
    scf
}

/// The energy of `molecule` with every element's shells from `elements`.
fn energy(molecule: &Molecule, elements: &BTreeMap<u32, Vec<ShellData>>) -> Result<f64> {
    let set = BasisSet::from_elements("optimized", elements.clone())?;
    let basis = Basis::new(molecule, &set, AngularKind::Spherical)?;
    Ok(rhf(molecule, &basis, &scf_options())?.energy)
}

/// dE/d ln alpha per element, shell and primitive (same layout as `elements`), and E.
fn log_gradient(
    molecule: &Molecule,
    elements: &BTreeMap<u32, Vec<ShellData>>,
) -> Result<(f64, LogGradient)> {
    let set = BasisSet::from_elements("optimized", elements.clone())?;
    let basis = Basis::new(molecule, &set, AngularKind::Spherical)?;
    let mut options = GradientOptions::default();
    options.scf = scf_options();
    let gradient = rhf_gradient(molecule, &basis, &options)?;
    let mut out = BTreeMap::new();
    for element in gradient.per_element(molecule)? {
        let shells = element
            .shells
            .iter()
            .map(|shell| {
                shell
                    .exponents
                    .iter()
                    .zip(&shell.grad_exponents)
                    .map(|(a, g)| a * g)
                    .collect()
            })
            .collect();
        out.insert(element.charge, shells);
    }
    Ok((gradient.energy, out))
}

fn norm(gradient: &LogGradient) -> f64 {
    gradient
        .values()
        .flatten()
        .flatten()
        .map(|g| g * g)
        .sum::<f64>()
        .sqrt()
}

/// alpha_i <- alpha_i exp(-t dE/d ln alpha_i) for every exponent.
fn moved(
    elements: &BTreeMap<u32, Vec<ShellData>>,
    gradient: &LogGradient,
    t: f64,
) -> BTreeMap<u32, Vec<ShellData>> {
    let mut out = elements.clone();
    for (charge, shells) in out.iter_mut() {
        for (shell, g) in shells.iter_mut().zip(&gradient[charge]) {
            for (a, g) in shell.exponents.iter_mut().zip(g) {
                *a *= (-t * g).exp();
            }
        }
    }
    out
}

/// Runs `steps` steepest-descent steps from sto-3g for water; every accepted step lowers
/// the energy (Armijo condition), so the energies decrease monotonically.
pub fn optimize(steps: usize) -> Result<Vec<Step>> {
    let molecule = water()?;
    let start = BasisSet::named("sto-3g")?;
    let mut elements: BTreeMap<u32, Vec<ShellData>> = BTreeMap::new();
    for atom in molecule.atoms() {
        if let Some(shells) = start.shells_for(atom.charge) {
            elements.insert(atom.charge, shells.to_vec());
        }
    }
    let (mut e, mut gradient) = log_gradient(&molecule, &elements)?;
    let mut history = vec![Step {
        energy: e,
        gradient_norm: norm(&gradient),
        step_length: 0.0,
    }];
    let mut t = 1.0;
    for _ in 0..steps {
        let slope = norm(&gradient).powi(2);
        // Backtrack until the Armijo condition holds; then try a longer step next time.
        let mut accepted = None;
        for _ in 0..30 {
            let candidate = moved(&elements, &gradient, t);
            if let Ok(value) = energy(&molecule, &candidate) {
                if value <= e - 1e-4 * t * slope {
                    accepted = Some(candidate);
                    break;
                }
            }
            t *= 0.5;
        }
        let Some(next) = accepted else { break };
        elements = next;
        (e, gradient) = log_gradient(&molecule, &elements)?;
        history.push(Step {
            energy: e,
            gradient_norm: norm(&gradient),
            step_length: t,
        });
        t *= 2.0;
    }
    Ok(history)
}

#[allow(dead_code)] // The tests include this file for `optimize` alone.
fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let steps = match std::env::args().nth(1) {
        Some(text) => text.parse()?,
        None => 10,
    };
    println!("step  E / Eh            |dE/d ln alpha|  step length");
    for (k, step) in optimize(steps)?.iter().enumerate() {
        println!(
            "{k:>4}  {:.10}  {:.3e}        {:.3e}",
            step.energy, step.gradient_norm, step.step_length
        );
    }
    Ok(())
}
