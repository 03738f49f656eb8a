//! The particle interchange format: `positions.npy` (N, 3) and `masses.npy` (N,) in, and
//! `potential.npy` (N,) and `accel.npy` (N, 3) out, float64, C order.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;

use crate::FmmError;

fn file_error(path: &Path, message: impl ToString) -> FmmError {
    FmmError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// Reads a float64, C-order array and its shape.
fn read_f64(path: &Path) -> Result<(Vec<u64>, Vec<f64>), FmmError> {
    let file = File::open(path).map_err(|e| file_error(path, e))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| file_error(path, e))?;
    let shape = npy.shape().to_vec();
    if npy.order() != npyz::Order::C {
        return Err(file_error(path, "expected C order, got Fortran order"));
    }
    let dtype = npy.dtype();
    if dtype != npyz::DType::Plain("<f8".parse().map_err(|e| file_error(path, e))?) {
        return Err(file_error(
            path,
            format!("expected dtype float64 ('<f8'), got {}", dtype.descr()),
        ));
    }
    let values = npy.into_vec::<f64>().map_err(|e| file_error(path, e))?;
    Ok((shape, values))
}

/// Reads positions: a float64 array of shape (N, 3).
pub fn read_positions(path: impl AsRef<Path>) -> Result<Vec<[f64; 3]>, FmmError> {
    let path = path.as_ref();
    let (shape, values) = read_f64(path)?;
    if shape.len() != 2 || shape[1] != 3 {
        return Err(file_error(
            path,
            format!("expected shape (N, 3), got {shape:?}"),
        ));
    }
    Ok(values
        .chunks_exact(3)
        .map(|row| [row[0], row[1], row[2]])
        .collect())
}

/// Reads strengths: a float64 array of shape (N,).
pub fn read_masses(path: impl AsRef<Path>) -> Result<Vec<f64>, FmmError> {
    let path = path.as_ref();
    let (shape, values) = read_f64(path)?;
    if shape.len() != 1 {
        return Err(file_error(
            path,
            format!("expected shape (N,), got {shape:?}"),
        ));
    }
    Ok(values)
}

/// The temporary name of `path`: `.<name>.tmp-<pid>` in the same directory.
fn temporary(path: &Path) -> Result<PathBuf, FmmError> {
    let name = path
        .file_name()
        .ok_or_else(|| file_error(path, "expected a file name"))?;
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    Ok(path.with_file_name(temp_name))
}

/// Writes `values` with `shape` to `temp` (complete and synced on success).
fn write_f64(temp: &Path, shape: &[u64], values: &[f64]) -> std::io::Result<()> {
    let mut out = BufWriter::new(File::create(temp)?);
    {
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(shape)
            .writer(&mut out)
            .begin_nd()?;
        writer.extend(values.iter().copied())?;
        writer.finish()?;
    }
    out.flush()?;
    out.get_ref().sync_all()
}

/// Writes `potential.npy` (N,) and `accel.npy` (N, 3) into `dir` (created if missing): both
/// are written under temporary names first and renamed into place only when both are
/// complete, so an error leaves neither a partial file nor a temporary behind.
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
    let mut temps = Vec::with_capacity(outputs.len());
    let mut result = Ok(());
    for (path, shape, values) in &outputs {
        let written = temporary(path).and_then(|temp| {
            temps.push(temp.clone());
            write_f64(&temp, shape, values).map_err(|e| file_error(path, e))
        });
        if let Err(error) = written {
            result = Err(error);
            break;
        }
    }
    if result.is_ok() {
        for ((path, _, _), temp) in outputs.iter().zip(&temps) {
            if let Err(error) = std::fs::rename(temp, path) {
                result = Err(file_error(path, error));
                break;
            }
        }
    }
    if result.is_err() {
        for temp in &temps {
            // Best effort: a temporary may not exist or may already be renamed.
            let _ = std::fs::remove_file(temp);
        }
    }
    result
}
