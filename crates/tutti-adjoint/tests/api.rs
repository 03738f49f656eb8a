//! Behaviour through the public API: names, files, and clear errors for bad input.

use tutti_adjoint::{rhf, AdjointError, AngularKind, Basis, BasisSet, Molecule, ScfOptions};
use tutti_backend::Resources;

fn water() -> Molecule {
    Molecule::from_xyz("3\nwater\nO 0 0 0\nH 0 0.7569503 0.5858823\nH 0 -0.7569503 0.5858823\n")
        .expect("the water XYZ text is valid")
}

#[test]
fn unknown_basis_and_missing_element_are_clear_errors() {
    let error = BasisSet::load("6-311++g**").unwrap_err();
    assert!(
        matches!(error, AdjointError::UnknownBasis { .. }),
        "{error}"
    );
    let potassium = Molecule::from_bohr(&[("K", [0.0; 3]), ("H", [0.0, 0.0, 4.0])]).unwrap();
    let error = Basis::new(
        &potassium,
        &BasisSet::named("def2-svp").unwrap(),
        AngularKind::Spherical,
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("K") && message.contains("def2-svp"),
        "{message}"
    );
}

#[test]
fn nwchem_file_gives_the_same_energy_as_the_shipped_name() {
    let molecule = water();
    let shipped = BasisSet::named("6-31g").unwrap();
    let path = std::env::temp_dir().join(format!("tutti-adjoint-631g-{}.nw", std::process::id()));
    std::fs::write(&path, include_str!("../data/basis/6-31g.nw")).unwrap();
    let from_file = BasisSet::load(path.to_str().unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let options = ScfOptions::default().with_resources(Resources::cpu(1));
    let a = rhf(
        &molecule,
        &Basis::new(&molecule, &shipped, AngularKind::Spherical).unwrap(),
        &options,
    )
    .unwrap();
    let b = rhf(
        &molecule,
        &Basis::new(&molecule, &from_file, AngularKind::Spherical).unwrap(),
        &options,
    )
    .unwrap();
    assert_eq!(a.energy, b.energy);
    assert!((a.energy - -75.98399).abs() < 1e-4, "{}", a.energy);
}

#[test]
fn odd_electrons_and_iteration_limit_are_errors() {
    let molecule = water().with_charge(1).unwrap();
    let basis = Basis::new(
        &molecule,
        &BasisSet::named("sto-3g").unwrap(),
        AngularKind::Spherical,
    )
    .unwrap();
    let message = rhf(&molecule, &basis, &ScfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(message.contains("even"), "{message}");
    let molecule = water();
    let error = rhf(
        &molecule,
        &basis,
        &ScfOptions::default()
            .with_max_iterations(3)
            .with_gradient_tolerance(None),
    )
    .unwrap_err();
    assert!(
        matches!(
            error,
            AdjointError::NotConverged {
                iterations: 3,
                gradient_tolerance: None,
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("(criterion: energy and density changes)")
            && message.contains("orbital gradient"),
        "{message}"
    );
    // With the orbital-gradient criterion, the message names it and its target.
    let error = rhf(
        &molecule,
        &basis,
        &ScfOptions::default()
            .with_max_iterations(3)
            .with_gradient_tolerance(Some(1e-5)),
    )
    .unwrap_err();
    match &error {
        AdjointError::NotConverged {
            iterations: 3,
            orbital_gradient,
            gradient_tolerance: Some(tolerance),
            ..
        } => {
            assert_eq!(*tolerance, 1e-5);
            assert!(orbital_gradient.is_finite() && *orbital_gradient > 0.0);
        }
        other => panic!("{other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("(criterion: energy change and orbital gradient)")
            && message.contains("(target 1.0e-5)"),
        "{message}"
    );
}

#[test]
fn serial_and_threaded_scf_agree_and_cartesian_runs() {
    let molecule = water();
    let set = BasisSet::named("6-31g*").unwrap();
    let spherical = Basis::new(&molecule, &set, AngularKind::Spherical).unwrap();
    let serial = rhf(
        &molecule,
        &spherical,
        &ScfOptions::default().with_serial_fock(true),
    )
    .unwrap();
    let threaded = rhf(
        &molecule,
        &spherical,
        &ScfOptions::default().with_resources(Resources::cpu(3)),
    )
    .unwrap();
    assert!((serial.energy - threaded.energy).abs() < 1e-11);
    assert_eq!(spherical.nao(), 18);
    let cartesian = Basis::new(&molecule, &set, AngularKind::Cartesian).unwrap();
    assert_eq!(cartesian.nao(), 19);
    let cart = rhf(&molecule, &cartesian, &ScfOptions::default()).unwrap();
    // Six Cartesian d functions contain an extra s-type combination: the variational energy
    // can only go down.
    assert!(cart.energy < serial.energy);
}

#[test]
fn an_xyz_count_the_lines_cannot_hold_is_refused_before_allocating() {
    // 10^11 atoms announced (3.2 TB if reserved), one given.
    for text in [
        "100000000000\nx\nH 0 0 0\n",
        "18446744073709551615\nx\nH 0 0 0\n",
        "3\nx\nH 0 0 0\nH 0 0 1\n",
    ] {
        let error = Molecule::from_xyz(text).unwrap_err();
        assert!(
            matches!(error, AdjointError::Xyz { line: 1, .. }),
            "{text:?}: {error}"
        );
        assert!(error.to_string().contains("truncated"), "{error}");
    }
    // Blank trailing lines are still fine, and extra atoms still an error.
    assert!(Molecule::from_xyz("2\nx\nH 0 0 0\nH 0 0 1\n\n\n").is_ok());
    let error = Molecule::from_xyz("1\nx\nH 0 0 0\nH 0 0 1\n").unwrap_err();
    assert!(error.to_string().contains("more atoms"), "{error}");
}
