//! `Device::gemm` against plain faer on the same cores, and on a GPU when there is one.
//!
//! Baseline: faer's `matmul` on host matrices in a pool of the same thread count, in the same
//! process. The device path on a simulated device must cost at most a few percent more (it
//! adds the checks and the strided views); on a GPU (built with `--features cuda`) the rate is
//! set beside the CPU's. Square `n x n` products, f64 and complex128; `n` from the first
//! argument (default 1024). Prints GFLOP/s and the ratios; writes
//! `benches/results/device_gemm.json`.

use std::error::Error;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use serde_json::json;
use tutti_backend::{gpu_count, BlasScalar, Complex64, Device, Gemm, Resources};
use tutti_benches::{best_time, write_results, SplitMix};

/// Real flops of one `n x n x n` product: 2 n^3 (8 n^3 for complex).
fn flops<T: BlasScalar>(n: usize) -> f64 {
    let per = if T::COMPLEX { 8.0 } else { 2.0 };
    per * (n as f64).powi(3)
}

trait FromUnit: BlasScalar {
    fn from_unit(random: &mut SplitMix) -> Self;
    fn distance(self, other: Self) -> f64;
}

impl FromUnit for f64 {
    fn from_unit(random: &mut SplitMix) -> Self {
        random.next_unit() - 0.5
    }
    fn distance(self, other: Self) -> f64 {
        (self - other).abs()
    }
}

impl FromUnit for Complex64 {
    fn from_unit(random: &mut SplitMix) -> Self {
        Complex64::new(random.next_unit() - 0.5, random.next_unit() - 0.5)
    }
    fn distance(self, other: Self) -> f64 {
        (self - other).norm()
    }
}

/// GFLOP/s of `Device::gemm` on `device` (synchronised before the clock stops), and the
/// product for checking.
fn on_device<T: FromUnit>(
    device: &Device,
    n: usize,
    a: &[T],
    b: &[T],
    repeats: usize,
) -> Result<(f64, Vec<T>), Box<dyn Error>> {
    let (da, db) = (device.upload(a)?, device.upload(b)?);
    let mut dc = device.alloc_zeros::<T>(n * n)?;
    let gemm = Gemm::<T>::new(n, n, n);
    let (time, result) = best_time(repeats, || {
        device
            .gemm(&gemm, &da, &db, &mut dc)
            .and_then(|()| device.synchronize())
    });
    result?;
    Ok((flops::<T>(n) / time.as_secs_f64() / 1e9, dc.to_host_vec()?))
}

/// GFLOP/s of faer's `matmul` on `threads` threads, and the product: the same column-major
/// slices (the same leading dimension, which matters at powers of two) as the device path.
fn plain<T: FromUnit>(n: usize, a: &[T], b: &[T], threads: usize, repeats: usize) -> (f64, Vec<T>) {
    let am = MatRef::from_column_major_slice(a, n, n);
    let bm = MatRef::from_column_major_slice(b, n, n);
    let mut c = vec![T::zero(); n * n];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    let par = if threads > 1 {
        Par::rayon(threads)
    } else {
        Par::Seq
    };
    let (time, ()) = best_time(repeats, || {
        let cm = MatMut::from_column_major_slice_mut(&mut c, n, n);
        pool.install(|| matmul(cm, Accum::Replace, am, bm, T::one(), par))
    });
    (flops::<T>(n) / time.as_secs_f64() / 1e9, c)
}

fn largest_difference<T: FromUnit>(x: &[T], y: &[T]) -> f64 {
    x.iter()
        .zip(y)
        .map(|(&p, &q)| p.distance(q))
        .fold(0.0, f64::max)
}

fn compare<T: FromUnit>(
    name: &str,
    n: usize,
    rows: &mut Vec<serde_json::Value>,
) -> Result<(), Box<dyn Error>> {
    let mut random = SplitMix(7);
    let a: Vec<T> = (0..n * n).map(|_| T::from_unit(&mut random)).collect();
    let b: Vec<T> = (0..n * n).map(|_| T::from_unit(&mut random)).collect();
    let host = Resources::cpu(1).select()?.remove(0);
    let threads = host.threads();
    let (baseline, expected) = plain(n, &a, &b, threads, 5);
    let (simulated, got) = on_device(&host, n, &a, &b, 5)?;
    let difference = largest_difference(&got, &expected);
    println!(
        "  {name} n={n}: plain faer ({threads} threads) {baseline:7.1} GFLOP/s; \
         Device::gemm on a simulated device {simulated:7.1} GFLOP/s \
         (device / plain {:.3}; results differ by {difference:.1e})",
        simulated / baseline
    );
    let mut row = json!({
        "scalar": name,
        "n": n,
        "threads": threads,
        "plain_gflops": baseline,
        "simulated_device_gflops": simulated,
        "simulated_over_plain": simulated / baseline,
        "simulated_max_difference": difference,
    });
    if gpu_count().unwrap_or(0) > 0 {
        let gpu = Resources::gpu(1).select()?.remove(0);
        let (rate, on_gpu) = on_device(&gpu, n, &a, &b, 10)?;
        let difference = largest_difference(&on_gpu, &expected);
        println!(
            "  {name} n={n}: {} {rate:9.1} GFLOP/s (GPU / CPU {:.1}x; differs by {difference:.1e})",
            gpu.name(),
            rate / baseline
        );
        row["gpu"] = json!(gpu.name());
        row["gpu_gflops"] = json!(rate);
        row["gpu_over_cpu"] = json!(rate / baseline);
        row["gpu_max_difference"] = json!(difference);
    }
    rows.push(row);
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(text) => text
            .parse()
            .map_err(|_| format!("n must be a size, got '{text}'"))?,
        None => 1024,
    };
    println!("device_gemm: C = A B, square, best of 5 after a warm-up");
    let mut rows = Vec::new();
    compare::<f64>("f64", n, &mut rows)?;
    compare::<Complex64>("complex128", n / 2, &mut rows)?;
    // The GPU pack runs this far from the source tree: the figures above are the result there.
    match write_results("device_gemm", json!({ "runs": rows })) {
        Ok(path) => println!("results: {}", path.display()),
        Err(err) => println!("results not written ({err}); the figures above stand"),
    }
    Ok(())
}
