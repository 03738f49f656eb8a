//! Matrix Market exchange files (`.mtx`), coordinate format: the sparse matrices of the
//! SuiteSparse collection and of most other solvers.
//!
//! [`read()`] takes `real`, `integer` and `pattern` fields, `general`, `symmetric` and
//! `skew-symmetric` matrices (the stored lower triangle mirrored), and errors with the file
//! and the 1-based line for anything it does not take, a `complex` file included.
//! [`read_complex()`] takes those and `complex` files (`general`, `symmetric`,
//! `skew-symmetric` and `hermitian`, whose lower triangle is mirrored conjugated) into a
//! `CsrMatrix<c64>`, real ones promoted (imaginary parts zero). [`write()`] writes
//! `coordinate real general` or `coordinate complex general` with every number in the
//! shortest form that reads back to the same bits.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use faer::c64;

use crate::{CsrMatrix, Scalar, SparseError};

/// The longest line read, in bytes (end of line excluded): a file without line breaks is
/// refused rather than read whole into one line.
const MAX_LINE_BYTES: u64 = 1 << 20;

/// At most this many entries are reserved up front, whatever the size line announces;
/// beyond it the entries grow as they are read.
const MAX_RESERVED_ENTRIES: usize = 1 << 16;

/// The header this module reads, for error messages.
const HEADER: &str = "%%MatrixMarket matrix coordinate <field> <symmetry>";

/// Reads the coordinate Matrix Market file at `path`; see [`read_from`].
///
/// Errors: [`SparseError::Io`] when the file cannot be opened or read, and those of
/// [`read_from`].
pub fn read(path: impl AsRef<Path>) -> Result<CsrMatrix, SparseError> {
    let path = path.as_ref();
    read_from(BufReader::new(open(path)?), path)
}

/// Reads the coordinate Matrix Market file at `path` into a complex matrix; see
/// [`read_complex_from`].
///
/// Errors: [`SparseError::Io`] when the file cannot be opened or read, and those of
/// [`read_complex_from`].
pub fn read_complex(path: impl AsRef<Path>) -> Result<CsrMatrix<c64>, SparseError> {
    let path = path.as_ref();
    read_complex_from(BufReader::new(open(path)?), path)
}

/// The file at `path`, opened for reading.
fn open(path: &Path) -> Result<File, SparseError> {
    File::open(path).map_err(|source| SparseError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a coordinate Matrix Market matrix from `reader` into a complex matrix; `name` is
/// the file named in errors.
///
/// Everything [`read_from`] reads, real values promoted to complex ones with a zero
/// imaginary part, and the field `complex`: entry lines `row col re im`, with symmetry
/// `general`, `symmetric` (`a_ji = a_ij`), `skew-symmetric` (`a_ji = -a_ij`) or `hermitian`
/// (`a_ji = conj(a_ij)`, a diagonal entry's imaginary part zero).
///
/// Errors: those of [`read_from`] (but for the field `complex` and the symmetry
/// `hermitian`); a `hermitian` file whose field is not complex, or with a diagonal entry
/// whose imaginary part is not zero.
pub fn read_complex_from(reader: impl BufRead, name: &Path) -> Result<CsrMatrix<c64>, SparseError> {
    read_values(reader, name)
}

/// Reads a coordinate Matrix Market matrix from `reader`; `name` is the file named in
/// errors.
///
/// The first line is the header `%%MatrixMarket matrix coordinate <field> <symmetry>`
/// (case-insensitive), with field `real`, `integer` or `pattern` (every stored entry 1.0) and
/// symmetry `general`, `symmetric` or `skew-symmetric`. Then, skipping comment lines (`%`
/// first) and blank lines anywhere, the size line `rows cols entries` and exactly `entries`
/// lines `row col value` (`row col` for a pattern), 1-based. A symmetric or skew-symmetric
/// file stores the lower triangle: an entry `a_ij`, `i > j`, also sets `a_ji = a_ij`
/// (symmetric) or `a_ji = -a_ij` (skew-symmetric, whose diagonal is zero and not stored).
/// Duplicate entries are summed. Real values may use a Fortran exponent (`1.5D+02`); integer values must fit in 64
/// bits and are rounded to the nearest `f64` beyond 2^53.
///
/// Errors: [`SparseError::MatrixMarket`] with `name` and the line for every malformed input:
/// a missing or unsupported header (`complex` and `hermitian` matrices, which
/// [`read_complex_from`] reads, and the `array` format are not read), a missing or
/// malformed size line, a non-square symmetric matrix, an
/// entry with the wrong number of words, an index that is 0 or beyond the size, a value that
/// is not a number or not finite, an entry above the diagonal of a symmetric file or on the
/// diagonal of a skew-symmetric one, fewer or more entries than announced (fewer: the line
/// where the file ends), a line longer than 1 MiB or not UTF-8. [`SparseError::TooLarge`]
/// when the announced rows cannot be held in memory, [`SparseError::Io`] when `reader`
/// fails.
pub fn read_from(reader: impl BufRead, name: &Path) -> Result<CsrMatrix, SparseError> {
    read_values(reader, name)
}

/// Reads a matrix of `T`s: complex fields only when `T` is complex.
fn read_values<T: Scalar>(reader: impl BufRead, name: &Path) -> Result<CsrMatrix<T>, SparseError> {
    let mut lines = Lines::new(reader, name);
    let (field, symmetry) = read_header::<T, _>(&mut lines)?;
    let size = read_size(&mut lines, symmetry)?;
    let mirrored = symmetry != Symmetry::General;
    let reserved = size.entries.min(MAX_RESERVED_ENTRIES);
    let mut triplets: Vec<(usize, usize, T)> =
        Vec::with_capacity(if mirrored { 2 * reserved } else { reserved });
    let mut read = 0usize;
    while let Some(line) = lines.next_data_line()? {
        if read == size.entries {
            return Err(lines.error(
                line,
                format!(
                    "more entries than the {} announced by the size line",
                    size.entries
                ),
            ));
        }
        let (i, j, re, im) =
            parse_entry(lines.text(), field, &size).map_err(|detail| lines.error(line, detail))?;
        let value = T::from_parts(re, im).ok_or_else(|| {
            lines.error(line, "a complex value cannot be read into a real matrix")
        })?;
        let entry = (i, j, value);
        match symmetry {
            Symmetry::General => triplets.push(entry),
            Symmetry::Symmetric | Symmetry::SkewSymmetric | Symmetry::Hermitian if i < j => {
                return Err(lines.error(
                    line,
                    format!(
                        "entry ({}, {}) is above the diagonal: a {} file stores only the lower \
                         triangle",
                        i + 1,
                        j + 1,
                        symmetry.name()
                    ),
                ));
            }
            Symmetry::Symmetric => {
                triplets.push(entry);
                if i != j {
                    triplets.push((j, i, value));
                }
            }
            Symmetry::SkewSymmetric if i == j => {
                return Err(lines.error(
                    line,
                    format!(
                        "entry ({}, {}) is on the diagonal, which is zero (and not stored) in a \
                         skew-symmetric matrix",
                        i + 1,
                        j + 1
                    ),
                ));
            }
            Symmetry::SkewSymmetric => {
                triplets.push(entry);
                triplets.push((j, i, -value));
            }
            Symmetry::Hermitian if i == j && im != 0.0 => {
                return Err(lines.error(
                    line,
                    format!(
                        "entry ({}, {}) is on the diagonal of a hermitian matrix, which is real, \
                         but its imaginary part is {im}",
                        i + 1,
                        j + 1
                    ),
                ));
            }
            Symmetry::Hermitian => {
                triplets.push(entry);
                if i != j {
                    triplets.push((j, i, value.conjugate()));
                }
            }
        }
        read += 1;
    }
    if read < size.entries {
        return Err(lines.error(
            lines.end_line(),
            format!(
                "the file ends after {read} of the {} entries announced by the size line",
                size.entries
            ),
        ));
    }
    assemble(size.rows, size.cols, triplets)
}

/// Writes `a` to the file at `path` (created or truncated) in Matrix Market coordinate
/// format; see [`write_to`].
///
/// The file appears complete or not at all: it is written beside its destination under a
/// temporary name, flushed and renamed into place (`tutti_plan::files::AtomicFile`).
///
/// Errors: [`SparseError::Io`] when the file cannot be created or written.
pub fn write<T: Scalar>(path: impl AsRef<Path>, a: &CsrMatrix<T>) -> Result<(), SparseError> {
    let path = path.as_ref();
    let io_error = |source| SparseError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = tutti_plan::files::AtomicFile::create(path).map_err(io_error)?;
    write_to(file.as_file(), a).map_err(io_error)?;
    file.commit().map_err(io_error)
}

/// Writes `a` to `writer` (buffered here) as `%%MatrixMarket matrix coordinate real
/// general` (`complex general` for a complex matrix): the header, a comment naming
/// tutti-sparse, the size line `rows cols nnz` and one line `row col value` (`row col re
/// im`) per stored entry (1-based, row by row, explicit zeros included), each number in the
/// shortest decimal form that reads back to the same bits.
///
/// Errors: those of `writer`.
pub fn write_to<T: Scalar>(writer: impl Write, a: &CsrMatrix<T>) -> std::io::Result<()> {
    let mut out = BufWriter::new(writer);
    writeln!(out, "%%MatrixMarket matrix coordinate {} general", T::FIELD)?;
    writeln!(
        out,
        "% written by tutti-sparse {}",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "{} {} {}", a.rows(), a.cols(), a.nnz())?;
    for i in 0..a.rows() {
        let (cols, values) = a.row(i);
        for (&j, &value) in cols.iter().zip(values) {
            // `{:e}` prints the shortest digits that round-trip (-0.0 as `-0e0`).
            let (re, im) = value.parts();
            if T::PACKED == 1 {
                writeln!(out, "{} {} {re:e}", i + 1, j + 1)?;
            } else {
                writeln!(out, "{} {} {re:e} {im:e}", i + 1, j + 1)?;
            }
        }
    }
    out.flush()
}

/// What an entry's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
    Complex,
}

/// Which entries a file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
    Hermitian,
}

impl Symmetry {
    fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::SkewSymmetric => "skew-symmetric",
            Symmetry::Hermitian => "hermitian",
        }
    }
}

/// The size line.
struct Size {
    rows: usize,
    cols: usize,
    entries: usize,
}

/// The lines of a file, numbered from 1, without their line ends.
struct Lines<'a, R> {
    reader: R,
    name: &'a Path,
    /// The last line read.
    text: String,
    /// The number of the last line read (0 before the first).
    number: usize,
    /// Whether the last line read ended with a line break (or none was read).
    ended_with_break: bool,
}

impl<'a, R: BufRead> Lines<'a, R> {
    fn new(reader: R, name: &'a Path) -> Self {
        Self {
            reader,
            name,
            text: String::new(),
            number: 0,
            ended_with_break: true,
        }
    }

    /// A [`SparseError::MatrixMarket`] at `line`.
    fn error(&self, line: usize, detail: impl Into<String>) -> SparseError {
        SparseError::MatrixMarket {
            path: self.name.to_path_buf(),
            line,
            detail: detail.into(),
        }
    }

    /// The line where the file ends: the one after the last line break.
    fn end_line(&self) -> usize {
        if self.ended_with_break {
            self.number.saturating_add(1)
        } else {
            self.number
        }
    }

    /// The last line read, without its line end.
    fn text(&self) -> &str {
        &self.text
    }

    /// Reads the next line: its number, or `None` at the end of the file.
    fn next_line(&mut self) -> Result<Option<usize>, SparseError> {
        let mut bytes = std::mem::take(&mut self.text).into_bytes();
        bytes.clear();
        // One byte over the limit, and one for the line break, tells a long line apart.
        let read = (&mut self.reader)
            .take(MAX_LINE_BYTES + 2)
            .read_until(b'\n', &mut bytes)
            .map_err(|source| SparseError::Io {
                path: self.name.to_path_buf(),
                source,
            })?;
        if read == 0 {
            return Ok(None);
        }
        self.number = self.number.saturating_add(1);
        self.ended_with_break = bytes.last() == Some(&b'\n');
        if self.ended_with_break {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        if bytes.len() as u64 > MAX_LINE_BYTES {
            return Err(self.error(
                self.number,
                format!("the line is longer than {MAX_LINE_BYTES} bytes"),
            ));
        }
        match String::from_utf8(bytes) {
            Ok(text) => {
                self.text = text;
                Ok(Some(self.number))
            }
            Err(_) => Err(self.error(self.number, "the line is not valid UTF-8")),
        }
    }

    /// Reads the next line that is neither a comment (`%` first) nor blank: its number, or
    /// `None` at the end of the file.
    fn next_data_line(&mut self) -> Result<Option<usize>, SparseError> {
        while let Some(line) = self.next_line()? {
            let text = self.text.trim_start();
            if !text.is_empty() && !text.starts_with('%') {
                return Ok(Some(line));
            }
        }
        Ok(None)
    }
}

/// Reads the header line: the field and symmetry, for a matrix of `T`s.
fn read_header<T: Scalar, R: BufRead>(
    lines: &mut Lines<'_, R>,
) -> Result<(Field, Symmetry), SparseError> {
    let Some(line) = lines.next_line()? else {
        return Err(lines.error(
            lines.end_line(),
            format!("the file is empty: expected the header `{HEADER}`"),
        ));
    };
    parse_header(lines.text(), T::PACKED == 2).map_err(|detail| lines.error(line, detail))
}

/// The field and symmetry of a header line, or what is wrong with it; `complex` fields and
/// `hermitian` symmetry only when reading into a complex matrix (`complex`).
fn parse_header(text: &str, complex: bool) -> Result<(Field, Symmetry), String> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let is = |word: &str, expected: &str| word.eq_ignore_ascii_case(expected);
    let [banner, object, format, field, symmetry] = words[..] else {
        return Err(format!(
            "expected the header `{HEADER}`, found `{}`",
            excerpt(text)
        ));
    };
    if !is(banner, "%%MatrixMarket") {
        return Err(format!(
            "expected the header `{HEADER}`, found `{}`",
            excerpt(text)
        ));
    }
    if !is(object, "matrix") {
        return Err(format!(
            "the object `{}` is not supported: only `matrix` is read",
            excerpt(object)
        ));
    }
    if is(format, "array") {
        return Err(
            "the dense `array` format is not supported: only `coordinate` (sparse) is read".into(),
        );
    }
    if !is(format, "coordinate") {
        return Err(format!(
            "unknown format `{}`: only `coordinate` is read",
            excerpt(format)
        ));
    }
    let field = if is(field, "real") {
        Field::Real
    } else if is(field, "integer") {
        Field::Integer
    } else if is(field, "pattern") {
        Field::Pattern
    } else if is(field, "complex") && complex {
        Field::Complex
    } else if is(field, "complex") {
        return Err(
            "the field `complex` is not read into a real matrix (supported fields are \
                    real, integer and pattern): read the file with \
                    `matrix_market::read_complex`"
                .into(),
        );
    } else {
        let supported = if complex {
            "real, integer, pattern and complex"
        } else {
            "real, integer and pattern"
        };
        return Err(format!(
            "the field `{}` is not supported: supported fields are {supported}",
            excerpt(field)
        ));
    };
    let symmetry = if is(symmetry, "general") {
        Symmetry::General
    } else if is(symmetry, "symmetric") {
        Symmetry::Symmetric
    } else if is(symmetry, "skew-symmetric") {
        Symmetry::SkewSymmetric
    } else if is(symmetry, "hermitian") && field == Field::Complex {
        Symmetry::Hermitian
    } else if is(symmetry, "hermitian") && complex {
        return Err("the symmetry `hermitian` needs the field `complex`".into());
    } else {
        let supported = if complex {
            "general, symmetric, skew-symmetric and hermitian"
        } else {
            "general, symmetric and skew-symmetric"
        };
        return Err(format!(
            "the symmetry `{}` is not supported: supported symmetries are {supported}",
            excerpt(symmetry)
        ));
    };
    if field == Field::Pattern && symmetry == Symmetry::SkewSymmetric {
        return Err("a pattern matrix cannot be skew-symmetric (the format excludes it)".into());
    }
    Ok((field, symmetry))
}

/// Reads the size line `rows cols entries`.
fn read_size<R: BufRead>(
    lines: &mut Lines<'_, R>,
    symmetry: Symmetry,
) -> Result<Size, SparseError> {
    let Some(line) = lines.next_data_line()? else {
        return Err(lines.error(
            lines.end_line(),
            "the file ends before the size line `rows cols entries`",
        ));
    };
    let text = lines.text();
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let numbers: Option<Vec<usize>> = match words[..] {
        [_, _, _] => words.iter().map(|word| word.parse().ok()).collect(),
        _ => None,
    };
    let Some(&[rows, cols, entries]) = numbers.as_deref() else {
        return Err(lines.error(
            line,
            format!(
                "expected the size line `rows cols entries` (three non-negative integers), \
                 found `{}`",
                excerpt(text)
            ),
        ));
    };
    if symmetry != Symmetry::General && rows != cols {
        return Err(lines.error(
            line,
            format!(
                "a {} matrix is square, but the size line says {rows} x {cols}",
                symmetry.name()
            ),
        ));
    }
    if rows.checked_add(1).is_none() || cols.checked_add(1).is_none() {
        return Err(SparseError::TooLarge {
            what: "the matrix",
            detail: format!("{rows} x {cols}"),
        });
    }
    Ok(Size {
        rows,
        cols,
        entries,
    })
}

/// The 0-based `(row, col, re, im)` of an entry line (`im` zero but for a complex field),
/// or what is wrong with it.
fn parse_entry(text: &str, field: Field, size: &Size) -> Result<(usize, usize, f64, f64), String> {
    // Up to five words without allocating: entry lines are most of a file.
    let mut words = [""; 5];
    let mut count = 0usize;
    for word in text.split_ascii_whitespace() {
        if let Some(slot) = words.get_mut(count) {
            *slot = word;
        }
        count += 1;
    }
    let (row, col, value) = match (field, count) {
        (Field::Pattern, 2) => (words[0], words[1], None),
        (Field::Real | Field::Integer, 3) => (words[0], words[1], Some(words[2])),
        (Field::Complex, 4) => (words[0], words[1], Some(words[2])),
        _ => {
            let expected = match field {
                Field::Pattern => "`row col`",
                Field::Complex => "`row col re im`",
                Field::Real | Field::Integer => "`row col value`",
            };
            return Err(format!(
                "expected an entry {expected}, found {count} words in `{}`",
                excerpt(text)
            ));
        }
    };
    let i = parse_index(row, "row", size.rows)?;
    let j = parse_index(col, "column", size.cols)?;
    let value = match (field, value) {
        (Field::Integer, Some(word)) => word.parse::<i64>().map(|v| v as f64).map_err(|_| {
            format!(
                "the value `{}` is not an integer (the field is integer)",
                excerpt(word)
            )
        })?,
        (_, Some(word)) => parse_real(word)?,
        (_, None) => 1.0,
    };
    let im = if field == Field::Complex {
        parse_real(words[3])?
    } else {
        0.0
    };
    Ok((i, j, value, im))
}

/// A 1-based index `<= bound` as a 0-based one, or what is wrong with it.
fn parse_index(word: &str, what: &str, bound: usize) -> Result<usize, String> {
    match word.parse::<usize>() {
        Err(_) => Err(format!(
            "the {what} index `{}` is not a positive integer",
            excerpt(word)
        )),
        Ok(0) => Err(format!("the {what} index is 0: indices start at 1")),
        Ok(index) if index > bound => Err(format!(
            "the {what} index {index} is out of range: the matrix has {bound} {what}s"
        )),
        Ok(index) => Ok(index - 1),
    }
}

/// A finite real, in Rust's or Fortran's (`1.5D+02`) notation.
fn parse_real(word: &str) -> Result<f64, String> {
    let value = word
        .parse::<f64>()
        .or_else(|_| word.replace(['D', 'd'], "e").parse::<f64>())
        .map_err(|_| format!("the value `{}` is not a number", excerpt(word)))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!(
            "the value `{}` is not finite: every entry must be finite",
            excerpt(word)
        ))
    }
}

/// `text` cut to 60 characters for an error message.
fn excerpt(text: &str) -> String {
    const MAX_CHARS: usize = 60;
    match text.char_indices().nth(MAX_CHARS) {
        None => text.to_string(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

/// The matrix of `triplets` (0-based, in range), duplicates summed; the row pointers are
/// allocated fallibly, as `rows` comes from the file.
fn assemble<T: Scalar>(
    rows: usize,
    cols: usize,
    triplets: Vec<(usize, usize, T)>,
) -> Result<CsrMatrix<T>, SparseError> {
    let too_large = || SparseError::TooLarge {
        what: "the matrix's row pointers",
        detail: format!("{rows} rows"),
    };
    let pointers = rows.checked_add(1).ok_or_else(too_large)?;
    let mut indptr: Vec<usize> = Vec::new();
    indptr
        .try_reserve_exact(pointers)
        .map_err(|_| too_large())?;
    indptr.resize(pointers, 0);
    for &(i, _, _) in &triplets {
        indptr[i + 1] += 1;
    }
    for i in 0..rows {
        indptr[i + 1] += indptr[i];
    }
    // Counting sort by row: `indptr[i]` walks through row i, ending where row i + 1 starts;
    // shifting by one afterwards restores the starts.
    let mut indices = vec![0; triplets.len()];
    let mut values = vec![T::ZERO; triplets.len()];
    for (i, j, value) in triplets {
        indices[indptr[i]] = j;
        values[indptr[i]] = value;
        indptr[i] += 1;
    }
    indptr.copy_within(0..rows, 1);
    indptr[0] = 0;
    CsrMatrix::try_new(rows, cols, indptr, indices, values)
}
