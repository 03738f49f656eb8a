//! Accuracy at the default options against the committed exact direct sums (cube_10k and
//! plummer_10k, made by an independent numpy direct sum; see tests/data/*/meta.json).

mod common;

use tutti_fmm::{fmm, FmmOptions};

fn check(name: &str) {
    let case = common::case(name);
    let out = fmm(&case.positions, &case.masses, &FmmOptions::default()).expect("fmm");
    let (accel, potential) = common::errors(&out, &case.potential, &case.accel);
    println!(
        "{name}: relative L2 accel {accel:.3e}, potential {potential:.3e}; {:?}",
        out.info
    );
    assert!(accel <= 1e-4, "{name}: accel error {accel}");
    assert!(potential <= 1e-4, "{name}: potential error {potential}");
}

#[test]
fn cube_10k_default_options_within_1e_4() {
    check("cube_10k");
}

#[test]
fn plummer_10k_default_options_within_1e_4() {
    check("plummer_10k");
}

/// A requested accuracy is met on both committed cases: the order `for_accuracy` picks from
/// the measured table gives at most `eps` on accelerations (and on potentials, which are
/// more accurate), for requests spanning the table; the table's own bounds are refused.
#[test]
fn a_requested_accuracy_is_met_on_the_committed_cases() {
    use tutti_fmm::{order_for_accuracy, FmmError, MEASURED_ACCURACY};
    for name in ["cube_10k", "plummer_10k"] {
        let case = common::case(name);
        for eps in [1e-2, 3e-4, 1e-5, 1e-6] {
            let options = FmmOptions::for_accuracy(eps).expect("eps in the table");
            let out = fmm(&case.positions, &case.masses, &options).expect("fmm");
            let (accel, potential) = common::errors(&out, &case.potential, &case.accel);
            println!(
                "{name}, eps {eps:e}: p = {}, accel {accel:.3e}",
                options.order
            );
            assert!(accel <= eps, "{name}, eps {eps}: accel {accel}");
            assert!(potential <= eps, "{name}, eps {eps}: potential {potential}");
        }
    }
    // The lowest order meeting the request: the next order down is measured worse.
    let (order, measured) = order_for_accuracy(1e-5).unwrap();
    assert_eq!((order, measured), (8, 7.84e-6));
    assert!(MEASURED_ACCURACY
        .iter()
        .any(|&(p, e)| p == order - 1 && e > 1e-5));
    for bad in [0.0, -1e-3, f64::NAN, f64::INFINITY, 1e-7] {
        assert!(
            matches!(
                order_for_accuracy(bad),
                Err(FmmError::InvalidArgument {
                    argument: "eps",
                    ..
                })
            ),
            "{bad}"
        );
    }
}
