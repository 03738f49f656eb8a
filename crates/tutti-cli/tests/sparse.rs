//! `tutti sparse solve|info` through the built binary: solutions checked against the
//! matrix, the bits of one device on two, `--plan` and `info`'s figures, complex matrices
//! and right-hand sides, and the exit status and message of each kind of bad input.

mod common;

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use common::{lcg, scratch, text, tutti};
use npyz::WriterBuilder;
use serde_json::Value;
use tutti_sparse::models::helmholtz;
use tutti_sparse::{c64, matrix_market, CsrMatrix};

/// `tutti --json args...` must succeed with one JSON object naming `command`; returns it.
fn json(command: &str, args: &[&str]) -> Value {
    let mut argv = vec!["--json"];
    argv.extend_from_slice(args);
    let out = tutti(&argv);
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        out.status.success(),
        "tutti {argv:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|err| panic!("tutti {argv:?}: not one JSON value ({err}): {stdout}"));
    assert_eq!(value["command"], command, "{value}");
    value
}

/// `tutti --json args...` must exit with `code`, nothing on standard output and `says` in
/// its message.
fn fails(code: i32, args: &[&str], says: &str) {
    let mut argv = vec!["--json"];
    argv.extend_from_slice(args);
    let out = tutti(&argv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "tutti {argv:?}: {stderr}");
    assert!(
        stderr.contains(says),
        "tutti {argv:?}: expected {says:?} in {stderr}"
    );
    assert!(out.stdout.is_empty(), "tutti {argv:?}: stdout on failure");
}

fn number(value: &Value, field: &str) -> f64 {
    value[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {value}"))
}

/// A float64 `.npy` of `shape` (C order), written with npyz.
fn write_npy(path: &Path, shape: &[u64], values: &[f64]) {
    let file = BufWriter::new(File::create(path).expect("create npy"));
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .expect("npy header");
    writer.extend(values.iter().copied()).expect("npy data");
    writer.finish().expect("npy finish");
}

/// A float64 `.npy`'s shape and values.
fn read_npy(path: &Path) -> (Vec<u64>, Vec<f64>) {
    let npy = npyz::NpyFile::new(File::open(path).expect("open npy")).expect("npy header");
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f64>().expect("npy data"))
}

/// An unsymmetric, diagonally dominant `n x n` matrix with a few long-range couplings.
fn unsymmetric(n: usize) -> CsrMatrix {
    let mut triplets = Vec::new();
    for i in 0..n {
        triplets.push((i, i, 4.0 + 0.1 * i as f64));
        if i + 1 < n {
            triplets.push((i, i + 1, -1.0));
            triplets.push((i + 1, i, 0.5));
        }
        triplets.push((i, (7 * i + 3) % n, 0.3));
    }
    CsrMatrix::from_triplets(n, n, &triplets).expect("matrix")
}

/// `||A x - b||_inf` for one column.
fn residual(a: &CsrMatrix, x: &[f64], b: &[f64]) -> f64 {
    let mut ax = vec![0.0; b.len()];
    a.matvec(x, &mut ax).expect("matvec");
    ax.iter()
        .zip(b)
        .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()))
}

#[test]
fn a_laplacian_solves_to_ones_with_the_same_bits_on_one_and_two_devices() {
    let dir = scratch("sparse-laplacian");
    let mut solutions = Vec::new();
    for devices in ["1", "2"] {
        let out = dir.join(format!("x{devices}.npy"));
        let report = json(
            "sparse solve",
            &[
                "sparse",
                "solve",
                "--model",
                "laplacian",
                "--dims",
                "40,40",
                "--kind",
                "cpu",
                "-d",
                devices,
                "--out",
                text(&out),
            ],
        );
        assert_eq!(report["unknowns"], 1600, "{report}");
        assert_eq!(report["dtype"], "float64", "{report}");
        assert_eq!(report["nnz"], 5 * 40 * 40 - 4 * 40, "{report}");
        assert_eq!(report["ordering"], "nd", "{report}");
        assert_eq!(report["devices"].to_string(), devices, "{report}");
        assert_eq!(report["right_hand_sides"], 1, "{report}");
        assert_eq!(report["perturbed_pivots"], 0, "{report}");
        assert!(number(&report, "relative_residual") <= 1e-13, "{report}");
        assert!(number(&report, "backward_error") <= 1e-13, "{report}");
        assert!(number(&report, "max_error") <= 1e-10, "{report}");
        assert!(report["fronts"].as_u64().is_some_and(|f| f > 1), "{report}");
        assert!(
            report["factor_nnz"].as_u64().is_some_and(|f| f > 7840),
            "{report}"
        );
        assert!(number(&report, "factor_flops") > 0.0, "{report}");
        for timing in ["ordering", "factor", "solve"] {
            assert!(report["timings"][timing].is_number(), "{report}");
        }
        assert_eq!(report["outputs"]["x"], text(&out), "{report}");
        let (shape, x) = read_npy(&out);
        assert_eq!(shape, [1600]);
        solutions.push(x);
    }
    assert!(
        solutions[0]
            .iter()
            .zip(&solutions[1])
            .all(|(p, q)| p.to_bits() == q.to_bits()),
        "two devices changed the solution's bits"
    );

    // Nested dissection of a 3-D model with coupled species, on three devices.
    let report = json(
        "sparse solve",
        &[
            "sparse",
            "solve",
            "--model",
            "reaction-diffusion",
            "--dims",
            "8,8,8",
            "--species",
            "3",
            "--ordering",
            "nd",
            "--kind",
            "cpu",
            "-d",
            "3",
        ],
    );
    assert_eq!(report["ordering"], "nd", "{report}");
    assert_eq!(report["inputs"]["block"], 3, "{report}");
    assert!(number(&report, "relative_residual") <= 1e-13, "{report}");
    assert!(number(&report, "max_error") <= 1e-10, "{report}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn a_matrix_market_file_solves_for_two_right_hand_sides() {
    let dir = scratch("sparse-mtx");
    let n = 30;
    let a = unsymmetric(n);
    let mtx = dir.join("a.mtx");
    matrix_market::write(&mtx, &a).expect("write mtx");
    // b: (n, 2) in C order, columns of different scales.
    let columns = [lcg(5, n), lcg(6, n).iter().map(|v| 1e3 * v).collect()];
    let b: Vec<f64> = (0..n)
        .flat_map(|i| [columns[0][i], columns[1][i]])
        .collect();
    let rhs = dir.join("b.npy");
    write_npy(&rhs, &[n as u64, 2], &b);
    let out = dir.join("x.npy");
    let report = json(
        "sparse solve",
        &[
            "sparse",
            "solve",
            "--matrix",
            text(&mtx),
            "--rhs",
            text(&rhs),
            "--out",
            text(&out),
            "--kind",
            "cpu",
            "-d",
            "2",
            "--leaf-size",
            "8",
        ],
    );
    // `auto` on a file: METIS (the graph may be irregular).
    assert_eq!(report["ordering"], "metis", "{report}");
    assert_eq!(report["right_hand_sides"], 2, "{report}");
    assert!(report["max_error"].is_null(), "{report}");
    assert!(number(&report, "relative_residual") <= 1e-13, "{report}");
    let (shape, x) = read_npy(&out);
    assert_eq!(shape, [n as u64, 2]);
    for (j, column) in columns.iter().enumerate() {
        let xj: Vec<f64> = (0..n).map(|i| x[2 * i + j]).collect();
        let scale = column.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(
            residual(&a, &xj, column) <= 1e-13 * scale,
            "column {j}: A x != b"
        );
    }

    // One right-hand side as a vector: x comes back as a vector, the same as column 0.
    let single = dir.join("b0.npy");
    write_npy(&single, &[n as u64], &columns[0]);
    let out0 = dir.join("x0.npy");
    json(
        "sparse solve",
        &[
            "sparse",
            "solve",
            "--matrix",
            text(&mtx),
            "--rhs",
            text(&single),
            "--out",
            text(&out0),
            "--kind",
            "cpu",
            "--leaf-size",
            "8",
        ],
    );
    let (shape, x0) = read_npy(&out0);
    assert_eq!(shape, [n as u64]);
    assert!(residual(&a, &x0, &columns[0]) <= 1e-13);
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn plan_prints_the_plan_and_writes_nothing() {
    let dir = scratch("sparse-plan");
    let out = dir.join("x.npy");
    let args = [
        "sparse",
        "solve",
        "--model",
        "laplacian",
        "--dims",
        "30,30",
        "--kind",
        "cpu",
        "-d",
        "2",
        "--plan",
        "--out",
        text(&out),
    ];
    let printed = tutti(&args);
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.status.success(), "{stdout}");
    for says in [
        "plan for 2 device(s)",
        "fronts and contribution blocks",
        "factors",
        "matrix values",
        "solve vectors",
    ] {
        assert!(stdout.contains(says), "{says:?} not in {stdout}");
    }
    let report = json("sparse solve", &args);
    assert!(
        report["plan"]
            .as_str()
            .is_some_and(|plan| plan.contains("factors")),
        "{report}"
    );
    assert!(report["factor_nnz"].is_null(), "--plan factors nothing");
    assert!(!out.exists(), "--plan writes nothing");
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);

    // A plan that does not fit the caps is refused before any work, with the numbers.
    fails(
        2,
        &[
            "sparse",
            "solve",
            "--model",
            "laplacian",
            "--dims",
            "100,100",
            "--kind",
            "cpu",
            "--device-memory-mib",
            "1",
            "--out",
            text(&out),
        ],
        "memory plan: the plan does not fit",
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn info_reports_the_analysis_and_memory_on_one_two_and_four_devices() {
    let model = ["--model", "laplacian", "--dims", "40,40"];
    let info = json("sparse info", &[&["sparse", "info"][..], &model].concat());
    assert_eq!(info["unknowns"], 1600, "{info}");
    assert_eq!(info["ordering"], "nd", "{info}");
    for field in ["fronts", "largest_front", "factor_nnz"] {
        assert!(info[field].as_u64().is_some_and(|v| v > 0), "{info}");
    }
    assert!(number(&info, "factor_flops") > number(&info, "solve_flops"));
    // The geometric ordering on request: a valid analysis of the same matrix.
    let grid = json(
        "sparse info",
        &[&["sparse", "info"][..], &model, &["--ordering", "grid"]].concat(),
    );
    assert_eq!(grid["ordering"], "grid", "{grid}");
    assert_eq!(grid["unknowns"], 1600, "{grid}");
    assert!(number(&grid, "factor_nnz") > 0.0, "{grid}");
    let memory = info["memory_per_device"].as_array().expect("an array");
    let counts: Vec<u64> = memory
        .iter()
        .filter_map(|m| m["devices"].as_u64())
        .collect();
    assert_eq!(counts, [1, 2, 4], "{info}");
    let bytes: Vec<u64> = memory
        .iter()
        .map(|m| m["device_bytes"].as_u64().expect("fits"))
        .collect();
    assert!(
        bytes[0] >= bytes[1] && bytes[1] >= bytes[2] && bytes[0] > bytes[2],
        "more devices, less memory each: {bytes:?}"
    );

    // The analysis solve reports is the one info predicts.
    let solved = json(
        "sparse solve",
        &[&["sparse", "solve", "--kind", "cpu"][..], &model].concat(),
    );
    for field in ["fronts", "largest_front", "factor_nnz", "factor_flops"] {
        assert_eq!(solved[field], info[field], "{field}");
    }

    let printed = tutti(&[&["sparse", "info"][..], &model].concat());
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.status.success(), "{stdout}");
    for says in [
        "1600 unknowns",
        "nnz(L+U)",
        "1 device(s):",
        "2 device(s):",
        "4 device(s):",
    ] {
        assert!(stdout.contains(says), "{says:?} not in {stdout}");
    }
}

#[test]
fn bad_inputs_and_singular_matrices_exit_with_their_codes() {
    let dir = scratch("sparse-errors");
    let out = dir.join("x.npy");
    let solve = |matrix: &Path, extra: &[&str], code: i32, says: &str| {
        let mut args = vec!["sparse", "solve", "--kind", "cpu", "--matrix", text(matrix)];
        args.extend_from_slice(extra);
        args.extend(["--out", text(&out)]);
        fails(code, &args, says);
        assert!(!out.exists(), "a failed solve writes nothing");
    };

    // Files that cannot be read or used: input, exit 2.
    solve(&dir.join("missing.mtx"), &[], 2, "missing.mtx");
    let malformed = dir.join("malformed.mtx");
    std::fs::write(
        &malformed,
        "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 x 3\n",
    )
    .expect("write");
    solve(&malformed, &[], 2, "malformed.mtx:3");
    let rectangular = dir.join("rectangular.mtx");
    std::fs::write(
        &rectangular,
        "%%MatrixMarket matrix coordinate real general\n2 3 2\n1 1 1\n2 2 1\n",
    )
    .expect("write");
    solve(&rectangular, &[], 2, "square");
    let empty_row = dir.join("empty-row.mtx");
    std::fs::write(
        &empty_row,
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n1 2 1\n",
    )
    .expect("write");
    solve(&empty_row, &[], 2, "structurally singular");

    // Right-hand sides of the wrong length or dtype.
    let mtx = dir.join("a.mtx");
    matrix_market::write(&mtx, &unsymmetric(10)).expect("write mtx");
    let short = dir.join("short.npy");
    write_npy(&short, &[9], &[1.0; 9]);
    solve(
        &mtx,
        &["--rhs", text(&short)],
        2,
        "expected shape (10,) or (10, k)",
    );
    let single = dir.join("f32.npy");
    {
        let file = BufWriter::new(File::create(&single).expect("create"));
        let mut writer = npyz::WriteOptions::<f32>::new()
            .default_dtype()
            .shape(&[10])
            .writer(file)
            .begin_nd()
            .expect("header");
        writer.extend([1.0f32; 10]).expect("data");
        writer.finish().expect("finish");
    }
    solve(&mtx, &["--rhs", text(&single)], 2, "float64");
    let garbage = dir.join("garbage.npy");
    std::fs::write(&garbage, b"\x93NUMPY but not really").expect("write");
    solve(&mtx, &["--rhs", text(&garbage)], 2, "garbage.npy");
    solve(&mtx, &["--rhs", text(&dir.join("none.npy"))], 2, "none.npy");

    // A singular matrix with a right-hand side outside its range: the factorization
    // perturbs a pivot and refinement cannot recover, a computation failure (exit 1).
    let singular = dir.join("singular.mtx");
    std::fs::write(
        &singular,
        "%%MatrixMarket matrix coordinate real general\n2 2 4\n1 1 1\n1 2 1\n2 1 1\n2 2 1\n",
    )
    .expect("write");
    let b = dir.join("b.npy");
    write_npy(&b, &[2], &[1.0, 2.0]);
    solve(&singular, &["--rhs", text(&b)], 1, "numerically singular");

    // Options that do not go together: exit 2.
    solve(&mtx, &["--ordering", "grid"], 2, "--ordering grid");
    solve(&mtx, &["--peclet", "3"], 2, "--peclet");
    solve(&mtx, &["--block", "3"], 2, "whole number of blocks of 3");
    fails(
        2,
        &[
            "sparse",
            "solve",
            "--model",
            "laplacian",
            "--dims",
            "4,4",
            "--species",
            "2",
        ],
        "--species",
    );
    fails(
        2,
        &["sparse", "solve", "--model", "laplacian", "--dims", "0,4"],
        "--model laplacian",
    );
    fails(2, &["sparse", "solve", "--model", "laplacian"], "--dims");
    fails(2, &["sparse", "solve"], "--matrix");
    fails(
        2,
        &[
            "sparse",
            "solve",
            "--matrix",
            text(&mtx),
            "--model",
            "laplacian",
            "--dims",
            "4,4",
        ],
        "cannot be used with",
    );
    fails(
        2,
        &["sparse", "info", "--matrix", text(&malformed)],
        "malformed.mtx:3",
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// A complex128 `.npy` of `shape` (C order), written with npyz.
fn write_complex_npy(path: &Path, shape: &[u64], values: &[c64]) {
    let file = BufWriter::new(File::create(path).expect("create npy"));
    let mut writer = npyz::WriteOptions::<c64>::new()
        .default_dtype()
        .shape(shape)
        .writer(file)
        .begin_nd()
        .expect("npy header");
    writer.extend(values.iter().copied()).expect("npy data");
    writer.finish().expect("npy finish");
}

/// A complex128 `.npy`'s shape and values (npyz refuses any other dtype).
fn read_complex_npy(path: &Path) -> (Vec<u64>, Vec<c64>) {
    let npy = npyz::NpyFile::new(File::open(path).expect("open npy")).expect("npy header");
    assert_eq!(npy.dtype().descr(), "'<c16'", "{}", path.display());
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<c64>().expect("npy data"))
}

/// `|z|`.
fn modulus(z: c64) -> f64 {
    z.re.hypot(z.im)
}

/// The entries of a `coordinate complex general` Matrix Market file, parsed here (not by
/// tutti-sparse): the size and `(row, col, value)`, 0-based.
fn complex_entries(path: &Path) -> (usize, Vec<(usize, usize, c64)>) {
    let text = std::fs::read_to_string(path).expect("read mtx");
    let mut lines = text.lines();
    assert_eq!(
        lines.next().map(str::to_ascii_lowercase).as_deref(),
        Some("%%matrixmarket matrix coordinate complex general")
    );
    let mut lines = lines.filter(|line| !line.starts_with('%') && !line.trim().is_empty());
    let size: Vec<usize> = lines
        .next()
        .expect("size line")
        .split_whitespace()
        .map(|w| w.parse().expect("size"))
        .collect();
    let entries: Vec<(usize, usize, c64)> = lines
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words.len(), 4, "{line}");
            let index = |w: &str| w.parse::<usize>().expect("index") - 1;
            let part = |w: &str| w.parse::<f64>().expect("value");
            (
                index(words[0]),
                index(words[1]),
                c64::new(part(words[2]), part(words[3])),
            )
        })
        .collect();
    assert_eq!(size[0], size[1], "square");
    assert_eq!(entries.len(), size[2]);
    (size[0], entries)
}

/// `||A x - b||_inf / (||A||_inf ||x||_inf)` for one column, A from the file's entries.
fn complex_relative_residual(
    (n, entries): &(usize, Vec<(usize, usize, c64)>),
    x: &[c64],
    b: &[c64],
) -> f64 {
    let mut ax = vec![c64::new(0.0, 0.0); *n];
    let mut row_sums = vec![0.0f64; *n];
    for &(i, j, a) in entries {
        ax[i] += a * x[j];
        row_sums[i] += modulus(a);
    }
    let residual = ax
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (&p, &q)| m.max(modulus(p - q)));
    let norm_a = row_sums.iter().fold(0.0f64, |m, &v| m.max(v));
    let norm_x = x.iter().fold(0.0f64, |m, &v| m.max(modulus(v)));
    residual / (norm_a * norm_x)
}

/// A damped Helmholtz operator on a 16 x 16 grid, written as a complex `.mtx` in `dir`.
fn complex_matrix(dir: &Path) -> (std::path::PathBuf, usize) {
    let a = helmholtz(&[16, 16], c64::new(0.5, 0.05)).expect("helmholtz");
    let mtx = dir.join("helmholtz.mtx");
    matrix_market::write(&mtx, &a).expect("write mtx");
    (mtx, a.rows())
}

#[test]
fn a_complex_matrix_solves_in_complex_with_the_same_bits_on_one_and_two_devices() {
    let dir = scratch("sparse-complex");
    let (mtx, n) = complex_matrix(&dir);
    let parsed = complex_entries(&mtx);
    // b: (n, 2) in C order, complex entries of different scales and phases.
    let (re, im) = (lcg(11, 2 * n), lcg(12, 2 * n));
    let b: Vec<c64> = (0..2 * n)
        .map(|k| c64::new(re[k], im[k] * if k % 2 == 1 { 1e3 } else { 1.0 }))
        .collect();
    let rhs = dir.join("b.npy");
    write_complex_npy(&rhs, &[n as u64, 2], &b);
    let mut files = Vec::new();
    for devices in ["1", "2"] {
        let out = dir.join(format!("x{devices}.npy"));
        let report = json(
            "sparse solve",
            &[
                "sparse",
                "solve",
                "--matrix",
                text(&mtx),
                "--rhs",
                text(&rhs),
                "--out",
                text(&out),
                "--kind",
                "cpu",
                "-d",
                devices,
                "--leaf-size",
                "16",
            ],
        );
        assert_eq!(report["unknowns"], n, "{report}");
        assert_eq!(report["dtype"], "complex128", "{report}");
        assert_eq!(report["devices"], devices.parse::<u64>().expect("count"));
        assert_eq!(report["right_hand_sides"], 2, "{report}");
        assert_eq!(report["perturbed_pivots"], 0, "{report}");
        assert!(number(&report, "relative_residual") <= 1e-13, "{report}");
        let (shape, x) = read_complex_npy(&out);
        assert_eq!(shape, [n as u64, 2]);
        for j in 0..2 {
            let xj: Vec<c64> = (0..n).map(|i| x[2 * i + j]).collect();
            let bj: Vec<c64> = (0..n).map(|i| b[2 * i + j]).collect();
            let residual = complex_relative_residual(&parsed, &xj, &bj);
            assert!(
                residual <= 1e-13,
                "{devices} device(s), column {j}: {residual:e}"
            );
            // Not the trivial solution of a real problem: x has imaginary parts.
            assert!(xj.iter().any(|z| z.im.abs() > 1e-3));
        }
        files.push(std::fs::read(&out).expect("read x"));
    }
    assert!(
        files[0] == files[1],
        "1 and 2 devices wrote different bytes"
    );

    // A float64 right-hand side is promoted: the bits of the complex one with zero
    // imaginary parts, written as complex128 all the same.
    let real_b: Vec<f64> = lcg(13, n);
    let real_rhs = dir.join("b-real.npy");
    write_npy(&real_rhs, &[n as u64], &real_b);
    let promoted_rhs = dir.join("b-promoted.npy");
    let promoted: Vec<c64> = real_b.iter().map(|&v| c64::new(v, 0.0)).collect();
    write_complex_npy(&promoted_rhs, &[n as u64], &promoted);
    let mut outputs = Vec::new();
    for (name, rhs) in [("real", &real_rhs), ("promoted", &promoted_rhs)] {
        let out = dir.join(format!("x-{name}.npy"));
        json(
            "sparse solve",
            &[
                "sparse",
                "solve",
                "--matrix",
                text(&mtx),
                "--rhs",
                text(rhs),
                "--out",
                text(&out),
                "--kind",
                "cpu",
                "-d",
                "2",
            ],
        );
        let (shape, x) = read_complex_npy(&out);
        assert_eq!(shape, [n as u64]);
        assert!(complex_relative_residual(&parsed, &x, &promoted) <= 1e-13);
        outputs.push(std::fs::read(&out).expect("read x"));
    }
    assert!(outputs[0] == outputs[1], "a promoted float64 rhs differs");

    // Without `--rhs`: b = A * ones, and the error against ones is reported.
    let report = json(
        "sparse solve",
        &["sparse", "solve", "--matrix", text(&mtx), "--kind", "cpu"],
    );
    assert!(number(&report, "max_error") <= 1e-10, "{report}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// The objects of the sparse solver's memory plan, all per device on the device tier.
const PLANNED_OBJECTS: [&str; 4] = [
    "fronts and contribution blocks",
    "factors",
    "matrix values",
    "solve vectors",
];

/// The row of `object` in a printed plan: the bytes of an entry (number and unit, `16 B`)
/// and the count of entries.
fn plan_row(plan: &str, object: &str) -> Vec<String> {
    let line = plan
        .lines()
        .find(|line| line.starts_with(object))
        .unwrap_or_else(|| panic!("no {object:?} in {plan}"));
    line[object.len()..]
        .split_whitespace()
        .take(3)
        .map(str::to_string)
        .collect()
}

#[test]
fn a_complex_plan_counts_sixteen_bytes_per_entry() {
    let dir = scratch("sparse-complex-plan");
    let (mtx, _) = complex_matrix(&dir);
    // The same pattern in real.
    let real = dir.join("laplacian.mtx");
    matrix_market::write(
        &real,
        &tutti_sparse::models::laplacian(&[16, 16]).expect("laplacian"),
    )
    .expect("write mtx");
    let plan = |matrix: &Path| {
        let report = json(
            "sparse solve",
            &[
                "sparse",
                "solve",
                "--matrix",
                text(matrix),
                "--kind",
                "cpu",
                "-d",
                "2",
                "--plan",
            ],
        );
        report["plan"].as_str().expect("plan text").to_string()
    };
    let (complex, real) = (plan(&mtx), plan(&real));
    // The same entries, 16 bytes each in complex and 8 in real.
    for object in PLANNED_OBJECTS {
        let (c, r) = (plan_row(&complex, object), plan_row(&real, object));
        assert_eq!(c[..2], ["16", "B"], "{complex}");
        assert_eq!(r[..2], ["8", "B"], "{real}");
        assert_eq!(c[2], r[2], "{object}: counts differ\n{complex}\n{real}");
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn bad_complex_right_hand_sides_exit_with_status_two() {
    let dir = scratch("sparse-complex-errors");
    let (mtx, n) = complex_matrix(&dir);
    let out = dir.join("x.npy");
    let solve = |rhs: &Path, says: &str| {
        fails(
            2,
            &[
                "sparse",
                "solve",
                "--kind",
                "cpu",
                "--matrix",
                text(&mtx),
                "--rhs",
                text(rhs),
                "--out",
                text(&out),
            ],
            says,
        );
        assert!(!out.exists(), "a failed solve writes nothing");
    };
    // A complex128 header whose data stops half-way through its last entry.
    let truncated = dir.join("truncated.npy");
    write_complex_npy(&truncated, &[n as u64], &vec![c64::new(1.0, -1.0); n]);
    let bytes = std::fs::read(&truncated).expect("read");
    std::fs::write(&truncated, &bytes[..bytes.len() - 8]).expect("truncate");
    solve(&truncated, "truncated");
    // Another dtype.
    let single = dir.join("c8.npy");
    let mut header = format!("{{'descr': '<c8', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&u16::try_from(header.len()).expect("short").to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(std::iter::repeat_n(0u8, 8 * n));
    std::fs::write(&single, &bytes).expect("write");
    solve(
        &single,
        "expected dtype complex128 ('<c16') or float64 ('<f8'), got <c8",
    );
    // The wrong length, and a part that is not finite.
    let short = dir.join("short.npy");
    write_complex_npy(&short, &[n as u64 - 1], &vec![c64::new(1.0, 0.0); n - 1]);
    solve(&short, &format!("expected shape ({n},) or ({n}, k)"));
    let nan = dir.join("nan.npy");
    let mut values = vec![c64::new(1.0, 0.0); n];
    values[3] = c64::new(0.5, f64::NAN);
    write_complex_npy(&nan, &[n as u64], &values);
    solve(&nan, "entry (3)");
    // A real matrix still takes float64 only.
    let real = dir.join("real.mtx");
    matrix_market::write(&real, &unsymmetric(n)).expect("write mtx");
    fails(
        2,
        &[
            "sparse",
            "solve",
            "--kind",
            "cpu",
            "--matrix",
            text(&real),
            "--rhs",
            text(&short),
        ],
        "expected dtype float64 ('<f8'), got <c16",
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// Writes a coordinate Matrix Market file of `field` (`real` or `complex`) and `symmetry`
/// holding the entries of the 5-point pattern on a 16 x 16 grid that `symmetry` stores (all
/// for `general`, the lower triangle for `symmetric` and `hermitian`, the strict lower
/// triangle for `skew-symmetric`). Values: 4 on the diagonal, -1 off it, plus, in complex, an
/// imaginary part that varies with the position (none on a hermitian diagonal).
fn write_grid_mtx(path: &Path, field: &str, symmetry: &str) {
    let grid = tutti_sparse::models::laplacian(&[16, 16]).expect("laplacian");
    let mut lines = Vec::new();
    for i in 0..grid.rows() {
        for &j in grid.row(i).0 {
            let stored = match symmetry {
                "general" => true,
                "symmetric" | "hermitian" => i >= j,
                "skew-symmetric" => i > j,
                other => panic!("symmetry {other}"),
            };
            if !stored {
                continue;
            }
            let re = if i == j { 4.0 } else { -1.0 };
            let line = if field == "real" {
                format!("{} {} {re:e}", i + 1, j + 1)
            } else {
                let im = if i == j && symmetry == "hermitian" {
                    0.0
                } else {
                    0.1 + 0.01 * (i + 2 * j) as f64
                };
                format!("{} {} {re:e} {im:e}", i + 1, j + 1)
            };
            lines.push(line);
        }
    }
    let n = grid.rows();
    let text = format!(
        "%%MatrixMarket matrix coordinate {field} {symmetry}\n{n} {n} {}\n{}\n",
        lines.len(),
        lines.join("\n")
    );
    std::fs::write(path, text).expect("write mtx");
}

/// `info`'s `device_bytes` for 1, 2 and 4 devices, each planned without refusal.
fn device_bytes(info: &Value) -> Vec<u64> {
    let memory = info["memory_per_device"].as_array().expect("an array");
    let counts: Vec<u64> = memory
        .iter()
        .filter_map(|m| m["devices"].as_u64())
        .collect();
    assert_eq!(counts, [1, 2, 4], "{info}");
    memory
        .iter()
        .map(|m| {
            assert!(m["refused"].is_null(), "{info}");
            m["device_bytes"].as_u64().expect("planned")
        })
        .collect()
}

#[test]
fn info_on_a_complex_file_predicts_the_real_fill_and_plans_sixteen_bytes_per_entry() {
    let dir = scratch("sparse-complex-info");
    let info = |path: &Path| {
        json(
            "sparse info",
            &[
                "sparse",
                "info",
                "--matrix",
                text(path),
                "--leaf-size",
                "16",
            ],
        )
    };
    // The analysis depends on the pattern alone; the plan's objects (PLANNED_OBJECTS) are
    // entries per device, all on the device tier, so the device bytes scale with an
    // entry's size.
    let (real_entry, complex_entry) = (
        std::mem::size_of::<f64>() as u64,
        std::mem::size_of::<c64>() as u64,
    );
    // Each complex symmetry against a real file of the same pattern (hermitian: symmetric).
    for (symmetry, real_symmetry) in [
        ("general", "general"),
        ("symmetric", "symmetric"),
        ("hermitian", "symmetric"),
        ("skew-symmetric", "skew-symmetric"),
    ] {
        let complex_mtx = dir.join(format!("complex-{symmetry}.mtx"));
        let real_mtx = dir.join(format!("real-{symmetry}.mtx"));
        write_grid_mtx(&complex_mtx, "complex", symmetry);
        write_grid_mtx(&real_mtx, "real", real_symmetry);
        let (complex, real) = (info(&complex_mtx), info(&real_mtx));
        assert_eq!(complex["dtype"], "complex128", "{symmetry}: {complex}");
        assert_eq!(real["dtype"], "float64", "{symmetry}: {real}");
        assert_eq!(complex["unknowns"], 256, "{symmetry}: {complex}");
        for field in [
            "unknowns",
            "nnz",
            "ordering",
            "fronts",
            "largest_front",
            "largest_contribution",
            "factor_nnz",
            "factor_flops",
            "solve_flops",
        ] {
            assert!(
                !complex[field].is_null(),
                "{symmetry}: {field} in {complex}"
            );
            assert_eq!(complex[field], real[field], "{symmetry}: {field}");
        }
        let (complex_bytes, real_bytes) = (device_bytes(&complex), device_bytes(&real));
        for (c, r) in complex_bytes.iter().zip(&real_bytes) {
            assert_eq!(
                r % real_entry,
                0,
                "{symmetry}: {r} B of {real_entry} B entries"
            );
            assert_eq!(
                c * real_entry,
                r * complex_entry,
                "{symmetry}: complex {complex_bytes:?} against real {real_bytes:?}"
            );
        }
    }

    // The figures are the plan `sparse solve --plan` prints: its entries at 16 bytes.
    let complex_mtx = dir.join("complex-general.mtx");
    let complex_bytes = device_bytes(&info(&complex_mtx));
    for (devices, bytes) in ["1", "2", "4"].into_iter().zip(complex_bytes) {
        let report = json(
            "sparse solve",
            &[
                "sparse",
                "solve",
                "--matrix",
                text(&complex_mtx),
                "--leaf-size",
                "16",
                "--kind",
                "cpu",
                "-d",
                devices,
                "--plan",
            ],
        );
        assert_eq!(report["dtype"], "complex128", "{report}");
        let plan = report["plan"].as_str().expect("plan text");
        let planned: u64 = PLANNED_OBJECTS
            .iter()
            .map(|object| {
                let row = plan_row(plan, object);
                assert_eq!(row[..2], ["16", "B"], "{plan}");
                complex_entry * row[2].parse::<u64>().expect("a count")
            })
            .sum();
        assert_eq!(bytes, planned, "{devices} device(s):\n{plan}");
    }

    // The text says so too.
    let printed = tutti(&["sparse", "info", "--matrix", text(&complex_mtx)]);
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.status.success(), "{stdout}");
    for says in [
        "256 unknowns",
        "complex128",
        "memory per device (16 B per entry)",
    ] {
        assert!(stdout.contains(says), "{says:?} not in {stdout}");
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}
