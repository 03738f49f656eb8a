//! Matrix Market exchange files (`.mtx`), coordinate format: the sparse matrices of the
//! SuiteSparse collection and of most other solvers.
//!
//! [`read()`] takes `real`, `integer` and `pattern` fields, `general`, `symmetric` and
//! `skew-symmetric` matrices (the stored lower triangle mirrored), and errors with the file
//! and the 1-based line for anything it does not take. [`write()`] writes `coordinate real
//! general` with every value in the shortest form that reads back to the same bits.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use crate::{CsrMatrix, SparseError};

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
    let file = File::open(path).map_err(|source| SparseError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    read_from(BufReader::new(file), path)
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
/// a missing or unsupported header (`complex` and `hermitian` matrices and the `array`
/// format are not read), a missing or malformed size line, a non-square symmetric matrix, an
/// entry with the wrong number of words, an index that is 0 or beyond the size, a value that
/// is not a number or not finite, an entry above the diagonal of a symmetric file or on the
/// diagonal of a skew-symmetric one, fewer or more entries than announced (fewer: the line
/// where the file ends), a line longer than 1 MiB or not UTF-8. [`SparseError::TooLarge`]
/// when the announced rows cannot be held in memory, [`SparseError::Io`] when `reader`
/// fails.
pub fn read_from(reader: impl BufRead, name: &Path) -> Result<CsrMatrix, SparseError> {
    let mut lines = Lines::new(reader, name);
    let (field, symmetry) = read_header(&mut lines)?;
    let size = read_size(&mut lines, symmetry)?;
    let mirrored = symmetry != Symmetry::General;
    let reserved = size.entries.min(MAX_RESERVED_ENTRIES);
    let mut triplets: Vec<(usize, usize, f64)> =
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
        let entry =
            parse_entry(lines.text(), field, &size).map_err(|detail| lines.error(line, detail))?;
        let (i, j, value) = entry;
        match symmetry {
            Symmetry::General => triplets.push(entry),
            Symmetry::Symmetric | Symmetry::SkewSymmetric if i < j => {
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
pub fn write(path: impl AsRef<Path>, a: &CsrMatrix) -> Result<(), SparseError> {
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
/// general`: the header, a comment naming tutti-sparse, the size line `rows cols nnz` and
/// one line `row col value` per stored entry (1-based, row by row, explicit zeros included),
/// each value in the shortest decimal form that reads back to the same bits.
///
/// Errors: those of `writer`.
pub fn write_to(writer: impl Write, a: &CsrMatrix) -> std::io::Result<()> {
    let mut out = BufWriter::new(writer);
    writeln!(out, "%%MatrixMarket matrix coordinate real general")?;
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
            writeln!(out, "{} {} {value:e}", i + 1, j + 1)?;
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
}

/// Which entries a file stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
}

impl Symmetry {
    fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::SkewSymmetric => "skew-symmetric",
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

/// Reads the header line: the field and symmetry.
fn read_header<R: BufRead>(lines: &mut Lines<'_, R>) -> Result<(Field, Symmetry), SparseError> {
    let Some(line) = lines.next_line()? else {
        return Err(lines.error(
            lines.end_line(),
            format!("the file is empty: expected the header `{HEADER}`"),
        ));
    };
    parse_header(lines.text()).map_err(|detail| lines.error(line, detail))
}

/// The field and symmetry of a header line, or what is wrong with it.
fn parse_header(text: &str) -> Result<(Field, Symmetry), String> {
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
    } else {
        return Err(format!(
            "the field `{}` is not supported: supported fields are real, integer and pattern",
            excerpt(field)
        ));
    };
    let symmetry = if is(symmetry, "general") {
        Symmetry::General
    } else if is(symmetry, "symmetric") {
        Symmetry::Symmetric
    } else if is(symmetry, "skew-symmetric") {
        Symmetry::SkewSymmetric
    } else {
        return Err(format!(
            "the symmetry `{}` is not supported: supported symmetries are general, symmetric \
             and skew-symmetric",
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

/// The 0-based `(row, col, value)` of an entry line, or what is wrong with it.
fn parse_entry(text: &str, field: Field, size: &Size) -> Result<(usize, usize, f64), String> {
    // Up to four words without allocating: entry lines are most of a file.
    let mut words = [""; 4];
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
        _ => {
            let expected = if field == Field::Pattern {
                "`row col`"
            } else {
                "`row col value`"
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
    Ok((i, j, value))
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
fn assemble(
    rows: usize,
    cols: usize,
    triplets: Vec<(usize, usize, f64)>,
) -> Result<CsrMatrix, SparseError> {
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
    let mut values = vec![0.0; triplets.len()];
    for (i, j, value) in triplets {
        indices[indptr[i]] = j;
        values[indptr[i]] = value;
        indptr[i] += 1;
    }
    indptr.copy_within(0..rows, 1);
    indptr[0] = 0;
    CsrMatrix::try_new(rows, cols, indptr, indices, values)
}
