//! The sweep split among 1..4 simulated devices agrees with the plain path.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too; failures are test failures

mod common;

use common::{random_train, same_bits};
use tutti_backend::{DeviceRequest, Resources};
use tutti_sweep::{
    distance, norm, src, Complex64, Layer, Scalar, SrcOptions, SweepError, TensorTrain, TrainKind,
};

fn stack<T: Scalar>() -> (TensorTrain<T>, TensorTrain<T>, TensorTrain<T>) {
    let n = 7;
    let a = random_train(TrainKind::Mpo, &vec![(2, 2); n], 3, 0.8, 21);
    let b = random_train(TrainKind::Mpo, &vec![(2, 2); n], 2, 0.8, 22);
    let psi = random_train(TrainKind::Mps, &vec![(2, 1); n], 6, 0.8, 23);
    (a, b, psi)
}

fn agree<T: Scalar>() {
    let (a, b, psi) = stack::<T>();
    let layers: [&dyn Layer<T>; 3] = [&a, &b, &psi];
    for (chi, oversample) in [(7, 0), (5, 3), (2, 0), (1, 2)] {
        let options = SrcOptions::new(chi)
            .with_seed(3)
            .with_oversample(oversample);
        let (plain, _) = src(&layers, &options).unwrap();
        let scale = norm(&plain);
        for g in 1..=4 {
            let (split, info) =
                src(&layers, &options.clone().with_resources(Resources::cpu(g))).unwrap();
            assert_eq!(info.devices, g);
            let diff = distance(&split, &plain).unwrap() / scale;
            println!(
                "chi {chi} k {oversample} G {g}: relative difference to one device {diff:.2e}"
            );
            assert!(diff < 1e-10, "G {g} chi {chi}: {diff:e}");
            if g == 1 {
                assert!(
                    same_bits(&split, &plain),
                    "one device must be bit-identical to the plain path"
                );
            }
        }
        let custom = Resources::cpu(3).with_devices(DeviceRequest::Ordinals(vec![2, 0, 1]));
        let (split, _) = src(&layers, &options.clone().with_resources(custom)).unwrap();
        assert!(distance(&split, &plain).unwrap() / scale < 1e-10);
    }
}

#[test]
fn devices_agree_real() {
    agree::<f64>();
}

#[test]
fn devices_agree_complex() {
    agree::<Complex64>();
}

#[test]
fn same_seed_same_bits() {
    let (a, b, psi) = stack::<f64>();
    let layers: [&dyn Layer<f64>; 3] = [&a, &b, &psi];
    let options = SrcOptions::new(5)
        .with_seed(42)
        .with_resources(Resources::cpu(3));
    let (first, _) = src(&layers, &options).unwrap();
    let (second, _) = src(&layers, &options).unwrap();
    assert!(same_bits(&first, &second));
    let (other, _) = src(&layers, &SrcOptions::new(5).with_seed(43)).unwrap();
    assert!(!same_bits(&first, &other));
}

#[test]
fn bad_device_requests_are_errors() {
    let (a, b, psi) = stack::<f64>();
    let layers: [&dyn Layer<f64>; 3] = [&a, &b, &psi];
    let dup = Resources::cpu(2).with_devices(DeviceRequest::Ordinals(vec![0, 0]));
    let err = src(&layers, &SrcOptions::new(4).with_resources(dup)).unwrap_err();
    assert!(
        matches!(
            err,
            SweepError::InvalidOption {
                name: "devices",
                ..
            }
        ),
        "{err}"
    );
    let zero = src(
        &layers,
        &SrcOptions::new(4).with_resources(Resources::cpu(0)),
    )
    .unwrap_err();
    assert!(matches!(zero, SweepError::Devices(_)), "{zero}");
}

/// A layer whose `nth` stream (counting every rank's calls) fails: an error on one rank only.
struct FailingLayer {
    inner: TensorTrain<f64>,
    calls: std::sync::atomic::AtomicUsize,
    nth: usize,
}

impl Layer<f64> for FailingLayer {
    fn name(&self) -> String {
        "failing".into()
    }
    fn kind(&self) -> TrainKind {
        self.inner.kind()
    }
    fn shapes(&self) -> Vec<tutti_sweep::CoreShape> {
        self.inner.shapes()
    }
    fn stream(&self, reverse: bool) -> Result<tutti_sweep::CoreStream<f64>, SweepError> {
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if call == self.nth {
            return Err(SweepError::InvalidStack {
                detail: "injected failure".into(),
            });
        }
        Layer::<f64>::stream(&self.inner, reverse)
    }
}

#[test]
fn an_error_on_one_rank_is_the_error_returned() {
    let (a, b, psi) = stack::<f64>();
    // 3 ranks call stream twice each (one per pass): fail the 2nd, 4th or 6th call, so one
    // rank fails in either pass while the others wait for it in a collective.
    for nth in [1, 3, 5] {
        let failing = FailingLayer {
            inner: psi.clone(),
            calls: std::sync::atomic::AtomicUsize::new(0),
            nth,
        };
        let layers: [&dyn Layer<f64>; 3] = [&a, &b, &failing];
        let options = SrcOptions::new(5).with_resources(Resources::cpu(3));
        let err = src(&layers, &options).unwrap_err();
        assert!(
            err.to_string().contains("injected failure"),
            "nth {nth}: {err}"
        );
    }
}
