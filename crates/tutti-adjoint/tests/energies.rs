//! Total RHF energies against PySCF (conv_tol 1e-12), with the reference's own basis data.
// Test helpers outside #[test] functions: a malformed reference should fail loudly.
#![allow(clippy::unwrap_used)]

mod common;

use tutti_adjoint::{rhf, AngularKind, ScfOptions};
use tutti_backend::Resources;

fn check_energy(name: &str) {
    let case = common::load(name);
    let molecule = case.molecule();
    let kind = if case.json["cart"].as_bool() == Some(true) {
        AngularKind::Cartesian
    } else {
        AngularKind::Spherical
    };
    let basis = case.basis(kind);
    let result = rhf(
        &molecule,
        &basis,
        &ScfOptions::default().with_resources(Resources::cpu(2)),
    )
    .unwrap();
    let error = (result.energy - case.f64("e_rhf")).abs();
    println!(
        "{name}: nao {}, E = {:.12} Eh, |E - E_pyscf| = {error:.2e} Eh, {} iterations, {:.3} s",
        result.nao, result.energy, result.iterations, result.timings.total
    );
    assert!(error < 1e-8, "{name}: energy error {error:e}");
    // The density reproduces the electron count: tr(P S) = N.
    let s = tutti_adjoint::integrals::overlap(&basis);
    let mut electrons = 0.0;
    for i in 0..basis.nao() {
        for j in 0..basis.nao() {
            electrons += result.density[(i, j)] * s[(j, i)];
        }
    }
    assert!((electrons - molecule.electron_count() as f64).abs() < 1e-10);
}

#[test]
fn h2_sto3g_energy() {
    check_energy("h2_sto3g");
}

#[test]
fn h2o_sto3g_energy() {
    check_energy("h2o_sto3g");
}

#[test]
fn h2o_631g_energy() {
    check_energy("h2o_631g");
}

#[test]
fn h2o_ccpvdz_energy() {
    check_energy("h2o_ccpvdz");
}

#[test]
fn ch4_def2svp_energy() {
    check_energy("ch4_def2svp");
}

#[test]
fn h2o_ccpvtz_energy() {
    check_energy("h2o_ccpvtz");
}

#[test]
fn h2o_def2tzvp_energy() {
    check_energy("h2o_def2tzvp");
}

#[test]
fn h2o_631gs_cartesian_energy() {
    check_energy("h2o_631gs_cart");
}

#[test]
fn shipped_sets_are_the_reference_bases() {
    // These references were made from the shipped files; the shipped sets must parse to the
    // same shells, so `BasisSet::named` reproduces their energies.
    for (case, name) in [("h2o_def2tzvp", "def2-tzvp"), ("h2o_631gs_cart", "6-31g*")] {
        let case = common::load(case);
        let shipped = tutti_adjoint::BasisSet::named(name).unwrap();
        for (atom, shells) in case.molecule().atoms().iter().zip(case.atom_shells()) {
            assert_eq!(shipped.shells_for(atom.charge).unwrap(), shells.as_slice());
        }
    }
}

#[test]
fn single_atoms_in_the_shipped_cc_pvdz() {
    // He and Ar atoms: no nuclear repulsion, general contractions split, second row.
    let case = common::load("atoms_ccpvdz");
    let set = tutti_adjoint::BasisSet::named("cc-pvdz").unwrap();
    for symbol in ["He", "Ar"] {
        let atom = tutti_adjoint::Molecule::from_bohr(&[(symbol, [0.0; 3])]).unwrap();
        let basis = tutti_adjoint::Basis::new(&atom, &set, AngularKind::Spherical).unwrap();
        let reference = &case.json["energies"][symbol];
        assert_eq!(basis.nao() as u64, reference["nao"].as_u64().unwrap());
        let result = rhf(
            &atom,
            &basis,
            &ScfOptions::default().with_resources(Resources::cpu(2)),
        )
        .unwrap();
        let error = (result.energy - reference["e_rhf"].as_f64().unwrap()).abs();
        println!(
            "{symbol}/cc-pvdz: E = {:.12} Eh, |E - E_pyscf| = {error:.2e} Eh",
            result.energy
        );
        assert!(error < 1e-8, "{symbol}: {error:e}");
    }
}
