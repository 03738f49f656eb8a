//! The particle interchange format: `positions.npy` (N, 3) and `masses.npy` (N,) in, and
//! `potential.npy` (N,) and `accel.npy` (N, 3) out, float64, C order.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use npyz::WriterBuilder;
use tutti_plan::files::AtomicFile;

use crate::FmmError;

fn file_error(path: &Path, message: impl ToString) -> FmmError {
    FmmError::File {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// The deepest bracket nesting a header may have, braces included: the header's dict, a
/// structured dtype's list of fields, a field's tuple and its shape
/// (`{'descr': [('x', '<f8', (3,))], ...}`) is 4.
const MAX_HEADER_NESTING: usize = 4;

/// Checks the sizes a `.npy` header claims before any code multiplies them: the header must
/// lie inside the file, and every tuple or list of integers in it (the shape, and any
/// sub-array shape of a dtype) must have a product, zero dims counted as 1, that fits in
/// `u64` (npyz forms these products, and overflow checks would make them panic).
fn check_header_sizes(path: &Path) -> Result<(), FmmError> {
    let mut file = File::open(path).map_err(|e| file_error(path, e))?;
    let file_len = file.metadata().map_err(|e| file_error(path, e))?.len();
    let mut prefix = [0u8; 12];
    if file.read_exact(&mut prefix).is_err() || &prefix[..6] != b"\x93NUMPY" {
        // Too short or not an .npy file: npyz gives the precise error.
        return Ok(());
    }
    let (start, len) = match prefix[6] {
        1 => (10, u64::from(u16::from_le_bytes([prefix[8], prefix[9]]))),
        _ => (
            12,
            u64::from(u32::from_le_bytes([
                prefix[8], prefix[9], prefix[10], prefix[11],
            ])),
        ),
    };
    if start + len > file_len {
        return Err(file_error(
            path,
            format!(
                "truncated: {file_len} bytes, shorter than its {}-byte header",
                start + len
            ),
        ));
    }
    let mut text = Vec::new();
    file.seek(SeekFrom::Start(start))
        .map_err(|e| file_error(path, e))?;
    file.take(len)
        .read_to_end(&mut text)
        .map_err(|e| file_error(path, e))?;
    // One running product per open bracket (None once it overflows), with whether the bracket
    // holds sizes (a tuple or a list, not the dict); string literals are skipped.
    let mut products: Vec<(bool, Option<u64>)> = Vec::new();
    let mut at = 0;
    while at < text.len() {
        match text[at] {
            quote @ (b'\'' | b'"') => {
                at += 1;
                while at < text.len() && text[at] != quote {
                    // A backslash escapes the next character (a quote, say).
                    at += if text[at] == b'\\' { 2 } else { 1 };
                }
            }
            opener @ (b'(' | b'[' | b'{') => {
                // A float64 header nests one tuple (the shape) in its dict; npyz's parser of
                // Python literals takes time exponential in the nesting depth, so a deep one
                // is refused before it gets there.
                if products.len() >= MAX_HEADER_NESTING {
                    return Err(file_error(
                        path,
                        format!(
                            "the header nests brackets more than {MAX_HEADER_NESTING} deep; \
                             expected a float64 array header"
                        ),
                    ));
                }
                products.push((opener != b'{', Some(1)));
            }
            b')' | b']' | b'}' => {
                let closed = products.pop();
                if closed == Some((true, None)) {
                    return Err(file_error(
                        path,
                        format!(
                            "the header claims a shape whose number of entries overflows: {}",
                            String::from_utf8_lossy(&text).trim()
                        ),
                    ));
                }
            }
            b'0'..=b'9' => {
                let digits = at;
                while at + 1 < text.len() && text[at + 1].is_ascii_digit() {
                    at += 1;
                }
                let value = text[digits..=at].iter().try_fold(0u64, |acc, &d| {
                    acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
                });
                if let Some((true, product)) = products.last_mut() {
                    *product = product
                        .zip(value)
                        .and_then(|(p, v)| p.checked_mul(v.max(1)));
                }
            }
            _ => {}
        }
        at += 1;
    }
    Ok(())
}

/// Reads a float64, C-order array and its shape.
///
/// Errors: an unreadable or malformed file, a shape whose product overflows, Fortran order,
/// a dtype other than float64, and a data section shorter than the shape needs ("truncated",
/// with the expected size).
fn read_f64(path: &Path) -> Result<(Vec<u64>, Vec<f64>), FmmError> {
    check_header_sizes(path)?;
    let file = File::open(path).map_err(|e| file_error(path, e))?;
    let file_len = file.metadata().map_err(|e| file_error(path, e))?.len();
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
    // The data must be all there before any of it is read: 8 bytes per entry after the header.
    let entries = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| file_error(path, format!("shape {shape:?}: too many entries")))?;
    let header_len = npy_header_len(path)?;
    let expected = entries
        .checked_mul(8)
        .and_then(|bytes| bytes.checked_add(header_len))
        .ok_or_else(|| file_error(path, format!("shape {shape:?}: too many bytes")))?;
    if file_len < expected {
        return Err(file_error(
            path,
            format!("truncated: {file_len} bytes, expected {expected} for shape {shape:?}"),
        ));
    }
    let values = npy.into_vec::<f64>().map_err(|e| {
        file_error(
            path,
            format!("{e} (truncated? expected {entries} float64 entries)"),
        )
    })?;
    if u64::try_from(values.len()) != Ok(entries) {
        return Err(file_error(
            path,
            format!(
                "{} entries read, expected {entries} for shape {shape:?}",
                values.len()
            ),
        ));
    }
    Ok((shape, values))
}

/// The bytes before an `.npy` file's data: the magic, the version, the header length field
/// (2 bytes in version 1, 4 in versions 2 and 3) and the header (npyz has parsed it already).
fn npy_header_len(path: &Path) -> Result<u64, FmmError> {
    let mut file = File::open(path).map_err(|e| file_error(path, e))?;
    let mut prefix = [0u8; 12];
    file.read_exact(&mut prefix)
        .map_err(|_| file_error(path, "truncated: shorter than an .npy header"))?;
    Ok(match prefix[6] {
        1 => 10 + u64::from(u16::from_le_bytes([prefix[8], prefix[9]])),
        _ => {
            12 + u64::from(u32::from_le_bytes([
                prefix[8], prefix[9], prefix[10], prefix[11],
            ]))
        }
    })
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
    if u64::try_from(values.len()) != Ok(shape[0]) {
        return Err(file_error(
            path,
            format!("{} values read, expected N = {}", values.len(), shape[0]),
        ));
    }
    Ok(values)
}

/// Writes `values` with `shape` into a new temporary next to `path`
/// ([`tutti_plan::files::AtomicFile`]); removed when dropped unless committed.
fn write_temporary(path: &Path, shape: &[u64], values: &[f64]) -> Result<AtomicFile, FmmError> {
    let temporary = AtomicFile::create(path).map_err(|e| file_error(path, e))?;
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
        temporary.commit().map_err(|e| file_error(path, e))?;
    }
    Ok(())
}
