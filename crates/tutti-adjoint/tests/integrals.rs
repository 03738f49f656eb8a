//! S, T, V and ERIs against PySCF (tests/data, basis parameters taken from the same files).
// Test helpers outside #[test] functions: a malformed reference should fail loudly.
#![allow(clippy::unwrap_used)]

mod common;

use tutti_adjoint::integrals::{kinetic, nuclear_attraction, overlap, EriEngine};
use tutti_adjoint::AngularKind;

fn check_integrals(name: &str, tolerance: f64) {
    let case = common::load(name);
    let molecule = case.molecule();
    let basis = case.basis(AngularKind::Spherical);
    assert_eq!(basis.nao() as u64, case.json["nao"].as_u64().unwrap());
    let e_nuc = (molecule.nuclear_repulsion() - case.f64("e_nuc")).abs();
    let s = common::max_matrix_error(&overlap(&basis), &case.matrix("S"));
    let t = common::max_matrix_error(&kinetic(&basis), &case.matrix("T"));
    let v = common::max_matrix_error(&nuclear_attraction(&basis, &molecule), &case.matrix("V"));
    let engine = EriEngine::new(&basis);
    let eri = engine.full_tensor();
    let n = basis.nao();
    let mut eri_error: f64 = 0.0;
    let indices = case.json["eri"]["indices"].as_array().unwrap();
    let values = common::floats(&case.json["eri"]["values"]);
    assert_eq!(indices.len(), values.len());
    for (index, value) in indices.iter().zip(&values) {
        let [i, j, k, l] = [0, 1, 2, 3].map(|q| index[q].as_u64().unwrap() as usize);
        eri_error = eri_error.max((eri[((i * n + j) * n + k) * n + l] - value).abs());
    }
    println!(
        "{name}: |dE_nuc| {e_nuc:.2e}, max |dS| {s:.2e}, |dT| {t:.2e}, |dV| {v:.2e}, |dERI| {eri_error:.2e} over {} unique ERIs",
        values.len()
    );
    for (what, error) in [
        ("E_nuc", e_nuc),
        ("S", s),
        ("T", t),
        ("V", v),
        ("ERI", eri_error),
    ] {
        assert!(
            error < tolerance,
            "{name}: {what} error {error:e} >= {tolerance:e}"
        );
    }
}

#[test]
fn h2_sto3g_matches_pyscf() {
    check_integrals("h2_sto3g", 1e-10);
}

#[test]
fn h2o_sto3g_matches_pyscf() {
    check_integrals("h2o_sto3g", 1e-10);
}

/// Checks S, T, V and a sample of ERIs of one block of a reference file, computing the ERIs
/// quartet by quartet (no nao^4 tensor).
fn check_block(
    label: &str,
    case: &common::Case,
    block: &serde_json::Value,
    kind: AngularKind,
    tolerance: f64,
) {
    let molecule = case.molecule();
    let basis = case.basis(kind);
    assert_eq!(
        basis.nao() as u64,
        block["nao"].as_u64().unwrap(),
        "{label}"
    );
    let rows = |key: &str| -> Vec<Vec<f64>> {
        block[key]
            .as_array()
            .unwrap()
            .iter()
            .map(common::floats)
            .collect()
    };
    let s = common::max_matrix_error(&overlap(&basis), &rows("S"));
    let t = common::max_matrix_error(&kinetic(&basis), &rows("T"));
    let v = common::max_matrix_error(&nuclear_attraction(&basis, &molecule), &rows("V"));
    let engine = EriEngine::new(&basis);
    let shell_of: Vec<usize> = (0..basis.nao())
        .map(|ao| basis.offsets().iter().rposition(|&o| o <= ao).unwrap())
        .collect();
    let mut cache = std::collections::HashMap::new();
    let mut workspace = tutti_adjoint::integrals::EriWorkspace::new();
    let mut eri_error: f64 = 0.0;
    let indices = block["eri"]["indices"].as_array().unwrap();
    let values = common::floats(&block["eri"]["values"]);
    for (index, value) in indices.iter().zip(&values) {
        let ao = [0, 1, 2, 3].map(|q| index[q].as_u64().unwrap() as usize);
        let shells = ao.map(|i| shell_of[i]);
        let quartet = cache
            .entry(shells)
            .or_insert_with(|| engine.quartet(shells, &mut workspace));
        let local = [0, 1, 2, 3].map(|q| ao[q] - basis.offsets()[shells[q]]);
        let counts = shells.map(|s| engine.function_counts()[s]);
        let ours = quartet
            [((local[0] * counts[1] + local[1]) * counts[2] + local[2]) * counts[3] + local[3]];
        eri_error = eri_error.max((ours - value).abs());
    }
    println!(
        "{label}: nao {}, max |dS| {s:.2e}, |dT| {t:.2e}, |dV| {v:.2e}, |dERI| {eri_error:.2e} over {} sampled ERIs",
        basis.nao(),
        values.len()
    );
    for (what, error) in [("S", s), ("T", t), ("V", v), ("ERI", eri_error)] {
        assert!(
            error < tolerance,
            "{label}: {what} error {error:e} >= {tolerance:e}"
        );
    }
}

#[test]
fn h2o_def2tzvp_f_functions_match_pyscf() {
    let case = common::load("h2o_def2tzvp");
    check_block(
        "h2o_def2tzvp",
        &case,
        &case.json,
        AngularKind::Spherical,
        1e-10,
    );
}

/// cc-pVTZ: O's f shell (every unique integral among its functions is in the sample), d on
/// H, and the general contractions split into one shell per column.
#[test]
fn h2o_ccpvtz_f_functions_match_pyscf() {
    let case = common::load("h2o_ccpvtz");
    check_block(
        "h2o_ccpvtz",
        &case,
        &case.json,
        AngularKind::Spherical,
        1e-10,
    );
}

#[test]
fn g_functions_spherical_and_cartesian_match_pyscf() {
    let case = common::load("high_l");
    check_block(
        "high_l spherical",
        &case,
        &case.json["spherical"],
        AngularKind::Spherical,
        1e-10,
    );
    check_block(
        "high_l cartesian",
        &case,
        &case.json["cartesian"],
        AngularKind::Cartesian,
        1e-10,
    );
}

#[test]
fn cart2sph_matches_pyscf_up_to_g() {
    let case = common::load("high_l");
    for l in 0..=4usize {
        let reference: Vec<Vec<f64>> = case.json["cart2sph"][l.to_string()]
            .as_array()
            .unwrap()
            .iter()
            .map(common::floats)
            .collect();
        let ours = tutti_adjoint::integrals::cartesian::transform(l, AngularKind::Spherical);
        let nsph = 2 * l + 1;
        for (c, row) in reference.iter().enumerate() {
            for (m, value) in row.iter().enumerate() {
                assert!(
                    (ours[c * nsph + m] - value).abs() < 1e-14,
                    "l={l} c={c} m={m}: {} vs {value}",
                    ours[c * nsph + m]
                );
            }
        }
    }
}

#[test]
fn quartet_permutations_agree() {
    let case = common::load("h2o_sto3g");
    let basis = case.basis(AngularKind::Spherical);
    let engine = EriEngine::new(&basis);
    let n = basis.nao();
    let full = engine.full_tensor();
    let mut workspace = tutti_adjoint::integrals::EriWorkspace::new();
    let shells = basis.shells().len();
    for a in 0..shells {
        for b in 0..shells {
            for c in 0..shells {
                for d in 0..shells {
                    let block = engine.quartet([a, b, c, d], &mut workspace);
                    let counts = [a, b, c, d].map(|s| engine.function_counts()[s]);
                    let starts = [a, b, c, d].map(|s| basis.offsets()[s]);
                    let mut index = 0;
                    for i in 0..counts[0] {
                        for j in 0..counts[1] {
                            for k in 0..counts[2] {
                                for l in 0..counts[3] {
                                    let (i, j, k, l) = (
                                        starts[0] + i,
                                        starts[1] + j,
                                        starts[2] + k,
                                        starts[3] + l,
                                    );
                                    // A shell pair (a, a) yields (ij| and (ji| from its
                                    // primitive pairs summed in different orders, and the
                                    // full tensor keeps one of them: equal to a few ulps.
                                    let (got, want) =
                                        (block[index], full[((i * n + j) * n + k) * n + l]);
                                    assert!(
                                        (got - want).abs() <= 4.0 * f64::EPSILON * want.abs(),
                                        "({i}{j}|{k}{l}): {got} vs {want}"
                                    );
                                    index += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Every shell pair's Schwarz bound is positive and bounds its quartets: the pair of two
/// carbons' tight 1s shells (six primitives each, 2.9 bohr apart) has primitive bounds all
/// below 1e-8, and its bound used to come out exactly 0 (its own (ab|ab) screened primitive
/// quartet by primitive quartet), so the Fock build dropped quartets of it up to 7e-9 and
/// c2h6/def2-tzvp's energy was 1.7e-9 Eh off PySCF's.
#[test]
fn schwarz_bounds_bound_the_quartets_of_tight_distant_pairs() {
    let molecule =
        tutti_adjoint::Molecule::from_bohr(&[("C", [0.0, 0.0, 1.45]), ("C", [0.0, 0.0, -1.45])])
            .unwrap();
    let set = tutti_adjoint::BasisSet::load("def2-tzvp").unwrap();
    let basis = tutti_adjoint::Basis::new(&molecule, &set, AngularKind::Spherical).unwrap();
    let engine = EriEngine::new(&basis);
    let pairs = engine.pairs();
    assert!(
        pairs.iter().all(|pair| pair.schwarz > 0.0),
        "a pair with a zero bound"
    );
    // The five pairs with the smallest bounds, against every pair.
    let mut smallest: Vec<usize> = (0..pairs.len()).collect();
    smallest.sort_by(|&x, &y| pairs[x].schwarz.total_cmp(&pairs[y].schwarz));
    let mut workspace = tutti_adjoint::integrals::EriWorkspace::new();
    for &small in &smallest[..5] {
        for other in 0..pairs.len() {
            let (bra, ket) = (small.max(other), small.min(other));
            let bound = pairs[bra].schwarz * pairs[ket].schwarz;
            let block = engine.canonical_quartet(bra, ket, &mut workspace);
            let largest = block.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            // The bound is exact arithmetic's; the integrals carry the primitive screening's
            // absolute error (below 1e-13) and rounding.
            assert!(
                largest <= bound * (1.0 + 1e-10) + 1e-13,
                "pairs {bra} and {ket}: |(ab|cd)| {largest:e} above Q_ab Q_cd {bound:e}"
            );
        }
    }
}
