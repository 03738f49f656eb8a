//! The train reader: 1–4 `.npy` files as `000.npy`, `001.npy`, ... opened, read and used.
//! Oracle: no panic, no abort; a train that reads back holds exactly the entries its shapes
//! claim, and a small one can be contracted (norm, distance to itself), with a norm that is
//! a number wherever it cannot overflow (entries below 1e20 in magnitude, at most 4096 of
//! them; larger entries may overflow to infinity and then to NaN, as in any f64 code).

use tutti_sweep::{Complex64, NpyTrain, Scalar, TensorTrain};

fn check<T: Scalar>(train: &TensorTrain<T>) {
    let mut total: usize = 0;
    let mut tame = true;
    for core in train.cores() {
        tame &= core.data.iter().all(|x| x.abs2() <= 1e40);
        let claimed = core
            .shape
            .dims(train.kind())
            .iter()
            .try_fold(1usize, |product, &dim| product.checked_mul(dim));
        assert_eq!(
            claimed,
            Some(core.data.len()),
            "a core of shape {:?} holds {} entries",
            core.shape,
            core.data.len()
        );
        total = total.saturating_add(core.data.len());
    }
    if total <= 4096 {
        let norm = tutti_sweep::norm(train);
        assert!(
            !tame || norm.is_finite(),
            "the norm of a tame train is {norm}"
        );
        let _ = tutti_sweep::distance(train, train);
    }
}

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let files = crate::split_files(data, 4);
    let names: Vec<String> = (0..files.len())
        .map(|site| format!("{site:03}.npy"))
        .collect();
    let dir = crate::write_scratch(&names, &files);
    let Ok(train) = NpyTrain::open(dir) else {
        return;
    };
    if train.is_complex() {
        if let Ok(train) = train.read::<Complex64>() {
            check(&train);
        }
    } else if let Ok(train) = train.read::<f64>() {
        check(&train);
    }
}
