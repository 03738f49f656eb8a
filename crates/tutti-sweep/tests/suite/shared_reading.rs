//! The ranks of a process read the stack once per pass, together: every layer is streamed
//! once forwards and once in reverse whatever the device count, a fast rank reads at most
//! two sites ahead of the slowest, and a stream's error reaches the caller as itself.

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tutti_backend::Resources;
use tutti_sweep::{
    src, CoreShape, CoreStream, Layer, Pass, SrcOptions, SweepError, TensorTrain, TrainKind,
};

use crate::common::{random_train, same_bits};

/// A train that counts what is read from it: streams opened, and cores handed out per
/// stream; `fail_at` makes the reverse stream fail at that site instead of yielding it.
struct Counted {
    train: TensorTrain<f64>,
    streams: AtomicUsize,
    cores: AtomicUsize,
    fail_at: Option<usize>,
    /// Called with the number of cores handed out so far, at each one.
    on_core: Option<Box<dyn Fn(usize) + Send + Sync>>,
}

impl Counted {
    fn new(train: TensorTrain<f64>) -> Self {
        Self {
            train,
            streams: AtomicUsize::new(0),
            cores: AtomicUsize::new(0),
            fail_at: None,
            on_core: None,
        }
    }
}

impl Layer<f64> for Counted {
    fn name(&self) -> String {
        "counted".into()
    }

    fn kind(&self) -> TrainKind {
        self.train.kind()
    }

    fn shapes(&self) -> Vec<CoreShape> {
        self.train.shapes()
    }

    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, f64>, SweepError> {
        self.streams.fetch_add(1, Ordering::SeqCst);
        let n = self.train.cores().len();
        let sites: Vec<usize> = if reverse {
            (0..n).rev().collect()
        } else {
            (0..n).collect()
        };
        Ok(Box::new(sites.into_iter().map(move |site| {
            let count = self.cores.fetch_add(1, Ordering::SeqCst) + 1;
            if let Some(check) = &self.on_core {
                check(count);
            }
            if reverse && self.fail_at == Some(site) {
                return Err(SweepError::File {
                    path: format!("counted core {site}").into(),
                    detail: "unreadable on purpose".into(),
                });
            }
            Ok(self.train.cores()[site].clone())
        })))
    }

    fn cores_in_memory(&self) -> Option<usize> {
        Some(1)
    }
}

fn stack(n: usize) -> (TensorTrain<f64>, TensorTrain<f64>) {
    let h = random_train(TrainKind::Mpo, &vec![(2, 2); n], 3, 1.0, 31);
    let psi = random_train(TrainKind::Mps, &vec![(2, 1); n], 8, 0.9, 32);
    (h, psi)
}

#[test]
fn each_layer_is_streamed_once_per_pass_whatever_the_device_count() {
    let n = 9;
    let (h, psi) = stack(n);
    for devices in 1..=4 {
        let (counted_h, counted_psi) = (Counted::new(h.clone()), Counted::new(psi.clone()));
        let options = SrcOptions::new(12).with_resources(Resources::cpu(devices));
        let (got, _) = src::<f64>(&[&counted_h, &counted_psi], &options).unwrap();
        // The same stack in memory, read by the ordinary streams: the same bits.
        let (want, _) = src::<f64>(&[&h, &psi], &options).unwrap();
        assert!(
            same_bits(&got, &want),
            "{devices} devices: shared reading changed bits"
        );
        for (name, layer) in [("H", &counted_h), ("psi", &counted_psi)] {
            assert_eq!(
                layer.streams.load(Ordering::SeqCst),
                2,
                "{devices} devices: {name} streamed once forwards and once in reverse"
            );
            // Left to right reads sites 0..n-1 (the last site's environment is not needed),
            // right to left every site.
            assert_eq!(
                layer.cores.load(Ordering::SeqCst),
                2 * n - 1,
                "{devices} devices: {name}'s cores read once per pass"
            );
        }
    }
}

#[test]
fn a_fast_rank_reads_at_most_two_sites_ahead_of_the_slowest() {
    let n = 10;
    let (h, psi) = stack(n);
    // Rank 0 (the one that reports progress) is slowed down in its progress callback. The
    // sites it has taken at most (its last Sketch report + 1), and the worst excess of the
    // cores read over that, left to right.
    let slow_taken = Arc::new(AtomicIsize::new(0));
    let worst = Arc::new(Mutex::new(isize::MIN));
    let mut counted_psi = Counted::new(psi);
    {
        let (slow_taken, worst) = (Arc::clone(&slow_taken), Arc::clone(&worst));
        counted_psi.on_core = Some(Box::new(move |count| {
            // Only the forward pass (the first n - 1 cores), where ranks do not meet.
            if count < n {
                let ahead = count as isize - slow_taken.load(Ordering::SeqCst);
                let mut worst = worst.lock().unwrap();
                *worst = (*worst).max(ahead);
            }
        }));
    }
    let counted_h = Counted::new(h);
    let progress = {
        let slow_taken = Arc::clone(&slow_taken);
        Arc::new(move |p: tutti_sweep::SweepProgress| {
            if p.pass == Pass::Sketch {
                slow_taken.store(p.site as isize + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(15));
            }
        })
    };
    let options = SrcOptions::new(12)
        .with_resources(Resources::cpu(2))
        .with_progress(progress);
    let (got, _) = src::<f64>(&[&counted_h, &counted_psi], &options).unwrap();
    let (want, _) = src::<f64>(
        &[&counted_h.train, &counted_psi.train],
        &SrcOptions::new(12).with_resources(Resources::cpu(2)),
    )
    .unwrap();
    assert!(same_bits(&got, &want));
    let worst = *worst.lock().unwrap();
    // Two sites may wait for the slow rank, and the slow rank may hold the one it reported.
    assert!(
        worst <= 2,
        "the fast rank read {worst} sites beyond what the slow one had taken"
    );
    assert!(
        worst >= 1,
        "the fast rank never read ahead: the test proves nothing"
    );
}

#[test]
fn a_stream_error_on_the_shared_reader_is_reported_as_itself() {
    let n = 9;
    let (h, psi) = stack(n);
    for devices in 1..=3 {
        let counted_h = Counted::new(h.clone());
        let mut counted_psi = Counted::new(psi.clone());
        counted_psi.fail_at = Some(4);
        let options = SrcOptions::new(12).with_resources(Resources::cpu(devices));
        let error = crate::common::within_limit(move || {
            src::<f64>(&[&counted_h, &counted_psi], &options)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        });
        assert!(
            error.contains("unreadable on purpose") && error.contains("counted core 4"),
            "{devices} devices: {error}"
        );
    }
}
