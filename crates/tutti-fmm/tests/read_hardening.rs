//! Reading `.npy` inputs whose header claims sizes the data cannot have: clear errors naming
//! the expected size, never a panic, a wrap or a silent empty result.

use std::io::Write;
use std::path::{Path, PathBuf};

use tutti_fmm::io::{read_masses, read_positions};
use tutti_fmm::FmmError;

/// A temporary directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tutti-fmm-read-hardening-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A version-1 float64 `.npy` file claiming `shape` (a Python tuple) and holding `values`.
fn write_npy(path: &Path, shape: &str, values: &[f64]) {
    let mut header = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut file = std::fs::File::create(path).expect("create");
    file.write_all(b"\x93NUMPY\x01\x00").expect("write");
    let len = u16::try_from(header.len()).expect("short header");
    file.write_all(&len.to_le_bytes()).expect("write");
    file.write_all(header.as_bytes()).expect("write");
    for x in values {
        file.write_all(&x.to_le_bytes()).expect("write");
    }
}

fn message(error: FmmError) -> String {
    assert!(matches!(error, FmmError::File { .. }), "{error}");
    error.to_string()
}

#[test]
fn a_positions_shape_whose_size_wraps_is_an_error() {
    // 6148914691236517206 * 3 = 2^64 + 2: wraps to 2, the two doubles the file holds.
    let dir = Scratch::new("wrap");
    let path = dir.0.join("positions.npy");
    write_npy(&path, "(6148914691236517206, 3)", &[1.0, 2.0]);
    let msg = message(read_positions(&path).expect_err("refused"));
    assert!(
        msg.contains("positions.npy") && msg.contains("overflow"),
        "{msg}"
    );
    // The same for masses, and a product that wraps to exactly the data's length.
    write_npy(&path, "(1, 3, 12297829382473034411)", &[1.0]);
    let msg = message(read_masses(&path).expect_err("refused"));
    assert!(msg.contains("overflow"), "{msg}");
}

#[test]
fn truncated_inputs_name_the_expected_size() {
    let dir = Scratch::new("truncated");
    let path = dir.0.join("positions.npy");
    // The file's size with `claimed` doubles instead of the `given` ones it holds.
    let needed = |path: &Path, given: u64, claimed: u64| {
        let len = std::fs::metadata(path).expect("metadata").len();
        format!("expected {}", len - 8 * given + 8 * claimed)
    };
    // 4 bodies announced, 2 given.
    write_npy(&path, "(4, 3)", &[0.0; 6]);
    let msg = message(read_positions(&path).expect_err("refused"));
    assert!(
        msg.contains("truncated") && msg.contains(&needed(&path, 6, 12)),
        "{msg}"
    );
    let path = dir.0.join("masses.npy");
    write_npy(&path, "(5,)", &[1.0; 2]);
    let msg = message(read_masses(&path).expect_err("refused"));
    assert!(
        msg.contains("truncated") && msg.contains(&needed(&path, 2, 5)),
        "{msg}"
    );
    // A header length beyond the end of the file (version 2, 4 GiB).
    let mut bytes = b"\x93NUMPY\x02\x00".to_vec();
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(&path, bytes).expect("write");
    let msg = message(read_masses(&path).expect_err("refused"));
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn well_formed_inputs_still_read() {
    let dir = Scratch::new("fine");
    let path = dir.0.join("positions.npy");
    write_npy(&path, "(2, 3)", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        read_positions(&path).expect("positions"),
        vec![[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    );
    write_npy(&path, "(0, 3)", &[]);
    assert!(read_positions(&path).expect("no bodies").is_empty());
}

#[test]
fn a_deeply_nested_header_is_refused_before_it_is_parsed() {
    // Found by the `npy_fmm` fuzz target: 90 nested brackets in the dtype made npyz's header
    // parser run for minutes (its time grows exponentially with the depth). Refused at once.
    let dir = Scratch::new("nested");
    let path = dir.0.join("positions.npy");
    let mut header = format!(
        "{{'descr': {}'<f8', 'fortran_order': False, 'shape': (1, 3), }}",
        "[".repeat(90)
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).expect("short").to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&[0u8; 24]);
    std::fs::write(&path, bytes).expect("write");
    let msg = message(read_positions(&path).expect_err("refused"));
    assert!(msg.contains("nests brackets"), "{msg}");
}

#[test]
fn deeply_nested_braces_are_refused_too() {
    // Found by the `npy_fmm` fuzz target in a long run: nested braces inside the shape tuple
    // took npyz's parser past the 10 s limit as nested brackets did.
    let dir = Scratch::new("braces");
    let path = dir.0.join("positions.npy");
    write_npy(
        &path,
        &format!("(8, {}3{})", "{".repeat(22), "}".repeat(22)),
        &[0.0; 24],
    );
    let msg = message(read_positions(&path).expect_err("refused"));
    assert!(msg.contains("nests brackets"), "{msg}");
    // A header that merely has the dict and the shape tuple still reads.
    write_npy(&path, "(1, 3)", &[1.0, 2.0, 3.0]);
    assert_eq!(read_positions(&path).expect("read"), vec![[1.0, 2.0, 3.0]]);
}
