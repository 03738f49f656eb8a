//! Test helpers: random trains and an independent dense reference (naive index loops).
#![allow(dead_code, clippy::needless_range_loop)]

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tutti_sweep::{Scalar, TensorTrain, TrainKind};

/// A random train: `phys[k] = (d_out, d_in)` per site (d_in ignored for an MPS), inner bonds
/// `bond`, Gaussian entries scaled by `decay^b` on the right bond index b (decay 1: flat).
pub fn random_train<T: Scalar>(
    kind: TrainKind,
    phys: &[(usize, usize)],
    bond: usize,
    decay: f64,
    seed: u64,
) -> TensorTrain<T> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = phys.len();
    let scale = 1.0 / (bond as f64).sqrt();
    let cores = (0..n)
        .map(|k| {
            let left = if k == 0 { 1 } else { bond };
            let right = if k + 1 == n { 1 } else { bond };
            let (d_out, d_in) = phys[k];
            let dims = match kind {
                TrainKind::Mps => vec![left, d_out, right],
                TrainKind::Mpo => vec![left, d_out, d_in, right],
            };
            let len: usize = dims.iter().product();
            let data = (0..len)
                .map(|i| {
                    let b = i % right;
                    T::gaussian(&mut rng) * T::from_real(scale * decay.powi(b as i32))
                })
                .collect();
            (dims, data)
        })
        .collect();
    TensorTrain::from_arrays(kind, cores).expect("valid random train")
}

/// A dense matrix, row-major.
#[derive(Clone, Debug)]
pub struct Dense<T> {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<T>,
}

/// The dense operator of a train, by naive loops: rows (o_1..o_n), cols (i_1..i_n), C order.
/// `as_bra`: an MPS as a row vector (1 x prod d); otherwise an MPS is a column vector.
pub fn dense<T: Scalar>(train: &TensorTrain<T>, as_bra: bool) -> Dense<T> {
    let cores = train.cores();
    let shapes: Vec<(usize, usize)> = cores
        .iter()
        .map(|c| (c.shape.d_out, c.shape.d_in))
        .collect();
    let rows: usize = shapes.iter().map(|s| s.0).product();
    let cols: usize = shapes.iter().map(|s| s.1).product();
    let mut data = vec![T::zero(); rows * cols];
    for row in 0..rows {
        for col in 0..cols {
            // Digits of row and col per site (site 0 slowest).
            let (mut r, mut c) = (row, col);
            let mut outs = vec![0; cores.len()];
            let mut ins = vec![0; cores.len()];
            for k in (0..cores.len()).rev() {
                outs[k] = r % shapes[k].0;
                r /= shapes[k].0;
                ins[k] = c % shapes[k].1;
                c /= shapes[k].1;
            }
            let mut vec = vec![T::one()];
            for (k, core) in cores.iter().enumerate() {
                let s = core.shape;
                let mut next = vec![T::zero(); s.right];
                for a in 0..s.left {
                    for b in 0..s.right {
                        let idx = ((a * s.d_out + outs[k]) * s.d_in + ins[k]) * s.right + b;
                        next[b] += vec[a] * core.data[idx];
                    }
                }
                vec = next;
            }
            data[row * cols + col] = vec[0];
        }
    }
    if as_bra {
        Dense {
            rows: cols,
            cols: rows,
            data,
        }
    } else {
        Dense { rows, cols, data }
    }
}

/// `a * b`, naive.
pub fn matmul<T: Scalar>(a: &Dense<T>, b: &Dense<T>) -> Dense<T> {
    assert_eq!(a.cols, b.rows);
    let mut data = vec![T::zero(); a.rows * b.cols];
    for i in 0..a.rows {
        for k in 0..a.cols {
            for j in 0..b.cols {
                data[i * b.cols + j] += a.data[i * a.cols + k] * b.data[k * b.cols + j];
            }
        }
    }
    Dense {
        rows: a.rows,
        cols: b.cols,
        data,
    }
}

/// ||a - b|| / ||b|| over the entries (the shapes must hold the same number of entries).
pub fn rel_diff<T: Scalar>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len());
    let diff: f64 = a.iter().zip(b).map(|(&x, &y)| (x - y).abs2()).sum();
    let norm: f64 = b.iter().map(|x| x.abs2()).sum();
    (diff / norm).sqrt()
}

/// Whether two trains have the same shapes and the same bits in every entry.
pub fn same_bits<T: Scalar>(a: &TensorTrain<T>, b: &TensorTrain<T>) -> bool {
    a.kind() == b.kind()
        && a.shapes() == b.shapes()
        && a.cores().iter().zip(b.cores()).all(|(x, y)| {
            bytemuck::cast_slice::<T, u8>(&x.data) == bytemuck::cast_slice::<T, u8>(&y.data)
        })
}

/// Runs `test` on a thread and fails if it has not finished within two minutes: a hang
/// fails the test instead of hanging CI.
pub fn within_limit<R: Send + 'static>(test: impl FnOnce() -> R + Send + 'static) -> R {
    let limit = std::time::Duration::from_secs(120);
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // A panic drops `done`, which the receiver reports below as a failure.
        let _ = done.send(test());
    });
    match wait.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("the test hung for {limit:?}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("the test panicked (see above)")
        }
    }
}
