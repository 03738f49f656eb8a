//! The `.npy` directory format of tensor trains: a lazy reader and an atomic writer.
//!
//! A train is a directory with one file per site, `000.npy`, `001.npy`, ..., float64 or
//! complex128 (little endian), C order; MPS cores (Dl, d, Dr), MPO cores (Dl, d_out, d_in, Dr);
//! the first Dl and the last Dr are 1.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crossbeam_channel::bounded;
use num_complex::Complex64;
use tutti_plan::npy::{self, NpyError};

use crate::layer::{CoreStream, Layer};
use crate::memory::try_with_capacity;
use crate::tensor::checked_product;
use crate::train::{
    check_finite, validate_shapes, Core, CoreShape, TensorTrain, TrainKind, MAX_CORE_ENTRIES,
};
use crate::{Scalar, SweepError};

/// The element type of a `.npy` file: float64 (`<f8`) or complex128 (`<c16`).
pub use tutti_plan::npy::Dtype as FileDtype;

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

/// What the sweep needs of a checked `.npy` header.
struct Header {
    shape: Vec<usize>,
    dtype: FileDtype,
    data_offset: u64,
}

/// Reads and checks the header of the `.npy` file of `site` ([`npy::read_header`]: nothing in
/// it is trusted), and what the sweep needs besides: C order and a core that fits in memory.
///
/// Errors: a shape whose bytes overflow or whose entries exceed [`MAX_CORE_ENTRIES`] is a
/// `BadShape` naming the file and the dims; a bad magic string or version, a header longer
/// than the file, a dtype other than float64/complex128 (little endian), Fortran order, and a
/// data section shorter than the shape needs (truncated; the message gives the expected size)
/// are `File` errors.
fn read_header(path: &Path, site: usize) -> Result<Header, SweepError> {
    let too_large = |shape: Vec<usize>| SweepError::BadShape {
        train: path.display().to_string(),
        site,
        shape,
        expected: "dims whose product (the number of entries, and its bytes) fits in memory"
            .to_string(),
    };
    let header = npy::read_header(path).map_err(|error| match error {
        NpyError::TooLarge { shape, .. } => too_large(dims(&shape)),
        NpyError::Io { path, source } => SweepError::io(path, source),
        other => SweepError::file(other.path(), other.detail()),
    })?;
    if !header.is_c_order() {
        return Err(SweepError::file(path, "Fortran order: expected C order"));
    }
    let shape = dims(&header.shape);
    if checked_product(&shape).is_none_or(|entries| entries > MAX_CORE_ENTRIES) {
        return Err(too_large(shape));
    }
    Ok(Header {
        shape,
        dtype: header.dtype,
        data_offset: header.data_offset,
    })
}

/// The dims as `usize` (`usize::MAX` for one that does not fit, which no product passes).
fn dims(shape: &[u64]) -> Vec<usize> {
    shape
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect()
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
            let header = read_header(&path, site)?;
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
/// `f64` are an error). The header is read and checked again, and must still give `shape`.
fn read_core<T: Scalar>(
    train: &str,
    site: usize,
    path: &Path,
    kind: TrainKind,
    shape: CoreShape,
) -> Result<Core<T>, SweepError> {
    let header = read_header(path, site)?;
    if CoreShape::from_dims(kind, &header.shape) != Some(shape) {
        return Err(SweepError::file(
            path,
            format!(
                "shape {:?}, but {:?} when the train was opened: the file changed",
                header.shape,
                shape.dims(kind)
            ),
        ));
    }
    if header.dtype == FileDtype::Complex128 && !T::COMPLEX {
        return Err(SweepError::file(
            path,
            "complex128 data where float64 was asked for: read the stack as complex",
        ));
    }
    // `read_header` checked that the count fits in memory and that the file holds it.
    let expected = shape.len();
    let mut data: Vec<T> = try_with_capacity(expected, || {
        format!("the core of site {site} ({})", path.display())
    })?;
    let mut file = File::open(path).map_err(|e| SweepError::io(path, e))?;
    file.seek(SeekFrom::Start(header.data_offset))
        .map_err(|e| SweepError::io(path, e))?;
    let mut reader = BufReader::new(file);
    let item = match header.dtype {
        FileDtype::Float64 => 8,
        FileDtype::Complex128 => 16,
    };
    let mut chunk = vec![0u8; item * 4096];
    while data.len() < expected {
        let count = (expected - data.len()).min(4096);
        let bytes = &mut chunk[..count * item];
        reader.read_exact(bytes).map_err(|e| {
            SweepError::file(
                path,
                format!("truncated or unreadable data ({e}): expected {expected} entries"),
            )
        })?;
        match header.dtype {
            FileDtype::Float64 => data.extend(
                bytes
                    .chunks_exact(8)
                    .map(|b| T::from_real(f64::from_le_bytes(le8(b)))),
            ),
            FileDtype::Complex128 => data.extend(bytes.chunks_exact(16).map(|b| {
                T::from_complex(Complex64::new(
                    f64::from_le_bytes(le8(&b[..8])),
                    f64::from_le_bytes(le8(&b[8..])),
                ))
            })),
        }
    }
    check_finite(train, site, &data)?;
    Ok(Core { shape, data })
}

/// The first 8 bytes of `bytes` (which holds at least 8).
fn le8(bytes: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[..8]);
    out
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
    fn stream(&self, reverse: bool) -> Result<CoreStream<'_, T>, SweepError> {
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
        let kind = self.kind;
        let jobs: Vec<(usize, PathBuf, CoreShape)> = order
            .into_iter()
            .map(|site| (site, self.files[site].clone(), self.shapes[site]))
            .collect();
        let loader = std::thread::Builder::new()
            .name("tutti-sweep-loader".into())
            .spawn(move || {
                for (site, path, shape) in jobs {
                    let core = read_core::<T>(&name, site, &path, kind, shape);
                    let failed = core.is_err();
                    if sender.send(core).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(|e| SweepError::io(&self.dir, e))?;
        Ok(Box::new(LoadedCores {
            cores: Some(receiver.into_iter()),
            loader: Some(loader),
        }))
    }

    /// The core in use, the one in the channel and the one the loader is reading.
    fn cores_in_memory(&self) -> Option<usize> {
        Some(3)
    }
}

/// The cores a loader thread reads, and the thread itself: dropping the stream closes the
/// channel (the thread stops at its next hand-over) and joins the thread, so no reader
/// outlives the stream that started it.
struct LoadedCores<T> {
    cores: Option<crossbeam_channel::IntoIter<Result<Core<T>, SweepError>>>,
    loader: Option<std::thread::JoinHandle<()>>,
}

impl<T> Iterator for LoadedCores<T> {
    type Item = Result<Core<T>, SweepError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.cores.as_mut()?.next()
    }
}

impl<T> Drop for LoadedCores<T> {
    fn drop(&mut self) {
        self.cores = None;
        if let Some(loader) = self.loader.take() {
            // The loader only reads files and sends; a panic there has already ended the
            // stream early, which `layer::load` reports as a short train.
            let _ = loader.join();
        }
    }
}

/// Reads the train in `dir` into memory (see [`NpyTrain::open`] for the checks).
pub fn read_train<T: Scalar>(dir: impl AsRef<Path>) -> Result<TensorTrain<T>, SweepError> {
    NpyTrain::open(dir)?.read()
}

/// Writes `train` to `dir` in the `.npy` directory format.
///
/// The files are written into a fresh temporary sibling directory (a random name, created
/// exclusively, writable by its owner only, so nothing can be planted in it), each file created
/// exclusively and synced, and the directory is
/// then renamed to `dir`, so `dir` never holds a partial train. An existing `dir` is replaced
/// only if it holds nothing but `.npy` files (a previous train); anything else there is an
/// error. It is first renamed aside to a second fresh name and removed once the new train is
/// in place: a crash between the two renames leaves the old train complete under
/// `.<name>.old<random>` beside `dir`. A failed write removes what it made.
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
    let replacing =
        match std::fs::symlink_metadata(dir) {
            Ok(meta) if meta.is_dir() => true,
            Ok(_) => return Err(SweepError::file(
                dir,
                "exists and is not a directory (a file or a symbolic link): refusing to replace it",
            )),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => false,
            Err(err) => return Err(SweepError::io(dir, err)),
        };
    if replacing {
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
    let fresh_sibling = |role: &str| {
        tempfile::Builder::new()
            .prefix(&format!(".{base}.{role}"))
            .tempdir_in(&parent)
            .map_err(|e| SweepError::io(&parent, e))
    };
    // Missing parents are created, as `create_dir_all` would.
    std::fs::create_dir_all(&parent).map_err(|e| SweepError::io(&parent, e))?;
    let temp = fresh_sibling("tmp")?;
    write_files(train, temp.path())?;
    if replacing {
        // Renaming a directory onto an empty one replaces it; the old train is then removed.
        let old = fresh_sibling("old")?;
        std::fs::rename(dir, old.path()).map_err(|e| SweepError::io(dir, e))?;
        if let Err(err) = std::fs::rename(temp.path(), dir) {
            // Put the old train back (the new one goes with its temporary); if even that
            // fails, the old train stays where it is instead of being removed.
            if std::fs::rename(old.path(), dir).is_err() {
                let _ = old.keep();
            }
            return Err(SweepError::io(dir, err));
        }
        // The temporary's name is free now: nothing of ours is left there to remove.
        let _ = temp.keep();
        old.close().map_err(|e| SweepError::io(dir, e))?;
    } else {
        std::fs::rename(temp.path(), dir).map_err(|e| SweepError::io(dir, e))?;
        let _ = temp.keep();
    }
    sync_dir(&parent)
}

/// Flushes a directory's entries (a rename into it) to disk.
fn sync_dir(dir: &Path) -> Result<(), SweepError> {
    File::open(dir)
        .and_then(|handle| handle.sync_all())
        .map_err(|e| SweepError::io(dir, e))
}

/// Writes every core as `NNN.npy` into the empty directory `dir`, each file created
/// exclusively and synced.
fn write_files<T: Scalar>(train: &TensorTrain<T>, dir: &Path) -> Result<(), SweepError> {
    for (site, core) in train.cores().iter().enumerate() {
        let path = dir.join(format!("{site:03}.npy"));
        let shape: Vec<u64> = core
            .shape
            .dims(train.kind())
            .into_iter()
            .map(|d| d as u64)
            .collect();
        let dtype = if T::COMPLEX {
            FileDtype::Complex128
        } else {
            FileDtype::Float64
        };
        let header = npy::header_bytes(dtype, &shape).map_err(|e| SweepError::io(&path, e))?;
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| SweepError::io(&path, e))?;
        let mut out = BufWriter::new(file);
        out.write_all(&header)
            .map_err(|e| SweepError::io(&path, e))?;
        for &x in &core.data {
            let z = x.to_complex();
            let written = if T::COMPLEX {
                out.write_all(&z.re.to_le_bytes())
                    .and_then(|()| out.write_all(&z.im.to_le_bytes()))
            } else {
                out.write_all(&z.re.to_le_bytes())
            };
            written.map_err(|e| SweepError::io(&path, e))?;
        }
        let file = out
            .into_inner()
            .map_err(|e| SweepError::io(&path, e.into_error()))?;
        file.sync_all().map_err(|e| SweepError::io(&path, e))?;
    }
    sync_dir(dir)
}
