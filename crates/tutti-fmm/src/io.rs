//! The particle interchange format: `positions.npy` (N, 3) and `masses.npy` (N,) in, and
//! `potential.npy` (N,) and `accel.npy` (N, 3) out, float64, C order.

use std::path::Path;

use tutti_plan::files::AtomicFile;
use tutti_plan::npy::{self, NpyError};

use crate::FmmError;

fn file_error(path: &Path, message: impl ToString) -> FmmError {
    FmmError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// The [`FmmError::File`] of a `.npy` read or write that failed ([`tutti_plan::npy`]: a
/// malformed header, a shape whose size overflows, another dtype, Fortran order and a
/// truncated data section are errors naming the file).
fn npy_error(error: NpyError) -> FmmError {
    file_error(error.path(), error.detail())
}

/// Reads positions: a float64, C-order array of shape (N, 3).
pub fn read_positions(path: impl AsRef<Path>) -> Result<Vec<[f64; 3]>, FmmError> {
    let path = path.as_ref();
    let (shape, values) = npy::read_f64(path).map_err(npy_error)?;
    if shape.len() != 2 || shape[1] != 3 {
        return Err(file_error(
            path,
            format!("expected shape (N, 3), got {shape:?}"),
        ));
    }
    let expected = shape[0].checked_mul(3);
    if expected != u64::try_from(values.len()).ok() {
        return Err(file_error(
            path,
            format!(
                "{} values read, expected N * 3 = {} for shape {shape:?}",
                values.len(),
                expected.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string())
            ),
        ));
    }
    Ok(values
        .chunks_exact(3)
        .map(|row| [row[0], row[1], row[2]])
        .collect())
}

/// Reads strengths: a float64, C-order array of shape (N,).
pub fn read_masses(path: impl AsRef<Path>) -> Result<Vec<f64>, FmmError> {
    let path = path.as_ref();
    let (shape, values) = npy::read_f64(path).map_err(npy_error)?;
    if shape.len() != 1 {
        return Err(file_error(
            path,
            format!("expected shape (N,), got {shape:?}"),
        ));
    }
    if u64::try_from(values.len()) != Ok(shape[0]) {
        return Err(file_error(
            path,
            format!("{} values read, expected N = {}", values.len(), shape[0]),
        ));
    }
    Ok(values)
}

/// Writes `potential.npy` (N,) and `accel.npy` (N, 3) into `dir` (created if missing): both
/// are written under fresh temporary names (never following a symbolic link, never reusing
/// a name) and flushed to disk first, and renamed into place only when both are complete,
/// so an error leaves neither a partial file nor a temporary behind. Renaming replaces
/// whatever entry has the output's name (a symbolic link there is replaced, not followed).
pub fn write_outputs(
    dir: impl AsRef<Path>,
    potential: &[f64],
    accel: &[[f64; 3]],
) -> Result<(), FmmError> {
    let dir = dir.as_ref();
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let flat: Vec<f64> = accel.iter().flatten().copied().collect();
    let n = potential.len() as u64;
    let outputs = [
        (dir.join("potential.npy"), vec![n], potential),
        (
            dir.join("accel.npy"),
            vec![accel.len() as u64, 3],
            &flat[..],
        ),
    ];
    // Dropping the temporaries on an early return removes them.
    let temporaries = outputs
        .iter()
        .map(|(path, shape, values)| {
            let mut temporary = AtomicFile::create(path).map_err(|e| file_error(path, e))?;
            npy::write_f64_into(&mut temporary, shape, values).map_err(npy_error)?;
            Ok(temporary)
        })
        .collect::<Result<Vec<_>, FmmError>>()?;
    for ((path, _, _), temporary) in outputs.iter().zip(temporaries) {
        temporary.commit().map_err(|e| file_error(path, e))?;
    }
    Ok(())
}
