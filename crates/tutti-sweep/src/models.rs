//! Operators built in code: the Heisenberg XXZ chain.

use crate::train::{TensorTrain, TrainKind};
use crate::SweepError;

/// The MPO (bond 5) of the open spin-1/2 XXZ chain of `n` sites,
/// `H = sum_i J (Sx_i Sx_{i+1} + Sy_i Sy_{i+1}) + Delta Sz_i Sz_{i+1} - h sum_i Sz_i`, with
/// S = sigma/2 and the basis (up, down): `Sz = diag(1/2, -1/2)`, `S+ = |up><down|`.
///
/// Convention (upper-triangular, the one of the shared reference file): the bulk core
/// `W[a, :, :, b]` (core axes (Dl, d_out, d_in, Dr)) is the operator matrix
/// ```text
///        b=0   1    2    3    4
/// a=0  [ I     S+   S-   Sz   -h Sz    ]
/// a=1  [ 0     0    0    0    J/2 S-   ]
/// a=2  [ 0     0    0    0    J/2 S+   ]
/// a=3  [ 0     0    0    0    Delta Sz ]
/// a=4  [ 0     0    0    0    I        ]
/// ```
/// site 0 is row 0 (left bond 1), site n-1 is column 4 (right bond 1).
///
/// Errors: `n < 2`, non-finite couplings.
pub fn heisenberg_xxz(
    n: usize,
    j: f64,
    delta: f64,
    h: f64,
) -> Result<TensorTrain<f64>, SweepError> {
    if n < 2 {
        return Err(SweepError::InvalidOption {
            name: "n",
            value: n.to_string(),
            expected: "at least 2 sites",
        });
    }
    for (name, value) in [("J", j), ("Delta", delta), ("h", h)] {
        if !value.is_finite() {
            return Err(SweepError::InvalidOption {
                name,
                value: value.to_string(),
                expected: "a finite coupling",
            });
        }
    }
    let id = [[1.0, 0.0], [0.0, 1.0]];
    let sz = [[0.5, 0.0], [0.0, -0.5]];
    let sp = [[0.0, 1.0], [0.0, 0.0]];
    let sm = [[0.0, 0.0], [1.0, 0.0]];
    let zero = [[0.0; 2]; 2];
    let scale = |m: [[f64; 2]; 2], f: f64| m.map(|row| row.map(|x| x * f));
    let mut w = [[zero; 5]; 5];
    w[0][0] = id;
    w[0][1] = sp;
    w[0][2] = sm;
    w[0][3] = sz;
    w[0][4] = scale(sz, -h);
    w[1][4] = scale(sm, j / 2.0);
    w[2][4] = scale(sp, j / 2.0);
    w[3][4] = scale(sz, delta);
    w[4][4] = id;
    let core = |rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        let (dl, dr) = (rows.len(), cols.len());
        let mut data = vec![0.0; dl * 4 * dr];
        for (a, row) in rows.clone().enumerate() {
            for (b, col) in cols.clone().enumerate() {
                for o in 0..2 {
                    for i in 0..2 {
                        data[((a * 2 + o) * 2 + i) * dr + b] = w[row][col][o][i];
                    }
                }
            }
        }
        (vec![dl, 2, 2, dr], data)
    };
    let mut cores = Vec::with_capacity(n);
    cores.push(core(0..1, 0..5));
    for _ in 1..n - 1 {
        cores.push(core(0..5, 0..5));
    }
    cores.push(core(0..5, 4..5));
    TensorTrain::from_arrays(TrainKind::Mpo, cores)
}
