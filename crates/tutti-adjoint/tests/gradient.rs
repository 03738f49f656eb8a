//! The basis-parameter gradient: against PySCF 2.14 finite differences and pyscfad's
//! reverse-mode AD (reference files in tests/data, with their basis parameters), against our
//! own central differences (def2-tzvp with d and f, a Cartesian basis), serial vs threaded at
//! several device counts, and invariants of the parameterization.
// Test helpers outside #[test] functions: a malformed reference should fail loudly.
#![allow(clippy::unwrap_used)]

mod common;

use tutti_adjoint::{
    rhf, rhf_gradient, AngularKind, Basis, BasisSet, GradientOptions, Molecule, RhfGradient,
    ScfOptions, ShellData, ShellGradient,
};
use tutti_backend::Resources;

/// SCF settings tight enough that the error of the gradient from an unconverged density
/// (first order in the density error) and the noise of finite differences stay far below
/// the tolerances.
fn tight(devices: usize) -> ScfOptions {
    let mut scf = ScfOptions::default()
        .with_resources(Resources::cpu(devices))
        .with_gradient_tolerance(None);
    scf.energy_tolerance = 1e-12;
    scf.density_tolerance = 1e-10;
    scf
}

fn options(devices: usize, serial: bool) -> GradientOptions {
    let mut options = GradientOptions::default().with_serial(serial);
    options.scf = tight(devices);
    options
}

/// The shells of each atom, in the basis's order.
fn per_atom(gradient: &RhfGradient, atoms: usize) -> Vec<Vec<&ShellGradient>> {
    let mut out: Vec<Vec<&ShellGradient>> = vec![Vec::new(); atoms];
    for shell in &gradient.shells {
        out[shell.atom].push(shell);
    }
    out
}

/// Our gradient in the reference's `flat_index` order ([atom, shell, "exp"|"coef", primitive]).
fn flat(gradient: &RhfGradient, case: &common::Case) -> Vec<f64> {
    let shells = per_atom(gradient, case.molecule().atoms().len());
    case.json["gradient"]["flat_index"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let [atom, shell, primitive] = [0, 1, 3].map(|k| entry[k].as_u64().unwrap() as usize);
            let shell = shells[atom][shell];
            match entry[2].as_str().unwrap() {
                "exp" => shell.grad_exponents[primitive],
                _ => shell.grad_coefficients[primitive],
            }
        })
        .collect()
}

/// The reference's own error estimate |g(2h) - g(h)| / 3 of each flat entry.
fn flat_fd_error(case: &common::Case) -> Vec<f64> {
    let basis = case.json["basis"].as_array().unwrap();
    case.json["gradient"]["flat_index"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let [atom, shell, primitive] = [0, 1, 3].map(|k| entry[k].as_u64().unwrap() as usize);
            let key = match entry[2].as_str().unwrap() {
                "exp" => "fd_err_exponents",
                _ => "fd_err_coefficients",
            };
            basis[atom]["shells"][shell][key][primitive]
                .as_f64()
                .unwrap()
        })
        .collect()
}

/// Every parameter against PySCF's Richardson-extrapolated central differences: within
/// 1e-6 relative or 1e-8 absolute, plus the reference's own uncertainty, the larger of its
/// error estimate and its distance to pyscfad's AD gradient (independent of the FD runs). A
/// few FD entries are off by more than 1e-6 relative (up to 4.5e-8 absolute on ch4/def2-svp,
/// beyond their own estimate); there the AD value agrees with ours to ~1e-12. And every
/// parameter against pyscfad to 1e-7 relative or 1e-9 absolute (measured: <= 3e-9 relative).
fn check_reference(name: &str) {
    let case = common::load(name);
    let molecule = case.molecule();
    let basis = case.basis(AngularKind::Spherical);
    let gradient = rhf_gradient(&molecule, &basis, &options(2, false)).unwrap();
    assert!((gradient.energy - case.f64("e_rhf")).abs() < 1e-9);
    let ours = flat(&gradient, &case);
    let richardson = common::floats(&case.json["gradient"]["flat_richardson"]);
    let ad = common::floats(&case.json["gradient"]["flat_ad_pyscfad"]);
    let fd_error = flat_fd_error(&case);
    assert_eq!(ours.len(), richardson.len());
    let (mut worst_fd, mut worst_ad, mut beyond_1e6) = (0.0f64, 0.0f64, 0);
    for k in 0..ours.len() {
        let (g, r, a) = (ours[k], richardson[k], ad[k]);
        let scaled =
            |reference: f64, floor: f64| (g - reference).abs() / reference.abs().max(floor);
        worst_fd = worst_fd.max(scaled(r, 1e-2));
        worst_ad = worst_ad.max(scaled(a, 1e-2));
        let allowed = (1e-6 * r.abs()).max(1e-8) + fd_error[k].max((r - a).abs());
        assert!(
            (g - r).abs() <= allowed,
            "{name} parameter {k}: ours {g:e}, PySCF FD {r:e}, allowed {allowed:e}"
        );
        if (g - r).abs() > (1e-6 * r.abs()).max(1e-8) {
            beyond_1e6 += 1;
            println!(
                "{name} parameter {k}: |ours - FD| = {:.1e} (FD error estimate {:.1e}, |FD - AD| {:.1e}), |ours - AD| = {:.1e}",
                (g - r).abs(),
                fd_error[k],
                (r - a).abs(),
                (g - a).abs()
            );
        }
        assert!(
            (g - a).abs() <= (1e-7 * a.abs()).max(1e-9),
            "{name} parameter {k}: ours {g:e}, pyscfad {a:e}"
        );
    }
    println!(
        "{name}: {} parameters; max |ours - FD| / max(|FD|, 1e-2) = {worst_fd:.1e} ({beyond_1e6} beyond 1e-6 rel / 1e-8 abs, all within the FD's own uncertainty); vs pyscfad AD {worst_ad:.1e}; gradient {:.2} s after an SCF of {:.2} s",
        ours.len(),
        gradient.timings.total - gradient.timings.scf,
        gradient.timings.scf
    );
}

#[test]
fn h2_sto3g_matches_pyscf() {
    check_reference("h2_sto3g");
}

#[test]
fn h2o_sto3g_matches_pyscf() {
    check_reference("h2o_sto3g");
}

#[test]
fn h2o_631g_matches_pyscf() {
    check_reference("h2o_631g");
}

#[test]
fn ch4_def2svp_matches_pyscf() {
    check_reference("ch4_def2svp");
}

#[test]
fn h2o_ccpvdz_matches_pyscf() {
    // Generally contracted s shells, split into one shell per column.
    check_reference("h2o_ccpvdz");
}

/// A parameter of one atom's shell: (atom, shell within the atom, exponent?, primitive).
type Parameter = (usize, usize, bool, usize);

/// Our energy with the basis parameters moved by `step` along `direction` (one entry per
/// parameter, atoms then shells then primitives, exponents before coefficients).
fn displaced_energy(
    molecule: &Molecule,
    shells: &[Vec<ShellData>],
    kind: AngularKind,
    direction: &[f64],
    step: f64,
) -> f64 {
    let mut moved = shells.to_vec();
    let mut k = 0;
    for atom in &mut moved {
        for shell in atom {
            for value in shell
                .exponents
                .iter_mut()
                .chain(shell.coefficients.iter_mut())
            {
                *value += step * direction[k];
                k += 1;
            }
        }
    }
    let basis = Basis::from_atom_shells(molecule, &moved, kind).unwrap();
    // The energy's error is quadratic in the density's: 1e-8 leaves it far below 1e-13 Eh.
    let mut scf = tight(2);
    scf.density_tolerance = 1e-8;
    rhf(molecule, &basis, &scf).unwrap().energy
}

/// The central difference D(h) of our energy along `direction`, h = 1e-4, or with
/// `richardson` its extrapolation (4 D(h) - D(2h)) / 3, truncation error O(h^4). Coefficient
/// derivatives have large third derivatives (D(1e-4) is off by 1.4e-5 relative for the
/// def2-tzvp O p coefficient of the contracted p shell), hence the extrapolation for any
/// direction that moves a coefficient; relative exponent steps do not need it.
fn directional_difference(
    molecule: &Molecule,
    shells: &[Vec<ShellData>],
    kind: AngularKind,
    direction: &[f64],
    richardson: bool,
) -> f64 {
    let h = 1e-4;
    let central = |h: f64| {
        (displaced_energy(molecule, shells, kind, direction, h)
            - displaced_energy(molecule, shells, kind, direction, -h))
            / (2.0 * h)
    };
    if richardson {
        (4.0 * central(h) - central(2.0 * h)) / 3.0
    } else {
        central(h)
    }
}

/// The parameter vector's layout: (atom, shell, exponent?, primitive) per entry.
fn layout(shells: &[Vec<ShellData>]) -> Vec<Parameter> {
    let mut out = Vec::new();
    for (atom, list) in shells.iter().enumerate() {
        for (index, shell) in list.iter().enumerate() {
            for exponent in [true, false] {
                for primitive in 0..shell.exponents.len() {
                    out.push((atom, index, exponent, primitive));
                }
            }
        }
    }
    out
}

fn analytic_value(
    gradient: &[Vec<&ShellGradient>],
    (atom, shell, exponent, primitive): Parameter,
) -> f64 {
    let shell = gradient[atom][shell];
    if exponent {
        shell.grad_exponents[primitive]
    } else {
        shell.grad_coefficients[primitive]
    }
}

/// Checks single parameters and one direction moving every parameter at once (exponents by
/// a relative amount, coefficients by an absolute one, pseudo-random signs and sizes), each
/// against central differences of our own energy (Richardson-extrapolated where a
/// coefficient moves): 1e-6 relative (1e-8 absolute); for the direction, relative to
/// sum |g_k v_k|. Steps h = 1e-4 relative (exponents) or absolute (coefficients) and SCF
/// noise ~1e-13 Eh leave ~1e-8 of error at most (measured: <= 4.4e-8 relative).
fn check_own_differences(
    name: &str,
    molecule: &Molecule,
    shells: &[Vec<ShellData>],
    kind: AngularKind,
    parameters: &[Parameter],
) {
    let basis = Basis::from_atom_shells(molecule, shells, kind).unwrap();
    let gradient = rhf_gradient(molecule, &basis, &options(2, false)).unwrap();
    let analytic = per_atom(&gradient, molecule.atoms().len());
    let all = layout(shells);
    let value_of = |(atom, shell, exponent, primitive): Parameter| {
        let shell = &shells[atom][shell];
        if exponent {
            shell.exponents[primitive]
        } else {
            shell.coefficients[primitive]
        }
    };
    let mut worst: f64 = 0.0;
    for &parameter in parameters {
        let direction: Vec<f64> = all
            .iter()
            .map(|&p| {
                if p != parameter {
                    0.0
                } else if p.2 {
                    value_of(p)
                } else {
                    1.0
                }
            })
            .collect();
        let scale = if parameter.2 {
            value_of(parameter)
        } else {
            1.0
        };
        let numeric =
            directional_difference(molecule, shells, kind, &direction, !parameter.2) / scale;
        let exact = analytic_value(&analytic, parameter);
        let error = (exact - numeric).abs();
        worst = worst.max(error / exact.abs().max(1e-2));
        assert!(
            error <= (1e-6 * exact.abs()).max(1e-8),
            "{name} {parameter:?}: analytic {exact:e}, numeric {numeric:e}"
        );
    }
    // Every parameter at once.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let direction: Vec<f64> = all
        .iter()
        .map(|&p| {
            if p.2 {
                0.5 * value_of(p) * next()
            } else {
                0.5 * next()
            }
        })
        .collect();
    let numeric = directional_difference(molecule, shells, kind, &direction, true);
    let terms: Vec<f64> = all
        .iter()
        .zip(&direction)
        .map(|(&p, v)| analytic_value(&analytic, p) * v)
        .collect();
    let exact: f64 = terms.iter().sum();
    let size: f64 = terms.iter().map(|t| t.abs()).sum();
    let directional = (exact - numeric).abs() / size;
    assert!(
        directional <= 1e-6,
        "{name} all {} parameters at once: analytic {exact:e}, numeric {numeric:e}",
        all.len()
    );
    println!(
        "{name}: {} single parameters, max |analytic - FD| / max(|g|, 1e-2) = {worst:.1e}; all {} parameters along one direction: {directional:.1e} of sum |g_k v_k|",
        parameters.len(),
        all.len()
    );
}

#[test]
fn h2o_def2tzvp_matches_own_differences() {
    // The shipped def2-tzvp (d and f on O); one parameter of each kind of shell.
    let case = common::load("h2o_def2tzvp");
    let molecule = case.molecule();
    let set = BasisSet::named("def2-tzvp").unwrap();
    let shells: Vec<Vec<ShellData>> = molecule
        .atoms()
        .iter()
        .map(|atom| set.shells_for(atom.charge).unwrap().to_vec())
        .collect();
    // The O f exponent alone; every parameter (d and f included) along one direction.
    let parameters = [(0, 10, true, 0)];
    check_own_differences(
        "h2o/def2-tzvp",
        &molecule,
        &shells,
        AngularKind::Spherical,
        &parameters,
    );
}

#[test]
fn cartesian_631gs_matches_own_differences() {
    let case = common::load("h2o_631gs_cart");
    let molecule = case.molecule();
    let parameters = [
        (0, 5, true, 0),  // O Cartesian d exponent
        (0, 3, false, 0), // O p coefficient
        (2, 0, true, 2),  // H s exponent
    ];
    check_own_differences(
        "h2o/6-31g* Cartesian",
        &molecule,
        &case.atom_shells(),
        AngularKind::Cartesian,
        &parameters,
    );
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
    a.iter()
        .zip(&b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn threaded_equals_serial_at_every_device_count() {
    // Water in 6-31g* (spherical d on O). At each device count both implementations start
    // from the same SCF (bitwise: the split Fock build is repeatable at a fixed count), so
    // what remains is their own rounding. Across device counts the SCF itself moves by its
    // rounding (reported, not the subject here; tests/ranks.rs bounds it).
    let case = common::load("h2o_631gs_cart");
    let molecule = case.molecule();
    let basis = case.basis(AngularKind::Spherical);
    let fully_serial = {
        let mut options = options(1, true);
        options.scf.serial_fock = true;
        rhf_gradient(&molecule, &basis, &options).unwrap()
    };
    let (mut line, mut scf_line) = (String::new(), String::new());
    for devices in [1, 2, 3, 4] {
        let serial = rhf_gradient(&molecule, &basis, &options(devices, true)).unwrap();
        let threaded = rhf_gradient(&molecule, &basis, &options(devices, false)).unwrap();
        assert_eq!(serial.energy.to_bits(), threaded.energy.to_bits());
        assert_eq!(threaded.devices, devices);
        let difference = relative_difference(&threaded, &serial);
        line += &format!(" {devices}: {difference:.1e}");
        scf_line += &format!(
            " {devices}: {:.1e}",
            relative_difference(&threaded, &fully_serial)
        );
        assert!(difference <= 1e-12, "{devices} devices: {difference:e}");
    }
    println!(
        "threaded vs serial gradient (same SCF), max relative difference by device count:{line}"
    );
    println!("threaded vs all-serial (serial Fock build in the SCF too):{scf_line}");
}

#[test]
fn threaded_shares_general_contractions_and_equals_serial() {
    // Water in cc-pVDZ: oxygen's s columns carry the same nine exponents (the threaded
    // gradient differentiates each primitive once for all of them) and two of them the same
    // non-zero primitives (its kets over them are computed together). The serial reference
    // does neither.
    let case = common::load("h2o_ccpvdz");
    let molecule = case.molecule();
    let basis = case.basis(AngularKind::Spherical);
    for devices in [1, 2] {
        let serial = rhf_gradient(&molecule, &basis, &options(devices, true)).unwrap();
        let threaded = rhf_gradient(&molecule, &basis, &options(devices, false)).unwrap();
        let difference = relative_difference(&threaded, &serial);
        println!("{devices} device(s): threaded vs serial {difference:.1e}");
        assert!(difference <= 1e-12, "{devices} devices: {difference:e}");
    }
}

#[test]
fn parameterization_invariants_hold() {
    // E is invariant under scaling all coefficients of a shell: sum_i c_i dE/dc_i = 0, and a
    // single-primitive shell's coefficient does not matter at all.
    let case = common::load("h2o_631g");
    let molecule = case.molecule();
    let gradient = rhf_gradient(
        &molecule,
        &case.basis(AngularKind::Spherical),
        &options(2, false),
    )
    .unwrap();
    for shell in &gradient.shells {
        let scale: f64 = shell
            .coefficients
            .iter()
            .zip(&shell.grad_coefficients)
            .map(|(c, g)| c * g)
            .sum();
        assert!(scale.abs() < 1e-12, "sum c dE/dc = {scale:e}");
        if shell.coefficients.len() == 1 {
            assert!(shell.grad_coefficients[0].abs() < 1e-12);
        }
    }
}

#[test]
fn per_element_sums_and_json_layout() {
    let case = common::load("ch4_def2svp");
    let molecule = case.molecule();
    let gradient = rhf_gradient(
        &molecule,
        &case.basis(AngularKind::Spherical),
        &options(2, false),
    )
    .unwrap();
    let elements = gradient.per_element(&molecule).unwrap();
    assert_eq!(elements.len(), 2);
    let (carbon, hydrogen) = (&elements[0], &elements[1]);
    assert_eq!((carbon.symbol.as_str(), carbon.atoms), ("C", 1));
    assert_eq!((hydrogen.symbol.as_str(), hydrogen.atoms), ("H", 4));
    let atoms = per_atom(&gradient, 5);
    for (k, shell) in hydrogen.shells.iter().enumerate() {
        for (p, total) in shell.grad_exponents.iter().enumerate() {
            let sum: f64 = (1..5).map(|a| atoms[a][k].grad_exponents[p]).sum();
            assert!((total - sum).abs() <= 1e-15 * sum.abs().max(1.0));
        }
    }
    let json: serde_json::Value =
        serde_json::from_str(&gradient.to_json(&molecule, "def2-svp")).unwrap();
    assert_eq!(json["energy"].as_f64().unwrap(), gradient.energy);
    assert_eq!(json["basis"].as_array().unwrap().len(), 5);
    let first = &json["basis"][1]["shells"][0];
    assert_eq!(json["basis"][1]["symbol"], "H");
    // The JSON holds the shortest round-trip text (ryu), but serde_json's default parser is
    // not correctly rounded: it may land one ulp off.
    let parsed = common::floats(&first["grad_exponents"]);
    assert_eq!(parsed.len(), atoms[1][0].grad_exponents.len());
    for (a, b) in parsed.iter().zip(&atoms[1][0].grad_exponents) {
        assert!((a - b).abs() <= 2.0 * f64::EPSILON * b.abs(), "{a} vs {b}");
    }
    assert_eq!(json["elements"][1]["atoms"], 4);
    for key in [
        "scf",
        "overlap",
        "core_hamiltonian",
        "two_electron",
        "fock",
        "total",
    ] {
        assert!(json["timings"][key].as_f64().unwrap() >= 0.0);
    }
    // Atoms of one element carrying different parameters have no per-element sum.
    let mut shells = case.atom_shells();
    shells[2][0].exponents[0] *= 1.01;
    let basis = Basis::from_atom_shells(&molecule, &shells, AngularKind::Spherical).unwrap();
    let uneven = rhf_gradient(&molecule, &basis, &options(2, false)).unwrap();
    assert!(uneven.per_element(&molecule).is_err());
}

#[path = "../examples/optimize_basis.rs"]
mod optimize_basis;

#[test]
fn exponent_optimization_lowers_the_energy() {
    // The worked example of docs/adjoint.md: steepest descent on the exponents of water's
    // sto-3g; the energy falls at every step and the gradient norm drops.
    let steps = optimize_basis::optimize(6).unwrap();
    assert_eq!(steps.len(), 7);
    for pair in steps.windows(2) {
        assert!(pair[1].energy < pair[0].energy, "{steps:?}");
    }
    let (first, last) = (&steps[0], &steps[steps.len() - 1]);
    assert!(first.energy - last.energy > 0.1, "{steps:?}");
    assert!(last.gradient_norm < 0.6 * first.gradient_norm, "{steps:?}");
}

/// The orbital-gradient criterion leaves the density accurate only to about its tolerance,
/// and the basis-set gradient is first order in the density's error: refused.
#[test]
fn the_orbital_gradient_criterion_is_refused_for_a_gradient() {
    let case = common::load("h2o_sto3g");
    let (molecule, basis) = (case.molecule(), case.basis(AngularKind::Spherical));
    let mut options = options(1, false);
    options.scf.gradient_tolerance = Some(1e-5);
    match rhf_gradient(&molecule, &basis, &options) {
        Err(tutti_adjoint::AdjointError::InvalidArgument { argument, .. }) => {
            assert_eq!(argument, "gradient_tolerance")
        }
        other => panic!("{:?}", other.map(|g| g.energy)),
    }
}
