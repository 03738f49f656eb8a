//! `.npy` files of float64 and complex128 (little endian): a header reader that trusts no
//! size in the file, float64 and complex128 readers and writers, and the header bytes numpy
//! writes.
//!
//! - [`read_header`] checks everything a header claims before anything is allocated or
//!   multiplied: the magic string, the format version (1.0, 2.0 or 3.0), a header that lies
//!   inside the file (at most [`MAX_HEADER_LEN`] bytes), the dict (exactly the keys `descr`,
//!   `fortran_order` and `shape`, each once, brackets nested at most [`MAX_NESTING`] deep),
//!   the dtype (a [`Dtype`]), a shape whose bytes fit in `u64` ([`NpyError::TooLarge`]
//!   otherwise), and a file long enough for the data ("truncated: ..." otherwise).
//! - [`read_f64`] reads a float64, C-order array with its shape; [`read_c128`] reads a
//!   complex128 one as `[re, im]` pairs, and promotes a float64 file (imaginary parts `0.0`).
//! - [`write_f64`] and [`write_c128`] write one atomically ([`crate::files::AtomicFile`]);
//!   [`write_f64_into`] and [`write_c128_into`] write into an already created
//!   [`AtomicFile`], for outputs committed together; [`header_bytes`] gives the header alone,
//!   for writers of other element types.
//!
//! Written headers are byte for byte numpy's (`numpy.save`): version 1.0 (2.0 when the header
//! outgrows 65535 bytes), `{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }` (`'<c16'` for
//! complex128), the spare spaces numpy leaves for growing the first axis, then spaces and a newline so that the
//! data starts at a multiple of 64 bytes.
//!
//! Every error is an [`NpyError`] naming the file.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::files::AtomicFile;

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// The longest header text read, in bytes: numpy's own reader refuses longer ones by default,
/// and a float64 or complex128 header needs far less.
pub const MAX_HEADER_LEN: u64 = 10_000;

/// The deepest bracket nesting a header may have, its dict included: a valid header nests
/// two (the dict and the shape tuple).
pub const MAX_NESTING: usize = 4;

/// numpy aligns the data of every file it writes to this many bytes.
const ARRAY_ALIGN: usize = 64;

/// numpy leaves room for the first axis to grow to this many digits in the headers it writes.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// The bytes read at once when reading data.
const READ_CHUNK: usize = 1 << 16;

/// The element type of a `.npy` file this module reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// `<f8`: little-endian IEEE 754 double.
    Float64,
    /// `<c16`: little-endian complex double, the real part first.
    Complex128,
}

impl Dtype {
    /// The bytes of one entry: 8 or 16.
    pub const fn item_size(self) -> u64 {
        match self {
            Self::Float64 => 8,
            Self::Complex128 => 16,
        }
    }

    /// The numpy `descr` string: `<f8` or `<c16`.
    pub const fn descr(self) -> &'static str {
        match self {
            Self::Float64 => "<f8",
            Self::Complex128 => "<c16",
        }
    }

    /// The name in messages: `float64` or `complex128`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Float64 => "float64",
            Self::Complex128 => "complex128",
        }
    }

    /// The dtype whose `descr` is exactly `descr` (`<f8` or `<c16`), if any.
    pub fn from_descr(descr: &str) -> Option<Self> {
        [Self::Float64, Self::Complex128]
            .into_iter()
            .find(|dtype| dtype.descr() == descr)
    }
}

/// What a checked `.npy` header says (see [`read_header`] for the checks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The dims, outermost first.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: Dtype,
    /// Whether the data is stored in Fortran (column-major) order.
    pub fortran_order: bool,
    /// Where the data starts: the bytes of the magic string, version, header length and
    /// header.
    pub data_offset: u64,
}

impl Header {
    /// The number of entries (the product of the dims; 1 for a 0-d array), or `None` when it
    /// overflows `u64` (never for a header from [`read_header`]).
    pub fn entries(&self) -> Option<u64> {
        checked_product(&self.shape)
    }

    /// The bytes of the data, or `None` when they overflow `u64` (never for a header from
    /// [`read_header`]).
    pub fn data_len(&self) -> Option<u64> {
        self.entries()?.checked_mul(self.dtype.item_size())
    }

    /// Whether the data is laid out in C (row-major) order: not Fortran order, or Fortran
    /// order with at most one dim above 1 (the same bytes either way).
    pub fn is_c_order(&self) -> bool {
        !self.fortran_order || self.shape.iter().filter(|&&d| d > 1).count() <= 1
    }
}

/// Why a `.npy` file could not be read or written. Every variant names the file; the message
/// is `<path>: <detail>` ([`NpyError::detail`]).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    /// Opening, reading or writing the file failed (an allocation that failed is reported
    /// here too, as [`io::ErrorKind::OutOfMemory`]).
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The file is not a `.npy` this module reads: a bad magic string or version, a header
    /// that is malformed, too long or longer than the file, another dtype, Fortran order
    /// where C order is needed, or a data section shorter than the shape needs.
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the expected value or size.
        message: String,
    },
    /// The header claims a shape whose number of entries, or their bytes after the header,
    /// overflows `u64`.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The dims the header claims.
        shape: Vec<u64>,
    },
    /// Values to write whose number is not the product of the shape.
    ShapeMismatch {
        /// The file to be written.
        path: PathBuf,
        /// The shape asked for.
        shape: Vec<u64>,
        /// The number of values given.
        values: usize,
    },
}

impl NpyError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::Io { path, .. }
            | Self::Malformed { path, .. }
            | Self::TooLarge { path, .. }
            | Self::ShapeMismatch { path, .. } => path,
        }
    }

    /// The message without the path, for callers whose own error carries the path apart.
    pub fn detail(&self) -> String {
        match self {
            Self::Io { source, .. } => source.to_string(),
            Self::Malformed { message, .. } => message.clone(),
            Self::TooLarge { shape, .. } => {
                format!("shape {shape:?}: the number of entries, or their bytes, overflows 64 bits")
            }
            Self::ShapeMismatch { shape, values, .. } => {
                match checked_product(shape) {
                    Some(entries) => {
                        format!("shape {shape:?} holds {entries} entries, but {values} values were given")
                    }
                    None => format!(
                    "shape {shape:?}: the number of entries overflows 64 bits ({values} values \
                     were given)"
                ),
                }
            }
        }
    }
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path().display(), self.detail())
    }
}

/// The product of `dims` (1 for none), or `None` when it overflows.
fn checked_product(dims: &[u64]) -> Option<u64> {
    dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Reads and checks the header of the `.npy` file at `path`, float64 or complex128.
///
/// Nothing in the file is trusted: the header dict is scanned here, not evaluated, and every
/// size is checked before it is used.
///
/// Errors: [`NpyError::Io`] when the file cannot be opened or read;
/// [`NpyError::TooLarge`] when the shape's bytes plus the header overflow `u64`;
/// [`NpyError::Malformed`] for a bad magic string or version, a header longer than the file or
/// than [`MAX_HEADER_LEN`], a malformed dict (an unknown, missing or repeated key, a negative
/// dim or one beyond 64 bits, brackets nested deeper than [`MAX_NESTING`]), a dtype other than
/// `<f8` and `<c16`, and a file shorter than the data needs ("truncated: N bytes, expected M
/// for shape [..]"). Fortran order is reported in [`Header::fortran_order`], not refused.
pub fn read_header(path: impl AsRef<Path>) -> Result<Header, NpyError> {
    let path = path.as_ref();
    open_checked(path, &[Dtype::Float64, Dtype::Complex128]).map(|(header, _)| header)
}

/// Reads a float64, C-order `.npy` array: its shape and its entries in C order.
///
/// Errors: those of [`read_header`]; a dtype other than float64 ("expected dtype float64
/// ('<f8'), got ..."); Fortran order with more than one dim above 1 ("expected C order, got
/// Fortran order"); a file that shrinks while it is read; and an allocation for the entries
/// that fails ([`NpyError::Io`], [`io::ErrorKind::OutOfMemory`]).
pub fn read_f64(path: impl AsRef<Path>) -> Result<(Vec<u64>, Vec<f64>), NpyError> {
    read_entries(path.as_ref(), &[Dtype::Float64], |_, entry| {
        f64::from_le_bytes(word(entry, 0))
    })
}

/// Reads a complex128, C-order `.npy` array: its shape and its entries in C order, each as
/// `[re, im]`. A float64 file is promoted: each entry `x` becomes `[x, 0.0]`, its bits kept
/// (`-0.0` included).
///
/// Errors: those of [`read_header`]; a dtype other than complex128 and float64 ("expected
/// dtype complex128 ('<c16') or float64 ('<f8'), got ..."); Fortran order with more than one
/// dim above 1 ("expected C order, got Fortran order"); a file that shrinks while it is read;
/// and an allocation for the entries that fails ([`NpyError::Io`],
/// [`io::ErrorKind::OutOfMemory`]).
pub fn read_c128(path: impl AsRef<Path>) -> Result<(Vec<u64>, Vec<[f64; 2]>), NpyError> {
    read_entries(
        path.as_ref(),
        &[Dtype::Complex128, Dtype::Float64],
        |dtype, entry| match dtype {
            Dtype::Float64 => [f64::from_le_bytes(word(entry, 0)), 0.0],
            Dtype::Complex128 => [
                f64::from_le_bytes(word(entry, 0)),
                f64::from_le_bytes(word(entry, 8)),
            ],
        },
    )
}

/// The 8 bytes of `entry` from `at` (zeros past its end; every caller passes a whole entry).
fn word(entry: &[u8], at: usize) -> [u8; 8] {
    let mut word = [0u8; 8];
    if let Some(source) = entry.get(at..at + 8) {
        word.copy_from_slice(source);
    }
    word
}

/// Reads a C-order array whose dtype is one of `accepted`: its shape and its entries, each
/// decoded by `decode` from its [`Dtype::item_size`] bytes.
fn read_entries<T>(
    path: &Path,
    accepted: &[Dtype],
    decode: impl Fn(Dtype, &[u8]) -> T,
) -> Result<(Vec<u64>, Vec<T>), NpyError> {
    let (header, mut file) = open_checked(path, accepted)?;
    if !header.is_c_order() {
        return Err(malformed(path, "expected C order, got Fortran order"));
    }
    let too_large = || NpyError::TooLarge {
        path: path.to_path_buf(),
        shape: header.shape.clone(),
    };
    let entries = header.entries().ok_or_else(too_large)?;
    let count = usize::try_from(entries).map_err(|_| too_large())?;
    let mut values: Vec<T> = Vec::new();
    values.try_reserve_exact(count).map_err(|error| {
        io_error(
            path,
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                format!(
                    "cannot allocate {count} {} entries for shape {:?}: {error}",
                    header.dtype.name(),
                    header.shape
                ),
            ),
        )
    })?;
    file.seek(SeekFrom::Start(header.data_offset))
        .map_err(|e| io_error(path, e))?;
    let item = match header.dtype {
        Dtype::Float64 => 8,
        Dtype::Complex128 => 16,
    };
    let mut chunk = vec![0u8; READ_CHUNK];
    while values.len() < count {
        let items = (count - values.len()).min(READ_CHUNK / item);
        let bytes = &mut chunk[..items * item];
        file.read_exact(bytes).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                malformed(
                    path,
                    format!(
                        "truncated: the data ends before its {entries} entries (shape {:?})",
                        header.shape
                    ),
                )
            } else {
                io_error(path, e)
            }
        })?;
        values.extend(
            bytes
                .chunks_exact(item)
                .map(|entry| decode(header.dtype, entry)),
        );
    }
    Ok((header.shape, values))
}

fn io_error(path: &Path, source: io::Error) -> NpyError {
    NpyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn malformed(path: &Path, message: impl Into<String>) -> NpyError {
    NpyError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Opens `path`, reads and checks its header, expecting one of `accepted` as the dtype;
/// returns the header and the open file (its position anywhere).
fn open_checked(path: &Path, accepted: &[Dtype]) -> Result<(Header, File), NpyError> {
    let mut file = File::open(path).map_err(|e| io_error(path, e))?;
    let file_len = file.metadata().map_err(|e| io_error(path, e))?.len();
    let mut prefix = Vec::with_capacity(12);
    (&mut file)
        .take(12)
        .read_to_end(&mut prefix)
        .map_err(|e| io_error(path, e))?;
    if prefix.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(malformed(
            path,
            "not a readable .npy file: the magic string \\x93NUMPY is missing",
        ));
    }
    let short = || malformed(path, "truncated: shorter than an .npy header");
    let (major, minor) = match prefix.get(6..8) {
        Some(&[major, minor]) => (major, minor),
        _ => return Err(short()),
    };
    // The header length: 2 bytes in version 1, 4 in versions 2 and 3.
    let text_start: u64 = match (major, minor) {
        (1, 0) => 10,
        (2 | 3, 0) => 12,
        _ => {
            return Err(malformed(
                path,
                format!(
                    "not a readable .npy file: format version {major}.{minor}, expected 1.0, \
                     2.0 or 3.0"
                ),
            ))
        }
    };
    let text_len = match prefix.get(8..) {
        Some(&[a, b, ..]) if text_start == 10 => u64::from(u16::from_le_bytes([a, b])),
        Some(&[a, b, c, d]) => u64::from(u32::from_le_bytes([a, b, c, d])),
        _ => return Err(short()),
    };
    // Neither can overflow: text_len < 2^32.
    let data_offset = text_start + text_len;
    if data_offset > file_len {
        return Err(malformed(
            path,
            format!("truncated: {file_len} bytes, shorter than its {data_offset}-byte header"),
        ));
    }
    if text_len > MAX_HEADER_LEN {
        return Err(malformed(
            path,
            format!(
                "not a readable .npy file: a header of {text_len} bytes, more than the \
                 {MAX_HEADER_LEN} a float64 or complex128 array needs"
            ),
        ));
    }
    let mut text = Vec::new();
    file.seek(SeekFrom::Start(text_start))
        .map_err(|e| io_error(path, e))?;
    (&mut file)
        .take(text_len)
        .read_to_end(&mut text)
        .map_err(|e| io_error(path, e))?;
    if u64::try_from(text.len()) != Ok(text_len) {
        return Err(malformed(
            path,
            format!("truncated: the file ends inside its {data_offset}-byte header"),
        ));
    }
    let dict = scan_header(&text)
        .map_err(|e| malformed(path, format!("not a readable .npy file: {e}")))?;
    let dtype = dict
        .descr
        .as_deref()
        .and_then(Dtype::from_descr)
        .filter(|dtype| accepted.contains(dtype))
        .ok_or_else(|| {
            let expected: Vec<String> = accepted
                .iter()
                .map(|dtype| format!("{} ('{}')", dtype.name(), dtype.descr()))
                .collect();
            let got = dict
                .descr
                .as_deref()
                .unwrap_or("a structured or sub-array dtype");
            malformed(
                path,
                format!("expected dtype {}, got {got}", expected.join(" or ")),
            )
        })?;
    let header = Header {
        shape: dict.shape,
        dtype,
        fortran_order: dict.fortran_order,
        data_offset,
    };
    let expected = header
        .data_len()
        .and_then(|bytes| bytes.checked_add(data_offset))
        .ok_or_else(|| NpyError::TooLarge {
            path: path.to_path_buf(),
            shape: header.shape.clone(),
        })?;
    if file_len < expected {
        return Err(malformed(
            path,
            format!(
                "truncated: {file_len} bytes, expected {expected} for shape {:?}",
                header.shape
            ),
        ));
    }
    Ok((header, file))
}

/// What a `.npy` header dict says.
#[derive(Debug, PartialEq)]
struct HeaderDict {
    /// The dtype string; `None` when `descr` is not a string (a structured dtype).
    descr: Option<String>,
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
    /// A nested dict, read only to be refused.
    Dict,
}

/// Scans the header dict (`{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 1), }`,
/// as numpy writes it): string keys, values strings, words (`True`, `False`), integers,
/// tuples or lists of them; exactly the keys `descr`, `fortran_order` and `shape`, each once.
fn scan_header(text: &[u8]) -> Result<HeaderDict, String> {
    let mut scanner = Scanner { text, at: 0 };
    scanner.expect(b'{')?;
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    loop {
        if scanner.eat(b'}') {
            break;
        }
        let key = match scanner.value(1)? {
            Literal::Str(key) => key,
            other => return Err(format!("a header key is {other:?}, expected a string")),
        };
        scanner.expect(b':')?;
        let value = scanner.value(1)?;
        let fresh = match key.as_str() {
            "descr" => match value {
                Literal::Str(d) => descr.replace(Some(d)).is_none(),
                _ => descr.replace(None).is_none(),
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
            other => {
                return Err(format!(
                    "the header has the key '{other}'; expected exactly 'descr', \
                     'fortran_order' and 'shape'"
                ))
            }
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
    fn skip_blank(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn rest_is_blank(&mut self) -> bool {
        self.skip_blank();
        self.at >= self.text.len()
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

    /// The next value, `depth` brackets deep (the header's dict is depth 1).
    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        self.skip_blank();
        let start = self.at;
        let rest = self.text.get(start..).unwrap_or_default();
        let Some(&first) = rest.first() else {
            return Err("the header ends inside the dict".into());
        };
        match first {
            b'\'' | b'"' => {
                let body = &rest[1..];
                let len = body
                    .iter()
                    .position(|&b| b == first || b == b'\\')
                    .filter(|&len| body.get(len) == Some(&first))
                    .ok_or("an unterminated (or escaped) string in the header")?;
                self.at = start + 2 + len;
                Ok(Literal::Str(
                    String::from_utf8_lossy(&body[..len]).into_owned(),
                ))
            }
            b'(' | b'[' | b'{' => {
                if depth >= MAX_NESTING {
                    return Err(format!(
                        "the header nests brackets more than {MAX_NESTING} deep; expected a \
                         float64 or complex128 array header"
                    ));
                }
                self.at += 1;
                if first == b'{' {
                    self.dict_rest(depth + 1)?;
                    return Ok(Literal::Dict);
                }
                let close = if first == b'(' { b')' } else { b']' };
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
                let sign = usize::from(!first.is_ascii_digit());
                let digits_len = rest[sign..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .unwrap_or(rest.len() - sign);
                let digits = &rest[sign..sign + digits_len];
                self.at = start + sign + digits_len;
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
                let len = rest
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                    .unwrap_or(rest.len());
                self.at = start + len;
                Ok(Literal::Word(
                    String::from_utf8_lossy(&rest[..len]).into_owned(),
                ))
            }
            other => Err(format!(
                "unexpected character {:?} at byte {start} of the header",
                char::from(other)
            )),
        }
    }

    /// The rest of a nested dict after its `{`, its entries `depth` brackets deep.
    fn dict_rest(&mut self, depth: usize) -> Result<(), String> {
        loop {
            if self.eat(b'}') {
                return Ok(());
            }
            self.value(depth)?;
            self.expect(b':')?;
            self.value(depth)?;
            if !self.eat(b',') {
                return self.expect(b'}');
            }
        }
    }
}

/// The header numpy writes for a C-order array of `dtype` and `shape`: magic string, version,
/// header length and the dict, padded with spaces and ended by a newline so that the data
/// starts at a multiple of 64 bytes. Version 1.0, or 2.0 when the header is longer than
/// version 1.0's 2-byte length allows.
///
/// Errors ([`io::ErrorKind::InvalidInput`]): a header longer than 4 GiB (a shape of more than
/// a billion dims).
pub fn header_bytes(dtype: Dtype, shape: &[u64]) -> io::Result<Vec<u8>> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = match dims.as_slice() {
        [one] => format!("({one},)"),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {tuple}, }}",
        dtype.descr()
    );
    // Room to grow the first axis in place, as numpy leaves it.
    if let Some(first) = dims.first() {
        let spare = GROWTH_AXIS_MAX_DIGITS.saturating_sub(first.len());
        dict.extend(std::iter::repeat_n(' ', spare));
    }
    // The dict, its newline and at least one space of padding (numpy pads a whole 64 bytes
    // when the rest is aligned already).
    let padded_len = |length_field: usize| {
        let unpadded = MAGIC.len() + 2 + length_field + dict.len() + 1;
        dict.len() + 1 + (ARRAY_ALIGN - unpadded % ARRAY_ALIGN)
    };
    let (version, length_field) = match u16::try_from(padded_len(2)) {
        Ok(len) => (1u8, len.to_le_bytes().to_vec()),
        Err(_) => match u32::try_from(padded_len(4)) {
            Ok(len) => (2u8, len.to_le_bytes().to_vec()),
            Err(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a .npy header for {} dims is longer than the format allows",
                        shape.len()
                    ),
                ))
            }
        },
    };
    let full_len = MAGIC.len() + 2 + length_field.len() + padded_len(length_field.len());
    let mut bytes = Vec::with_capacity(full_len);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[version, 0]);
    bytes.extend_from_slice(&length_field);
    bytes.extend_from_slice(dict.as_bytes());
    bytes.resize(full_len - 1, b' ');
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `values` as a float64, C-order `.npy` of `shape` at `path`, atomically: the file
/// appears complete or not at all ([`AtomicFile`]); a file already there is replaced.
///
/// Errors: [`NpyError::ShapeMismatch`] when the product of `shape` is not `values.len()`;
/// [`NpyError::Io`] when the temporary cannot be created, written or renamed into place.
pub fn write_f64(path: impl AsRef<Path>, shape: &[u64], values: &[f64]) -> Result<(), NpyError> {
    let path = path.as_ref();
    let mut file = AtomicFile::create(path).map_err(|e| io_error(path, e))?;
    write_f64_into(&mut file, shape, values)?;
    file.commit().map_err(|e| io_error(path, e))
}

/// Writes `values` as a float64, C-order `.npy` of `shape` into `file`, which must be empty;
/// the caller commits it (with others, say, so that several outputs appear together). Errors
/// name `file`'s destination.
///
/// Errors: [`NpyError::ShapeMismatch`] when the product of `shape` is not `values.len()`
/// (nothing is written then); [`NpyError::Io`] when writing fails.
pub fn write_f64_into(
    file: &mut AtomicFile,
    shape: &[u64],
    values: &[f64],
) -> Result<(), NpyError> {
    write_words(
        file,
        Dtype::Float64,
        shape,
        values.len(),
        values.iter().copied(),
    )
}

/// Writes `values` (`[re, im]` each) as a complex128, C-order `.npy` of `shape` at `path`,
/// atomically: the file appears complete or not at all ([`AtomicFile`]); a file already
/// there is replaced. Every part keeps its bits (`-0.0` included).
///
/// Errors: [`NpyError::ShapeMismatch`] when the product of `shape` is not `values.len()`;
/// [`NpyError::Io`] when the temporary cannot be created, written or renamed into place.
pub fn write_c128(
    path: impl AsRef<Path>,
    shape: &[u64],
    values: &[[f64; 2]],
) -> Result<(), NpyError> {
    let path = path.as_ref();
    let mut file = AtomicFile::create(path).map_err(|e| io_error(path, e))?;
    write_c128_into(&mut file, shape, values)?;
    file.commit().map_err(|e| io_error(path, e))
}

/// Writes `values` (`[re, im]` each) as a complex128, C-order `.npy` of `shape` into `file`,
/// which must be empty; the caller commits it (with others, say, so that several outputs
/// appear together). Errors name `file`'s destination.
///
/// Errors: [`NpyError::ShapeMismatch`] when the product of `shape` is not `values.len()`
/// (nothing is written then); [`NpyError::Io`] when writing fails.
pub fn write_c128_into(
    file: &mut AtomicFile,
    shape: &[u64],
    values: &[[f64; 2]],
) -> Result<(), NpyError> {
    write_words(
        file,
        Dtype::Complex128,
        shape,
        values.len(),
        values.iter().flatten().copied(),
    )
}

/// Writes the header of `dtype` and `shape`, then `words` (the `entries` values' `f64`
/// parts, in order), into `file`; refuses a shape that does not hold `entries` values.
fn write_words(
    file: &mut AtomicFile,
    dtype: Dtype,
    shape: &[u64],
    entries: usize,
    words: impl Iterator<Item = f64>,
) -> Result<(), NpyError> {
    let path = file.destination().to_path_buf();
    if checked_product(shape) != u64::try_from(entries).ok() {
        return Err(NpyError::ShapeMismatch {
            path,
            shape: shape.to_vec(),
            values: entries,
        });
    }
    let header = header_bytes(dtype, shape).map_err(|e| io_error(&path, e))?;
    let mut out = BufWriter::new(file);
    out.write_all(&header).map_err(|e| io_error(&path, e))?;
    for word in words {
        out.write_all(&word.to_le_bytes())
            .map_err(|e| io_error(&path, e))?;
    }
    out.flush().map_err(|e| io_error(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A scratch directory and a file in it.
    fn scratch() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("a.npy");
        (dir, path)
    }

    /// A version-1 file with this header dict text (padded as numpy pads) and `data` bytes.
    fn v1_file(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.to_string();
        while !(10 + header.len() + 1).is_multiple_of(64) {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        let len = u16::try_from(header.len()).expect("short header");
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    fn f64_bytes(values: &[f64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// The message of reading `bytes` as an `.npy` header, which must fail.
    fn refused(bytes: &[u8]) -> NpyError {
        let (_dir, path) = scratch();
        std::fs::write(&path, bytes).expect("write");
        read_header(&path).expect_err("refused")
    }

    fn check_refused(bytes: &[u8], says: &str) {
        let error = refused(bytes);
        assert!(
            matches!(error, NpyError::Malformed { .. }),
            "{error:?} is not Malformed"
        );
        let message = error.to_string();
        assert!(
            message.contains(says) && message.contains("a.npy"),
            "{message:?} lacks {says:?}"
        );
    }

    #[test]
    fn written_arrays_read_back() {
        for shape in [&[0u64][..], &[3], &[2, 3], &[1, 1, 1], &[], &[4, 0, 2]] {
            let (_dir, path) = scratch();
            let count = usize::try_from(checked_product(shape).expect("small")).expect("small");
            let values: Vec<f64> = (0..count).map(|i| i as f64 * 0.5 - 1.0).collect();
            write_f64(&path, shape, &values).expect("write");
            let bytes = std::fs::read(&path).expect("read");
            let header = read_header(&path).expect("header");
            assert_eq!(header.shape, shape);
            assert_eq!(header.dtype, Dtype::Float64);
            assert!(!header.fortran_order);
            assert_eq!(header.data_offset % 64, 0, "{shape:?}");
            assert_eq!(bytes.len() as u64, header.data_offset + 8 * count as u64);
            assert_eq!(read_f64(&path).expect("read"), (shape.to_vec(), values));
        }
    }

    #[test]
    fn written_headers_are_numpys() {
        // numpy.save(np.zeros(3)), numpy.save(np.zeros((2, 3))) and a 0-d array, byte for
        // byte: the dict, 21 - digits(shape[0]) spare spaces, padding to 64 bytes, a newline.
        let check = |dtype, shape: &[u64], dict: &str, total: usize| {
            let bytes = header_bytes(dtype, shape).expect("header");
            assert_eq!(bytes.len(), total, "{dict}");
            assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
            let len = u16::from_le_bytes([bytes[8], bytes[9]]);
            assert_eq!(usize::from(len), total - 10);
            let text = std::str::from_utf8(&bytes[10..]).expect("ascii");
            assert!(text.starts_with(dict), "{text:?}");
            assert!(text.ends_with('\n'), "{text:?}");
            assert!(text[dict.len()..text.len() - 1].bytes().all(|b| b == b' '));
        };
        check(
            Dtype::Float64,
            &[3],
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
            128,
        );
        check(
            Dtype::Float64,
            &[2, 3],
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }",
            128,
        );
        check(
            Dtype::Complex128,
            &[],
            "{'descr': '<c16', 'fortran_order': False, 'shape': (), }",
            128,
        );
    }

    #[test]
    fn headers_numpy_writes_are_read() {
        let (_dir, path) = scratch();
        // Version 1, as numpy.save writes np.array([1.0, 2.0, 3.0]): a header length of 118,
        // the dict, 20 spare spaces and 40 of padding, a newline.
        let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
        let mut v1 = b"\x93NUMPY\x01\x00v\x00".to_vec();
        v1.extend_from_slice(format!("{dict}{}\n", " ".repeat(60)).as_bytes());
        assert_eq!(v1, header_bytes(Dtype::Float64, &[3]).expect("header"));
        assert_eq!(v1.len(), 128);
        let mut bytes = v1.to_vec();
        bytes.extend(f64_bytes(&[1.0, 2.0, 3.0]));
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(read_f64(&path).expect("v1"), (vec![3], vec![1.0, 2.0, 3.0]));

        // Version 2 (a 4-byte length), complex128, a 2-D shape.
        let dict = "{'descr': '<c16', 'fortran_order': False, 'shape': (2, 1), }";
        let mut text = dict.to_string();
        while !(12 + text.len() + 1).is_multiple_of(64) {
            text.push(' ');
        }
        text.push('\n');
        let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
        bytes.extend_from_slice(&u32::try_from(text.len()).expect("short").to_le_bytes());
        bytes.extend_from_slice(text.as_bytes());
        bytes.extend(f64_bytes(&[1.0, -1.0, 2.0, -2.0]));
        std::fs::write(&path, &bytes).expect("write");
        let header = read_header(&path).expect("v2");
        assert_eq!(
            header,
            Header {
                shape: vec![2, 1],
                dtype: Dtype::Complex128,
                fortran_order: false,
                data_offset: 128,
            }
        );
        let error = read_f64(&path).expect_err("complex as float64");
        assert!(
            error
                .to_string()
                .contains("expected dtype float64 ('<f8'), got <c16"),
            "{error}"
        );

        // Fortran order: reported, and refused by read_f64 unless at most one dim exceeds 1.
        let fortran = v1_file(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
            &f64_bytes(&[0.0; 6]),
        );
        std::fs::write(&path, &fortran).expect("write");
        let header = read_header(&path).expect("fortran");
        assert!(header.fortran_order && !header.is_c_order());
        let error = read_f64(&path).expect_err("fortran");
        assert!(
            error
                .to_string()
                .contains("expected C order, got Fortran order"),
            "{error}"
        );
        let vector = v1_file(
            "{'descr': '<f8', 'fortran_order': True, 'shape': (1, 3), }",
            &f64_bytes(&[1.0, 2.0, 3.0]),
        );
        std::fs::write(&path, &vector).expect("write");
        assert_eq!(
            read_f64(&path).expect("1 x 3"),
            (vec![1, 3], vec![1.0, 2.0, 3.0])
        );

        // Keys in another order, double quotes, a list for the shape, no trailing comma.
        let relaxed = v1_file(
            "{\"shape\": [2], \"fortran_order\": False, \"descr\": \"<f8\"}",
            &f64_bytes(&[5.0, 6.0]),
        );
        std::fs::write(&path, &relaxed).expect("write");
        assert_eq!(read_f64(&path).expect("relaxed"), (vec![2], vec![5.0, 6.0]));
    }

    #[test]
    fn malformed_files_are_refused() {
        let good = |dict: &str| v1_file(dict, &[0u8; 64]);
        check_refused(b"\x93NUMPX\x01\x00\x10\x00", "magic string");
        check_refused(b"hello", "magic string");
        check_refused(b"\x93NUMPY\x01", "truncated");
        check_refused(b"\x93NUMPY\x04\x00\x10\x00{}", "format version 4.0");
        check_refused(b"\x93NUMPY\x01\x01\x10\x00{}", "format version 1.1");
        // A header claiming 4 GiB in a short file.
        let mut long = b"\x93NUMPY\x02\x00".to_vec();
        long.extend_from_slice(&u32::MAX.to_le_bytes());
        long.extend_from_slice(b"{}  ");
        check_refused(
            &long,
            "truncated: 16 bytes, shorter than its 4294967307-byte header",
        );
        // A header longer than any float64 header, but inside the file.
        let mut wordy = b"\x93NUMPY\x02\x00".to_vec();
        wordy.extend_from_slice(&20_000u32.to_le_bytes());
        wordy.extend(std::iter::repeat_n(b' ', 20_000));
        check_refused(&wordy, "a header of 20000 bytes");
        // Data shorter than the shape needs: 2 of 3 entries.
        let short = v1_file(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
            &f64_bytes(&[1.0, 2.0]),
        );
        check_refused(&short, "truncated: 144 bytes, expected 152 for shape [3]");
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'shape': (2,), }"),
            "the key 'shape' appears twice",
        );
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }"),
            "negative",
        );
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
            "64 bits",
        );
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1, }"),
            "the key 'x'",
        );
        check_refused(
            &good("{'descr': '<f8', 'shape': (2,), }"),
            "no 'fortran_order'",
        );
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': 1, 'shape': (2,), }"),
            "fortran_order",
        );
        check_refused(
            &good("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), } x"),
            "text after",
        );
        check_refused(
            &good("{'descr': '<f\\x38', 'fortran_order': False, 'shape': (2,), }"),
            "escaped",
        );
        for (descr, got) in [("<f4", "got <f4"), (">f8", "got >f8"), ("<i8", "got <i8")] {
            check_refused(
                &good(&format!(
                    "{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}"
                )),
                &format!("expected dtype float64 ('<f8') or complex128 ('<c16'), {got}"),
            );
        }
        check_refused(
            &good("{'descr': [('x', '<f8', (3,))], 'fortran_order': False, 'shape': (2,), }"),
            "got a structured",
        );
        // Nesting 100 deep, in a value and in the shape (braces too).
        for nested in [
            format!(
                "{{'descr': {}'<f8', 'fortran_order': False, 'shape': (2,), }}",
                "[".repeat(100)
            ),
            format!(
                "{{'descr': '<f8', 'fortran_order': False, 'shape': (8, {}3{}), }}",
                "{".repeat(100),
                "}".repeat(100)
            ),
        ] {
            check_refused(&good(&nested), "nests brackets more than 4 deep");
        }
    }

    #[test]
    fn shapes_whose_bytes_overflow_are_too_large() {
        for shape in [
            "(4294967296, 4294967296, 2)",
            "(6148914691236517206, 3)",
            "(2305843009213693952,)",
        ] {
            let error = refused(&v1_file(
                &format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}"),
                &[0u8; 16],
            ));
            assert!(matches!(error, NpyError::TooLarge { .. }), "{error:?}");
            assert!(error.to_string().contains("overflows"), "{error}");
        }
        // The bytes fit, the file does not hold them.
        let error = refused(&v1_file(
            "{'descr': '<c16', 'fortran_order': False, 'shape': (1, 2, 1099511627776), }",
            &[0u8; 16],
        ));
        assert!(error.to_string().contains("truncated"), "{error}");
        assert!(
            error.to_string().contains("expected 35184372088960 "),
            "{error}"
        );
    }

    #[test]
    fn writing_checks_the_shape_and_leaves_nothing_on_error() {
        let (dir, path) = scratch();
        let error = write_f64(&path, &[2, 2], &[1.0; 3]).expect_err("mismatch");
        assert!(matches!(error, NpyError::ShapeMismatch { .. }), "{error:?}");
        assert!(
            error.to_string().contains("holds 4 entries, but 3"),
            "{error}"
        );
        let error = write_f64(&path, &[u64::MAX, 2], &[]).expect_err("overflow");
        assert!(error.to_string().contains("overflows"), "{error}");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
        let error = write_f64(dir.path().join("missing/a.npy"), &[1], &[1.0]).expect_err("no dir");
        assert!(matches!(error, NpyError::Io { .. }), "{error:?}");
        assert!(error.to_string().contains("missing/a.npy"), "{error}");
        let error = read_f64(dir.path().join("none.npy")).expect_err("no file");
        assert!(matches!(error, NpyError::Io { .. }), "{error:?}");
        assert!(error.to_string().contains("none.npy"), "{error}");
    }

    /// The bits of each part, so that `-0.0` and `0.0` differ.
    fn bits(values: &[[f64; 2]]) -> Vec<[u64; 2]> {
        values
            .iter()
            .map(|[re, im]| [re.to_bits(), im.to_bits()])
            .collect()
    }

    #[test]
    fn complex_arrays_read_back_bit_for_bit() {
        let values = [
            [1.0, -2.5],
            [-0.0, 0.0],
            [0.0, -0.0],
            [std::f64::consts::PI, 1e-300],
            [-7.25e12, std::f64::consts::E],
            [f64::MIN_POSITIVE, -f64::MAX],
        ];
        for shape in [&[6u64][..], &[3, 2], &[2, 1, 3]] {
            let (_dir, path) = scratch();
            write_c128(&path, shape, &values).expect("write");
            let header = read_header(&path).expect("header");
            assert_eq!(header.shape, shape);
            assert_eq!(header.dtype, Dtype::Complex128);
            assert_eq!(header.data_offset, 128, "{shape:?}");
            // The data: each entry's real part, then its imaginary part, little endian.
            let bytes = std::fs::read(&path).expect("read");
            let parts: Vec<f64> = values.iter().flatten().copied().collect();
            assert_eq!(bytes[128..], f64_bytes(&parts)[..]);
            let (read_shape, read) = read_c128(&path).expect("read");
            assert_eq!(read_shape, shape);
            assert_eq!(bits(&read), bits(&values));
        }
        // Empty and 0-d arrays.
        let (_dir, path) = scratch();
        write_c128(&path, &[0, 4], &[]).expect("write");
        assert_eq!(read_c128(&path).expect("empty"), (vec![0, 4], vec![]));
        write_c128(&path, &[], &[[3.0, -4.0]]).expect("write");
        assert_eq!(read_c128(&path).expect("0-d"), (vec![], vec![[3.0, -4.0]]));
    }

    #[test]
    fn float64_files_read_as_complex_are_promoted() {
        let (_dir, path) = scratch();
        write_f64(&path, &[2, 2], &[1.5, -0.0, 0.0, -3.0]).expect("write");
        let (shape, values) = read_c128(&path).expect("promoted");
        assert_eq!(shape, [2, 2]);
        assert_eq!(
            bits(&values),
            bits(&[[1.5, 0.0], [-0.0, 0.0], [0.0, 0.0], [-3.0, 0.0]])
        );
        // The other way round is refused: a complex file is not read as float64.
        write_c128(&path, &[1], &[[1.0, 2.0]]).expect("write");
        let error = read_f64(&path).expect_err("complex as float64");
        assert!(error.to_string().contains("got <c16"), "{error}");
    }

    #[test]
    fn complex_reads_refuse_other_dtypes_orders_and_short_data() {
        let check = |bytes: &[u8], says: &str| {
            let (_dir, path) = scratch();
            std::fs::write(&path, bytes).expect("write");
            let error = read_c128(&path).expect_err("refused");
            assert!(
                matches!(error, NpyError::Malformed { .. }),
                "{error:?} is not Malformed"
            );
            let message = error.to_string();
            assert!(
                message.contains(says) && message.contains("a.npy"),
                "{message:?} lacks {says:?}"
            );
        };
        for descr in ["<f4", "<c8", ">c16", "<i8"] {
            check(
                &v1_file(
                    &format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}"),
                    &[0u8; 64],
                ),
                &format!("expected dtype complex128 ('<c16') or float64 ('<f8'), got {descr}"),
            );
        }
        check(
            &v1_file(
                "{'descr': '<c16', 'fortran_order': True, 'shape': (2, 2), }",
                &[0u8; 64],
            ),
            "expected C order, got Fortran order",
        );
        // 3 entries claimed, 2.5 given: the last imaginary part is missing.
        check(
            &v1_file(
                "{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }",
                &f64_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0]),
            ),
            "truncated: 168 bytes, expected 176 for shape [3]",
        );
        check(b"\x93NUMPY\x01", "truncated");

        let (dir, path) = scratch();
        let error = write_c128(&path, &[2, 2], &[[1.0, 0.0]; 3]).expect_err("mismatch");
        assert!(matches!(error, NpyError::ShapeMismatch { .. }), "{error:?}");
        assert!(
            error.to_string().contains("holds 4 entries, but 3"),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }

    /// Header dict text built from the tokens a header is made of, in any order.
    fn token_soup() -> impl Strategy<Value = String> {
        let token = prop::sample::select(vec![
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            ",",
            ":",
            " ",
            "'descr'",
            "'shape'",
            "'fortran_order'",
            "'<f8'",
            "'<c16'",
            "True",
            "False",
            "0",
            "1",
            "3",
            "-1",
            "18446744073709551615",
            "18446744073709551616",
            "'",
            "\"",
            "\\",
            "x",
            "\n",
        ]);
        prop::collection::vec(token, 0..40).prop_map(|tokens| tokens.concat())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_after_a_valid_prefix_never_panic(
            version in 1u8..=3,
            length_field in prop::collection::vec(any::<u8>(), 4),
            rest in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let (_dir, path) = scratch();
            let mut bytes = b"\x93NUMPY".to_vec();
            bytes.extend_from_slice(&[version, 0]);
            let field = if version == 1 { &length_field[..2] } else { &length_field[..] };
            bytes.extend_from_slice(field);
            bytes.extend_from_slice(&rest);
            std::fs::write(&path, &bytes).expect("write");
            let _ = read_header(&path);
            let _ = read_f64(&path);
            let _ = read_c128(&path);
        }

        #[test]
        fn arbitrary_dicts_never_panic(dict in token_soup(), data in 0usize..64) {
            let (_dir, path) = scratch();
            std::fs::write(&path, v1_file(&dict, &vec![0u8; data])).expect("write");
            if let Ok(header) = read_header(&path) {
                let end = header.data_len().and_then(|n| n.checked_add(header.data_offset));
                prop_assert!(end.is_some_and(|end| end <= std::fs::metadata(&path).expect("meta").len()));
            }
            if let Ok((shape, values)) = read_f64(&path) {
                prop_assert_eq!(checked_product(&shape), Some(values.len() as u64));
            }
            if let Ok((shape, values)) = read_c128(&path) {
                prop_assert_eq!(checked_product(&shape), Some(values.len() as u64));
            }
        }
    }
}
