//! Matrix Market files: bitwise round trips, the symmetric and skew-symmetric expansions,
//! the fields, and an error with the right line for every malformed input.

use std::error::Error;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tutti_sparse::{matrix_market, CsrMatrix, SparseError};

type TestResult = Result<(), Box<dyn Error>>;

/// Reads `text` as a file named `test.mtx`.
fn parse(text: &str) -> Result<CsrMatrix, SparseError> {
    matrix_market::read_from(text.as_bytes(), Path::new("test.mtx"))
}

/// The dense rows of `a`.
fn dense(a: &CsrMatrix) -> Vec<Vec<f64>> {
    let mut rows = vec![vec![0.0; a.cols()]; a.rows()];
    for (i, row) in rows.iter_mut().enumerate() {
        let (cols, values) = a.row(i);
        for (&j, &value) in cols.iter().zip(values) {
            row[j] = value;
        }
    }
    rows
}

/// Whether `a` and `b` have the same pattern and bitwise the same values.
fn bitwise_equal(a: &CsrMatrix, b: &CsrMatrix) -> bool {
    a.same_pattern(b)
        && a.values()
            .iter()
            .zip(b.values())
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A random finite value: mostly arbitrary bit patterns (subnormals, huge and tiny
/// exponents, both zeros), some short decimals.
fn random_value(rng: &mut ChaCha8Rng) -> f64 {
    loop {
        let value = match rng.random_range(0..4) {
            0 => f64::from(rng.random_range(-1000..1000)) / 8.0,
            1 => rng.random::<f64>() - 0.5,
            _ => f64::from_bits(rng.random::<u64>()),
        };
        if value.is_finite() {
            return value;
        }
    }
}

/// A random matrix, empty rows and explicit zeros included.
fn random_matrix(rng: &mut ChaCha8Rng) -> Result<CsrMatrix, SparseError> {
    let rows = rng.random_range(0..30);
    let cols = rng.random_range(0..30);
    let entries = if rows * cols == 0 {
        0
    } else {
        rng.random_range(0..rows * cols)
    };
    let mut triplets: Vec<_> = (0..entries)
        .map(|_| {
            (
                rng.random_range(0..rows),
                rng.random_range(0..cols),
                random_value(rng),
            )
        })
        .collect();
    if rows * cols > 0 {
        // Explicit zeros of both signs are entries too.
        for zero in [0.0, -0.0] {
            triplets.push((rng.random_range(0..rows), rng.random_range(0..cols), zero));
        }
    }
    // Keep one value per position so that no sum rounds.
    triplets.sort_by_key(|&(i, j, _)| (i, j));
    triplets.dedup_by_key(|&mut (i, j, _)| (i, j));
    CsrMatrix::from_triplets(rows, cols, &triplets)
}

#[test]
fn random_matrices_round_trip_bit_for_bit() -> TestResult {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for _ in 0..200 {
        let a = random_matrix(&mut rng)?;
        let mut bytes = Vec::new();
        matrix_market::write_to(&mut bytes, &a)?;
        let b = matrix_market::read_from(&bytes[..], Path::new("memory"))?;
        assert!(
            bitwise_equal(&a, &b),
            "{a:?} read back as {b:?} from\n{}",
            String::from_utf8_lossy(&bytes)
        );
    }
    Ok(())
}

#[test]
fn special_values_round_trip_bit_for_bit() -> TestResult {
    let values = [
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        f64::from_bits(1),
        -f64::from_bits(0x000f_ffff_ffff_ffff),
        f64::MAX,
        f64::MIN,
        f64::EPSILON,
        0.1,
        1.0 / 3.0,
        -2.5e-300,
        123456789.0,
        9007199254740993.0,
    ];
    let triplets: Vec<_> = values
        .iter()
        .enumerate()
        .map(|(k, &value)| (k, k % 3, value))
        .collect();
    let a = CsrMatrix::from_triplets(values.len(), 3, &triplets)?;
    let mut bytes = Vec::new();
    matrix_market::write_to(&mut bytes, &a)?;
    let b = matrix_market::read_from(&bytes[..], Path::new("memory"))?;
    assert!(bitwise_equal(&a, &b));
    Ok(())
}

#[test]
fn written_files_name_their_format_and_writer() -> TestResult {
    let a = CsrMatrix::from_triplets(2, 3, &[(0, 2, 1.5), (1, 0, -2.0)])?;
    let mut bytes = Vec::new();
    matrix_market::write_to(&mut bytes, &a)?;
    let text = String::from_utf8(bytes)?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "%%MatrixMarket matrix coordinate real general");
    assert!(lines[1].starts_with('%') && lines[1].contains("tutti-sparse"));
    assert_eq!(&lines[2..], ["2 3 2", "1 3 1.5e0", "2 1 -2e0"]);
    Ok(())
}

#[test]
fn files_round_trip_through_the_file_system() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("a.mtx");
    let a = CsrMatrix::from_triplets(3, 2, &[(0, 1, 0.25), (2, 0, -7.0), (2, 1, 0.0)])?;
    matrix_market::write(&path, &a)?;
    let b = matrix_market::read(&path)?;
    assert!(bitwise_equal(&a, &b));
    match matrix_market::read(dir.path().join("missing.mtx")) {
        Err(SparseError::Io { path, .. }) => assert!(path.ends_with("missing.mtx")),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn a_symmetric_file_mirrors_its_lower_triangle() -> TestResult {
    let a = parse(
        "%%MatrixMarket matrix coordinate real symmetric\n\
         % a 3 x 3 symmetric matrix\n\
         3 3 4\n\
         1 1 4.0\n\
         2 1 -1.0\n\
         3 2 -2.5\n\
         3 3 6\n",
    )?;
    assert_eq!(
        dense(&a),
        [[4.0, -1.0, 0.0], [-1.0, 0.0, -2.5], [0.0, -2.5, 6.0]]
    );
    assert_eq!(a.nnz(), 6);
    Ok(())
}

#[test]
fn a_skew_symmetric_file_mirrors_with_the_opposite_sign() -> TestResult {
    let a = parse(
        "%%MatrixMarket matrix coordinate real skew-symmetric\n\
         3 3 3\n\
         2 1 1.5\n\
         3 1 -2\n\
         3 2 4\n",
    )?;
    assert_eq!(
        dense(&a),
        [[0.0, -1.5, 2.0], [1.5, 0.0, -4.0], [-2.0, 4.0, 0.0]]
    );
    Ok(())
}

#[test]
fn integer_and_pattern_fields() -> TestResult {
    let integer = parse(
        "%%MatrixMarket matrix coordinate integer general\n\
         2 3 3\n\
         1 1 7\n\
         2 3 -12\n\
         1 2 +3\n",
    )?;
    assert_eq!(dense(&integer), [[7.0, 3.0, 0.0], [0.0, 0.0, -12.0]]);
    let pattern = parse(
        "%%MatrixMarket matrix coordinate pattern symmetric\n\
         3 3 3\n\
         1 1\n\
         3 1\n\
         2 2\n",
    )?;
    assert_eq!(
        dense(&pattern),
        [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    );
    let integer_skew = parse(
        "%%MatrixMarket matrix coordinate integer skew-symmetric\n\
         2 2 1\n\
         2 1 5\n",
    )?;
    assert_eq!(dense(&integer_skew), [[0.0, -5.0], [5.0, 0.0]]);
    Ok(())
}

#[test]
fn headers_are_case_insensitive_and_comments_blank_lines_and_crlf_are_skipped() -> TestResult {
    let a = parse(
        "%%matrixmarket MATRIX Coordinate REAL General\r\n\
         %%MatrixMarket-looking comment\r\n\
         \r\n\
         \t \r\n\
         2 2 3\r\n\
         % between entries\r\n\
         1 1 1.0D+00\r\n\
         \r\n\
         2\t2   -2.5e-1\r\n\
         1 1 0.5\r\n\
         % trailing comment",
    )?;
    // The duplicate (1, 1) is summed.
    assert_eq!(dense(&a), [[1.5, 0.0], [0.0, -0.25]]);
    let empty = parse("%%MatrixMarket matrix coordinate real general\n0 0 0\n")?;
    assert_eq!((empty.rows(), empty.cols(), empty.nnz()), (0, 0, 0));
    let wide = parse("%%MatrixMarket matrix coordinate real general\n1 5 0")?;
    assert_eq!((wide.rows(), wide.cols(), wide.nnz()), (1, 5, 0));
    Ok(())
}

/// Checks that `text` is an error at `line` whose message holds `expected`.
fn check_error(text: &str, line: usize, expected: &str) {
    match parse(text) {
        Err(SparseError::MatrixMarket {
            path,
            line: got,
            detail,
        }) => {
            assert_eq!(path, Path::new("test.mtx"));
            assert_eq!(
                got, line,
                "line of the error `{detail}` for\n{text}\n(expected line {line})"
            );
            assert!(
                detail.contains(expected),
                "`{detail}` does not contain `{expected}` for\n{text}"
            );
            let message = SparseError::MatrixMarket {
                path,
                line: got,
                detail,
            }
            .to_string();
            assert!(
                message.starts_with(&format!("test.mtx:{line}: ")),
                "{message}"
            );
        }
        other => panic!("expected an error at line {line} for\n{text}\ngot {other:?}"),
    }
}

const GENERAL: &str = "%%MatrixMarket matrix coordinate real general\n";

#[test]
fn malformed_headers_are_errors_at_line_1() {
    let cases = [
        ("", 1, "the file is empty"),
        ("3 3 1\n1 1 1\n", 1, "expected the header"),
        (
            "%%MatrixMarket matrix coordinate real\n1 1 0\n",
            1,
            "expected the header",
        ),
        (
            "%MatrixMarket matrix coordinate real general\n1 1 0\n",
            1,
            "expected the header",
        ),
        (
            "%%MatrixMarket vector coordinate real general\n",
            1,
            "only `matrix`",
        ),
        (
            "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
            1,
            "`array`",
        ),
        (
            "%%MatrixMarket matrix sparse real general\n",
            1,
            "only `coordinate`",
        ),
        (
            "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
            1,
            "supported fields are real, integer and pattern",
        ),
        (
            "%%MatrixMarket matrix coordinate double general\n",
            1,
            "`double`",
        ),
        (
            "%%MatrixMarket matrix coordinate real hermitian\n",
            1,
            "supported symmetries are general, symmetric and skew-symmetric",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern skew-symmetric\n",
            1,
            "pattern",
        ),
    ];
    for (text, line, expected) in cases {
        check_error(text, line, expected);
    }
}

#[test]
fn malformed_size_lines_are_errors_at_their_line() {
    let cases = [
        (GENERAL.to_string(), 2, "ends before the size line"),
        (
            format!("{GENERAL}% only a comment"),
            2,
            "ends before the size line",
        ),
        (
            format!("{GENERAL}% a comment\n\n"),
            4,
            "ends before the size line",
        ),
        (format!("{GENERAL}%\n3 3\n"), 3, "expected the size line"),
        (format!("{GENERAL}3 3 1 1\n"), 2, "expected the size line"),
        (format!("{GENERAL}3 x 1\n"), 2, "expected the size line"),
        (format!("{GENERAL}3 -3 1\n"), 2, "expected the size line"),
        (format!("{GENERAL}3 3 1e3\n"), 2, "expected the size line"),
        (
            "%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n".to_string(),
            2,
            "3 x 4",
        ),
    ];
    for (text, line, expected) in cases {
        check_error(&text, line, expected);
    }
}

#[test]
fn malformed_entries_are_errors_at_their_line() {
    let cases = [
        (
            format!("{GENERAL}2 2 2\n1 1 1\n"),
            4,
            "after 1 of the 2 entries",
        ),
        (
            format!("{GENERAL}2 2 2\n1 1 1\n% comment"),
            4,
            "after 1 of the 2",
        ),
        (
            format!("{GENERAL}2 2 1\n1 1 1\n2 2 2\n"),
            4,
            "more entries than the 1",
        ),
        (
            format!("{GENERAL}2 2 1\n1 1 1\n\n% c\n2 2 2\n"),
            6,
            "more entries",
        ),
        (
            format!("{GENERAL}2 2 0\n1 1 1\n"),
            3,
            "more entries than the 0",
        ),
        (
            format!("{GENERAL}2 2 2\n1 1 1\n0 1 1\n"),
            4,
            "row index is 0",
        ),
        (format!("{GENERAL}2 2 1\n1 0 1\n"), 3, "column index is 0"),
        (
            format!("{GENERAL}2 2 1\n3 1 1\n"),
            3,
            "row index 3 is out of range",
        ),
        (
            format!("{GENERAL}2 3 1\n1 4 1\n"),
            3,
            "column index 4 is out of range",
        ),
        (
            format!("{GENERAL}2 2 1\n-1 1 1\n"),
            3,
            "not a positive integer",
        ),
        (
            format!("{GENERAL}2 2 1\n1.0 1 1\n"),
            3,
            "not a positive integer",
        ),
        (
            format!("{GENERAL}2 2 1\n1 1 abc\n"),
            3,
            "`abc` is not a number",
        ),
        (format!("{GENERAL}2 2 1\n1 1 1.5.2\n"), 3, "not a number"),
        (format!("{GENERAL}2 2 1\n1 1 NaN\n"), 3, "not finite"),
        (format!("{GENERAL}2 2 1\n1 1 -inf\n"), 3, "not finite"),
        (format!("{GENERAL}2 2 1\n1 1 1e400\n"), 3, "not finite"),
        (format!("{GENERAL}2 2 1\n1 1\n"), 3, "found 2 words"),
        (format!("{GENERAL}2 2 1\n1 1 1 0\n"), 3, "found 4 words"),
        (
            "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n".to_string(),
            3,
            "`row col`",
        ),
        (
            "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n".to_string(),
            3,
            "not an integer",
        ),
        (
            "%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 3 1\n".to_string(),
            4,
            "entry (1, 3) is above the diagonal",
        ),
        (
            "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n1 2 1\n".to_string(),
            3,
            "above the diagonal",
        ),
        (
            "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n2 2 1\n"
                .to_string(),
            4,
            "on the diagonal",
        ),
    ];
    for (text, line, expected) in cases {
        check_error(&text, line, expected);
    }
}

#[test]
fn unreadable_lines_are_errors_at_their_line() -> TestResult {
    let mut bytes = format!("{GENERAL}2 2 1\n").into_bytes();
    bytes.extend(b"1 1 \xff\n");
    match matrix_market::read_from(&bytes[..], Path::new("bytes.mtx")) {
        Err(SparseError::MatrixMarket { line, detail, .. }) => {
            assert_eq!(line, 3);
            assert!(detail.contains("UTF-8"), "{detail}");
        }
        other => panic!("expected a UTF-8 error, got {other:?}"),
    }
    let long = format!("{GENERAL}% {}\n1 1 0\n", "x".repeat(2 << 20));
    check_error(&long, 2, "longer than");
    Ok(())
}

#[test]
fn a_huge_announced_size_allocates_nothing_for_it() {
    // 10^18 entries announced and one given: an error for the missing ones, not an
    // allocation of 10^18 entries.
    check_error(
        &format!("{GENERAL}2 2 1000000000000000000\n1 1 1\n"),
        4,
        "after 1 of the 1000000000000000000 entries",
    );
    check_error(
        "%%MatrixMarket matrix coordinate real symmetric\n\
         1000000000000000000 1000000000000000000 1000000000000000000\n",
        3,
        "after 0 of",
    );
    // Sizes beyond usize, and rows that cannot be held, are errors, not aborts.
    check_error(
        &format!("{GENERAL}1 1 100000000000000000000000\n"),
        2,
        "expected the size line",
    );
    let too_large = [
        format!("{GENERAL}1000000000000000000 1 0\n"),
        format!("{GENERAL}{} 1 0\n", usize::MAX),
        format!("{GENERAL}1 {} 0\n", usize::MAX),
    ];
    for text in too_large {
        match parse(&text) {
            Err(SparseError::TooLarge { .. }) => {}
            other => panic!("expected TooLarge for\n{text}\ngot {other:?}"),
        }
    }
}
