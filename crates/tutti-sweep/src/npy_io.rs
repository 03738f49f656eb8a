//! The `.npy` directory format of tensor trains: a lazy reader and an atomic writer.
//!
//! A train is a directory with one file per site, `000.npy`, `001.npy`, ..., float64 or
//! complex128 (little endian), C order; MPS cores (Dl, d, Dr), MPO cores (Dl, d_out, d_in, Dr);
//! the first Dl and the last Dr are 1.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crossbeam_channel::bounded;
use npyz::WriterBuilder;
use num_complex::Complex64;

use crate::layer::{CoreStream, Layer};
use crate::memory::try_with_capacity;
use crate::tensor::checked_product;
use crate::train::{
    check_finite, validate_shapes, Core, CoreShape, TensorTrain, TrainKind, MAX_CORE_ENTRIES,
};
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

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Reads and checks the header of the `.npy` file of `site`, without trusting any size in it.
///
/// The header dict is scanned here (not evaluated by a general parser) so that a shape whose
/// product overflows is refused before anything multiplies it: a `BadShape` naming the file
/// and the dims. Errors also for a bad magic string or version, a header longer than the file,
/// a dtype other than float64/complex128 (little endian), Fortran order, and a data section
/// shorter than the shape needs (truncated; the message gives the expected size).
fn read_header(path: &Path, site: usize) -> Result<Header, SweepError> {
    let mut file = File::open(path).map_err(|e| SweepError::io(path, e))?;
    let file_len = file.metadata().map_err(|e| SweepError::io(path, e))?.len();
    let mut prefix = [0u8; 12];
    file.read_exact(&mut prefix)
        .map_err(|_| SweepError::file(path, "truncated: shorter than an .npy header"))?;
    if &prefix[..6] != MAGIC {
        return Err(SweepError::file(
            path,
            "not a readable .npy file: the magic string \\x93NUMPY is missing",
        ));
    }
    // The header length: 2 bytes in version 1, 4 in versions 2 and 3.
    let (text_start, text_len) = match prefix[6] {
        1 => (10u64, u64::from(u16::from_le_bytes([prefix[8], prefix[9]]))),
        2 | 3 => (
            12u64,
            u64::from(u32::from_le_bytes([
                prefix[8], prefix[9], prefix[10], prefix[11],
            ])),
        ),
        version => {
            return Err(SweepError::file(
                path,
                format!("not a readable .npy file: format version {version}, expected 1, 2 or 3"),
            ))
        }
    };
    let data_offset = text_start + text_len;
    if data_offset > file_len {
        return Err(SweepError::file(
            path,
            format!("truncated: {file_len} bytes, shorter than its {data_offset}-byte header"),
        ));
    }
    // Bounded by the file's length (checked above).
    let mut text = Vec::new();
    file.seek(SeekFrom::Start(text_start))
        .map_err(|e| SweepError::io(path, e))?;
    file.take(text_len)
        .read_to_end(&mut text)
        .map_err(|e| SweepError::io(path, e))?;
    let dict = scan_header(&text)
        .map_err(|e| SweepError::file(path, format!("not a readable .npy file: {e}")))?;
    let dtype = match dict.descr.as_str() {
        "<f8" => FileDtype::Float64,
        "<c16" => FileDtype::Complex128,
        other => {
            return Err(SweepError::file(
                path,
                format!("dtype {other}: expected float64 (<f8) or complex128 (<c16)"),
            ))
        }
    };
    let dims: Vec<usize> = dict
        .shape
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect();
    if dict.fortran_order && dims.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(SweepError::file(path, "Fortran order: expected C order"));
    }
    let item: u64 = match dtype {
        FileDtype::Float64 => 8,
        FileDtype::Complex128 => 16,
    };
    let too_large = || SweepError::BadShape {
        train: path.display().to_string(),
        site,
        shape: dims.clone(),
        expected: "dims whose product (the number of entries, and its bytes) fits in memory"
            .to_string(),
    };
    let entries = checked_product(&dims)
        .filter(|&n| n <= MAX_CORE_ENTRIES)
        .ok_or_else(too_large)?;
    let expected = (entries as u64)
        .checked_mul(item)
        .and_then(|bytes| bytes.checked_add(data_offset))
        .ok_or_else(too_large)?;
    if file_len < expected {
        return Err(SweepError::file(
            path,
            format!("truncated: {file_len} bytes, expected {expected} for shape {dims:?}"),
        ));
    }
    Ok(Header {
        shape: dims,
        dtype,
        data_offset,
    })
}

/// What a `.npy` header dict says.
#[derive(Debug, PartialEq)]
struct HeaderDict {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// A value of the header's Python literal, as far as this reader needs one.
#[derive(Debug, PartialEq)]
enum Literal {
    Str(String),
    /// A non-negative integer; `None` when it does not fit in `u64`.
    Int(Option<u64>),
    Negative,
    Word(String),
    Sequence(Vec<Literal>),
}

/// Scans the header dict (`{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 1), }`,
/// as numpy writes it): string keys, values strings, words (`True`, `False`), integers and
/// tuples or lists of them; each key at most once.
fn scan_header(text: &[u8]) -> Result<HeaderDict, String> {
    let mut scanner = Scanner { text, at: 0 };
    scanner.expect(b'{')?;
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    loop {
        if scanner.eat(b'}') {
            break;
        }
        let key = match scanner.value(0)? {
            Literal::Str(key) => key,
            other => return Err(format!("a header key is {other:?}, expected a string")),
        };
        scanner.expect(b':')?;
        let value = scanner.value(0)?;
        let fresh = match key.as_str() {
            "descr" => match value {
                Literal::Str(d) => descr.replace(d).is_none(),
                other => {
                    return Err(format!(
                        "dtype {other:?}: expected float64 (<f8) or complex128 (<c16)"
                    ))
                }
            },
            "fortran_order" => match value {
                Literal::Word(w) if w == "True" || w == "False" => {
                    fortran_order.replace(w == "True").is_none()
                }
                other => return Err(format!("fortran_order is {other:?}, expected a bool")),
            },
            "shape" => match value {
                Literal::Sequence(items) => {
                    let dims = items
                        .iter()
                        .map(|item| match item {
                            Literal::Int(Some(d)) => Ok(*d),
                            Literal::Int(None) => Err("a dimension does not fit in 64 bits"),
                            Literal::Negative => Err("a dimension is negative"),
                            _ => Err("shape must be a tuple of integers"),
                        })
                        .collect::<Result<Vec<u64>, _>>()?;
                    shape.replace(dims).is_none()
                }
                _ => return Err("shape must be a tuple of integers".into()),
            },
            _ => true,
        };
        if !fresh {
            return Err(format!("the key '{key}' appears twice"));
        }
        if !scanner.eat(b',') {
            scanner.expect(b'}')?;
            break;
        }
    }
    if !scanner.rest_is_blank() {
        return Err("text after the header dict".into());
    }
    Ok(HeaderDict {
        descr: descr.ok_or("the header has no 'descr'")?,
        fortran_order: fortran_order.ok_or("the header has no 'fortran_order'")?,
        shape: shape.ok_or("the header has no 'shape'")?,
    })
}

/// A cursor over the header text.
struct Scanner<'a> {
    text: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    /// Nesting deeper than this is refused (a header needs two levels at most).
    const MAX_DEPTH: usize = 8;

    fn skip_blank(&mut self) {
        while self.at < self.text.len() && self.text[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn rest_is_blank(&mut self) -> bool {
        self.skip_blank();
        self.at == self.text.len()
    }

    /// Consumes `byte` (after blanks) if it comes next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_blank();
        let next = self.text.get(self.at) == Some(&byte);
        if next {
            self.at += 1;
        }
        next
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at byte {} of the header",
                char::from(byte),
                self.at
            ))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        self.skip_blank();
        let start = self.at;
        let Some(&first) = self.text.get(start) else {
            return Err("the header ends inside the dict".into());
        };
        match first {
            b'\'' | b'"' => {
                let len = self.text[start + 1..]
                    .iter()
                    .position(|&b| b == first || b == b'\\')
                    .filter(|&len| self.text[start + 1 + len] == first)
                    .ok_or("an unterminated (or escaped) string in the header")?;
                self.at = start + 2 + len;
                let body = &self.text[start + 1..start + 1 + len];
                Ok(Literal::Str(String::from_utf8_lossy(body).into_owned()))
            }
            b'(' | b'[' => {
                if depth >= Self::MAX_DEPTH {
                    return Err("the header nests too deeply".into());
                }
                let close = if first == b'(' { b')' } else { b']' };
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        self.expect(close)?;
                        break;
                    }
                }
                Ok(Literal::Sequence(items))
            }
            b'0'..=b'9' | b'-' | b'+' => {
                self.at += 1;
                let digits_start = if first.is_ascii_digit() {
                    start
                } else {
                    start + 1
                };
                while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                let digits = &self.text[digits_start..self.at];
                if digits.is_empty() {
                    return Err(format!("a lone '{}' in the header", char::from(first)));
                }
                let value = digits.iter().try_fold(0u64, |acc, &d| {
                    acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
                });
                if first == b'-' && value != Some(0) {
                    Ok(Literal::Negative)
                } else {
                    Ok(Literal::Int(value))
                }
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                while self
                    .text
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                {
                    self.at += 1;
                }
                Ok(Literal::Word(
                    String::from_utf8_lossy(&self.text[start..self.at]).into_owned(),
                ))
            }
            other => Err(format!(
                "unexpected character {:?} at byte {start} of the header",
                char::from(other)
            )),
        }
    }
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
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| SweepError::io(&path, e))?;
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
        let file = out
            .into_inner()
            .map_err(|e| SweepError::io(&path, e.into_error()))?;
        file.sync_all().map_err(|e| SweepError::io(&path, e))?;
    }
    sync_dir(dir)
}
