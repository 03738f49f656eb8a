//! The `.npy` directory format of tensor trains: a lazy reader and an atomic writer.
//!
//! A train is a directory with one file per site, `000.npy`, `001.npy`, ..., float64 or
//! complex128 (little endian), C order; MPS cores (Dl, d, Dr), MPO cores (Dl, d_out, d_in, Dr);
//! the first Dl and the last Dr are 1.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crossbeam_channel::bounded;
use npyz::{DType, NpyFile, WriterBuilder};
use num_complex::Complex64;

use crate::layer::{CoreStream, Layer};
use crate::train::{check_finite, validate_shapes, Core, CoreShape, TensorTrain, TrainKind};
use crate::{Scalar, SweepError};

/// The element type of a `.npy` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileDtype {
    /// `<f8`.
    Float64,
    /// `<c16`.
    Complex128,
}

/// A train stored as a directory of `.npy` files, opened but not read.
///
/// [`NpyTrain::open`] reads every file's header (shape, dtype, order) and checks the shapes
/// and the file sizes; the data is read only when a sweep streams the cores, by one loader
/// thread that prefetches the next site through a bounded channel.
#[derive(Clone, Debug)]
pub struct NpyTrain {
    dir: PathBuf,
    kind: TrainKind,
    files: Vec<PathBuf>,
    shapes: Vec<CoreShape>,
    dtypes: Vec<FileDtype>,
}

struct Header {
    shape: Vec<usize>,
    dtype: FileDtype,
    data_offset: u64,
}

fn read_header(path: &Path) -> Result<(Header, NpyFile<BufReader<File>>), SweepError> {
    let file = File::open(path).map_err(|e| SweepError::io(path, e))?;
    let npy = NpyFile::new(BufReader::new(file))
        .map_err(|e| SweepError::file(path, format!("not a readable .npy file: {e}")))?;
    let dtype = match npy.dtype() {
        DType::Plain(ts) => match ts.to_string().as_str() {
            "<f8" => FileDtype::Float64,
            "<c16" => FileDtype::Complex128,
            other => {
                return Err(SweepError::file(
                    path,
                    format!("dtype {other}: expected float64 (<f8) or complex128 (<c16)"),
                ))
            }
        },
        other => {
            return Err(SweepError::file(
                path,
                format!("dtype {other:?}: expected float64 (<f8) or complex128 (<c16)"),
            ))
        }
    };
    if npy.order() != npyz::Order::C && npy.shape().iter().filter(|&&d| d > 1).count() > 1 {
        return Err(SweepError::file(path, "Fortran order: expected C order"));
    }
    let shape = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| SweepError::file(path, "a dimension does not fit in memory"))?;
    let data_offset = data_offset(path)?;
    Ok((
        Header {
            shape,
            dtype,
            data_offset,
        },
        npy,
    ))
}

/// Where the data starts: the magic (6 bytes), the version (2), the header length (2 bytes in
/// version 1, 4 in versions 2 and 3), then the header.
fn data_offset(path: &Path) -> Result<u64, SweepError> {
    let mut file = File::open(path).map_err(|e| SweepError::io(path, e))?;
    let mut prefix = [0u8; 12];
    file.read_exact(&mut prefix)
        .map_err(|_| SweepError::file(path, "truncated: shorter than an .npy header"))?;
    Ok(match prefix[6] {
        1 => 10 + u64::from(u16::from_le_bytes([prefix[8], prefix[9]])),
        _ => {
            12 + u64::from(u32::from_le_bytes([
                prefix[8], prefix[9], prefix[10], prefix[11],
            ]))
        }
    })
}

impl NpyTrain {
    /// Opens the train in `dir`: lists `000.npy`, `001.npy`, ... (consecutive from 000), reads
    /// every header and checks it.
    ///
    /// Errors: a missing or empty directory, a gap in the numbering, a file that is not
    /// `.npy`, a dtype other than float64/complex128, Fortran order, 3 and 4 axes mixed, a
    /// file shorter than its header says (truncated), bonds that do not chain (naming the site
    /// and both dims), outer bonds other than 1.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, SweepError> {
        let dir = dir.as_ref().to_path_buf();
        let entries = std::fs::read_dir(&dir).map_err(|e| SweepError::io(&dir, e))?;
        let mut sites: Vec<usize> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| SweepError::io(&dir, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".npy") {
                if let Ok(site) = stem.parse::<usize>() {
                    sites.push(site);
                }
            }
        }
        sites.sort_unstable();
        if sites.is_empty() {
            return Err(SweepError::file(
                &dir,
                "no site files: expected 000.npy, 001.npy, ...",
            ));
        }
        for (expected, &site) in sites.iter().enumerate() {
            if site != expected {
                return Err(SweepError::file(
                    &dir,
                    format!("site files are not consecutive: {expected:03}.npy is missing"),
                ));
            }
        }
        let mut files = Vec::with_capacity(sites.len());
        let mut shapes = Vec::with_capacity(sites.len());
        let mut dtypes = Vec::with_capacity(sites.len());
        let mut kind = None;
        for site in sites {
            let path = dir.join(format!("{site:03}.npy"));
            let (header, _) = read_header(&path)?;
            let this_kind = match header.shape.len() {
                3 => TrainKind::Mps,
                4 => TrainKind::Mpo,
                n => {
                    return Err(SweepError::BadShape {
                        train: dir.display().to_string(),
                        site,
                        shape: header.shape,
                        expected: format!("3 axes (MPS) or 4 axes (MPO), got {n}"),
                    })
                }
            };
            let kind = *kind.get_or_insert(this_kind);
            if kind != this_kind {
                return Err(SweepError::BadShape {
                    train: dir.display().to_string(),
                    site,
                    shape: header.shape,
                    expected: format!(
                        "{} axes like site 0",
                        if kind == TrainKind::Mps { 3 } else { 4 }
                    ),
                });
            }
            let shape = CoreShape::from_dims(kind, &header.shape)
                .ok_or_else(|| SweepError::file(&path, "unexpected number of axes"))?;
            let item = match header.dtype {
                FileDtype::Float64 => 8,
                FileDtype::Complex128 => 16,
            };
            let expected = header.data_offset + (shape.len() as u64) * item;
            let actual = std::fs::metadata(&path)
                .map_err(|e| SweepError::io(&path, e))?
                .len();
            if actual < expected {
                return Err(SweepError::file(
                    &path,
                    format!(
                        "truncated: {actual} bytes, expected {expected} for shape {:?}",
                        header.shape
                    ),
                ));
            }
            files.push(path);
            shapes.push(shape);
            dtypes.push(header.dtype);
        }
        let kind = kind.unwrap_or(TrainKind::Mps);
        validate_shapes(&dir.display().to_string(), kind, &shapes)?;
        Ok(Self {
            dir,
            kind,
            files,
            shapes,
            dtypes,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether any file is complex128.
    pub fn is_complex(&self) -> bool {
        self.dtypes.contains(&FileDtype::Complex128)
    }

    /// The number of sites.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Always false: an opened train has at least one site.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Reads every core into memory.
    pub fn read<T: Scalar>(&self) -> Result<TensorTrain<T>, SweepError> {
        crate::layer::load(self)
    }
}

/// Reads one site's core as `T` (float64 files are promoted to complex; complex files read as
/// `f64` are an error).
fn read_core<T: Scalar>(
    train: &str,
    site: usize,
    path: &Path,
    shape: CoreShape,
) -> Result<Core<T>, SweepError> {
    let (header, npy) = read_header(path)?;
    let expected = shape.len();
    let truncated = |e: std::io::Error| {
        SweepError::file(
            path,
            format!("truncated or unreadable data ({e}): expected {expected} entries"),
        )
    };
    let data: Vec<T> = match (header.dtype, T::COMPLEX) {
        (FileDtype::Float64, _) => npy
            .into_vec::<f64>()
            .map_err(truncated)?
            .into_iter()
            .map(T::from_real)
            .collect(),
        (FileDtype::Complex128, true) => npy
            .into_vec::<Complex64>()
            .map_err(truncated)?
            .into_iter()
            .map(T::from_complex)
            .collect(),
        (FileDtype::Complex128, false) => {
            return Err(SweepError::file(
                path,
                "complex128 data where float64 was asked for: read the stack as complex",
            ))
        }
    };
    if data.len() != expected {
        return Err(SweepError::file(
            path,
            format!("{} entries, expected {expected}", data.len()),
        ));
    }
    check_finite(train, site, &data)?;
    Ok(Core { shape, data })
}

impl<T: Scalar> Layer<T> for NpyTrain {
    fn name(&self) -> String {
        self.dir.display().to_string()
    }

    fn kind(&self) -> TrainKind {
        self.kind
    }

    fn shapes(&self) -> Vec<CoreShape> {
        self.shapes.clone()
    }

    /// One loader thread reads the cores in order and hands them over through a channel of
    /// capacity 1: at most the current core and the next one are in memory. The thread stops
    /// at the first error (sent as the stream's last item) or when the stream is dropped.
    fn stream(&self, reverse: bool) -> Result<CoreStream<T>, SweepError> {
        if !T::COMPLEX && self.is_complex() {
            return Err(SweepError::file(
                &self.dir,
                "complex128 train where float64 was asked for: read the stack as complex",
            ));
        }
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        if reverse {
            order.reverse();
        }
        let (sender, receiver) = bounded::<Result<Core<T>, SweepError>>(1);
        let name = self.dir.display().to_string();
        let jobs: Vec<(usize, PathBuf, CoreShape)> = order
            .into_iter()
            .map(|site| (site, self.files[site].clone(), self.shapes[site]))
            .collect();
        std::thread::Builder::new()
            .name("tutti-sweep-loader".into())
            .spawn(move || {
                for (site, path, shape) in jobs {
                    let core = read_core::<T>(&name, site, &path, shape);
                    let failed = core.is_err();
                    if sender.send(core).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| SweepError::io(&self.dir, e))?;
        Ok(Box::new(receiver.into_iter()))
    }
}

/// Reads the train in `dir` into memory (see [`NpyTrain::open`] for the checks).
pub fn read_train<T: Scalar>(dir: impl AsRef<Path>) -> Result<TensorTrain<T>, SweepError> {
    NpyTrain::open(dir)?.read()
}

/// Writes `train` to `dir` in the `.npy` directory format.
///
/// The files are written into a temporary sibling directory which is then renamed to `dir`,
/// so `dir` never holds a partial train. An existing `dir` is replaced only if it holds
/// nothing but `.npy` files (a previous train); anything else there is an error.
pub fn write_train<T: Scalar>(
    train: &TensorTrain<T>,
    dir: impl AsRef<Path>,
) -> Result<(), SweepError> {
    let dir = dir.as_ref();
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = dir
        .file_name()
        .ok_or_else(|| SweepError::file(dir, "not a directory name"))?
        .to_string_lossy()
        .to_string();
    if dir.exists() {
        let entries = std::fs::read_dir(dir).map_err(|e| SweepError::io(dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| SweepError::io(dir, e))?;
            if !entry.file_name().to_string_lossy().ends_with(".npy") {
                return Err(SweepError::file(
                    dir,
                    "exists and holds files other than .npy: refusing to replace it",
                ));
            }
        }
    }
    let temp = parent.join(format!(".{base}.tmp-{}", std::process::id()));
    let result = write_files(train, &temp).and_then(|()| {
        if dir.exists() {
            let old = parent.join(format!(".{base}.old-{}", std::process::id()));
            std::fs::rename(dir, &old).map_err(|e| SweepError::io(dir, e))?;
            std::fs::rename(&temp, dir).map_err(|e| SweepError::io(dir, e))?;
            std::fs::remove_dir_all(&old).map_err(|e| SweepError::io(&old, e))
        } else {
            std::fs::rename(&temp, dir).map_err(|e| SweepError::io(dir, e))
        }
    });
    if result.is_err() {
        // Leave nothing partial behind; the original error is what matters.
        let _ = std::fs::remove_dir_all(&temp);
    }
    result
}

fn write_files<T: Scalar>(train: &TensorTrain<T>, dir: &Path) -> Result<(), SweepError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| SweepError::io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| SweepError::io(dir, e))?;
    for (site, core) in train.cores().iter().enumerate() {
        let path = dir.join(format!("{site:03}.npy"));
        let shape: Vec<u64> = core
            .shape
            .dims(train.kind())
            .into_iter()
            .map(|d| d as u64)
            .collect();
        let file = File::create(&path).map_err(|e| SweepError::io(&path, e))?;
        let mut out = BufWriter::new(file);
        let mut writer = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&shape)
            .writer(&mut out)
            .begin_nd()
            .map_err(|e| SweepError::io(&path, e))?;
        writer
            .extend(core.data.iter().copied())
            .map_err(|e| SweepError::io(&path, e))?;
        writer.finish().map_err(|e| SweepError::io(&path, e))?;
        out.flush().map_err(|e| SweepError::io(&path, e))?;
    }
    Ok(())
}
