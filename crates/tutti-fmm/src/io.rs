//! The particle interchange format: `positions.npy` (N, 3) and `masses.npy` (N,) in, and
//! `potential.npy` (N,) and `accel.npy` (N, 3) out, float64, C order.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use npyz::WriterBuilder;
use tempfile::NamedTempFile;

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

/// Writes `values` with `shape` into a new temporary next to `path`, named
/// `.<name>.<random>.tmp` and created exclusively (`O_CREAT | O_EXCL`: a file or symbolic
/// link planted there is never opened, and a leftover from a killed run cannot collide).
/// Complete and synced on success; removed when dropped unless persisted.
fn write_temporary(path: &Path, shape: &[u64], values: &[f64]) -> Result<NamedTempFile, FmmError> {
    let name = path
        .file_name()
        .ok_or_else(|| file_error(path, "expected a file name"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    // Mode 0666 less the umask, as `File::create` would give the output.
    let temporary = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| file_error(path, e))?;
    write_f64(temporary.as_file(), shape, values).map_err(|e| file_error(path, e))?;
    Ok(temporary)
}

/// Writes `values` with `shape` to `file` (complete and synced on success).
fn write_f64(file: &File, shape: &[u64], values: &[f64]) -> std::io::Result<()> {
    let mut out = BufWriter::new(file);
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
        .map(|(path, shape, values)| write_temporary(path, shape, values))
        .collect::<Result<Vec<_>, _>>()?;
    for ((path, _, _), temporary) in outputs.iter().zip(temporaries) {
        temporary
            .persist(path)
            .map_err(|e| file_error(path, e.error))?;
    }
    // Flushing the directory makes the renames durable; not every file system allows
    // opening a directory, and the data is already safe in either name.
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
    Ok(())
}
