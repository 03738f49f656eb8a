//! Tests of CUDA devices (cargo feature `cuda`).
//!
//! Every test that needs a GPU asks [`gpus`] first; without a loadable driver or without a
//! device it prints `skipping: <reason>` and returns, so the suite passes on machines without
//! GPUs. With `TUTTI_REQUIRE_GPU=1` every such skip is a failure instead: on a GPU machine a
//! wrong library path must not pass as a row of skips.
#![cfg(feature = "cuda")]

use tutti_backend::{
    enable_peer_access, gpu_count, peer_access_matrix, BackendError, Complex64, CopyRoute, Device,
    DeviceKind, DeviceRequest, GpuUse, KindRequest, Resources,
};

/// Whether `TUTTI_REQUIRE_GPU=1`: a test that cannot find its GPU fails instead of skipping.
fn gpu_required() -> bool {
    std::env::var_os("TUTTI_REQUIRE_GPU").is_some_and(|value| value == "1")
}

/// Prints why a test skips, or fails it under `TUTTI_REQUIRE_GPU=1`.
fn skip(reason: &str) {
    assert!(
        !gpu_required(),
        "TUTTI_REQUIRE_GPU=1 and this test cannot run: {reason}"
    );
    println!("skipping: {reason}");
}

/// The GPUs of `request`, or `None` (after printing why) when there are none to test on.
fn gpus(request: DeviceRequest) -> Option<Vec<Device>> {
    let count = match gpu_count() {
        Ok(0) => {
            skip("the CUDA driver reports no device");
            return None;
        }
        Ok(count) => count,
        Err(err) => {
            skip(&err.to_string());
            return None;
        }
    };
    if let DeviceRequest::Ordinals(ordinals) = &request {
        if let Some(&ordinal) = ordinals.iter().find(|&&o| o >= count) {
            skip(&format!(
                "the test needs GPU {ordinal}, this node has {count}"
            ));
            return None;
        }
    }
    match Resources::gpu(1).with_devices(request).select() {
        Ok(devices) => Some(devices),
        Err(err) => panic!("selecting GPUs failed although {count} exist: {err}"),
    }
}

/// The first GPU, or `None` after printing why.
fn gpu() -> Option<Device> {
    gpus(DeviceRequest::Count(1)).and_then(|devices| devices.into_iter().next())
}

fn sample_f64(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (i as f64).sin() * 1e3 + i as f64 * 1e-9)
        .collect()
}

fn sample_complex(n: usize) -> Vec<Complex64> {
    (0..n)
        .map(|i| Complex64::new(i as f64 * 0.5, -(i as f64).cos()))
        .collect()
}

#[test]
fn without_a_gpu_a_gpu_request_is_a_clear_error() {
    match gpu_count() {
        Ok(n) if n > 0 => println!("skipping: this node has {n} GPU(s)"),
        Ok(_) => {
            let err = Resources::gpu(1).select().expect_err("no GPU to select");
            assert!(
                matches!(err, BackendError::MoreDevicesThanExist { .. }),
                "{err}"
            );
        }
        Err(driver) => {
            assert!(
                matches!(&driver, BackendError::Cuda { device, .. } if device == "driver"),
                "{driver:?}"
            );
            let err = Resources::gpu(1).select().expect_err("no driver");
            assert!(
                matches!(err, BackendError::NoDevices { kind: "gpu", .. }),
                "{err}"
            );
            // `Auto` falls back to simulated devices.
            let devices = Resources::cpu(2)
                .with_kind(KindRequest::Auto)
                .select()
                .expect("auto falls back to the host");
            assert!(devices.iter().all(|d| d.kind() == DeviceKind::Host));
        }
    }
}

#[test]
fn gpu_ranks_share_the_host_cores_and_auto_keeps_host_only_work_on_the_host() {
    let Some(devices) = gpus(DeviceRequest::Ordinals(vec![0, 0])) else {
        return;
    };
    // Two ranks on one GPU split the cores for their host-side work, like two simulated
    // devices would: a GPU rank no longer runs its host code on one thread.
    let cores = tutti_backend::system::host_cores();
    let threads: usize = devices.iter().map(Device::threads).sum();
    assert_eq!(threads, cores.max(devices.len()), "{devices:?}");
    let host_only = Resources::default()
        .select_for(GpuUse::HostOnly)
        .expect("auto for host-only work");
    assert!(host_only.iter().all(|d| d.kind() == DeviceKind::Host));
    let kernels = Resources::default().select().expect("auto for GPU kernels");
    assert!(kernels.iter().all(|d| d.kind() == DeviceKind::Cuda));
}

#[test]
fn f64_upload_download_round_trip() {
    let Some(device) = gpu() else { return };
    assert_eq!(device.kind(), DeviceKind::Cuda);
    assert_eq!(device.to_string(), "gpu:0");
    for n in [1, 7, 4096, 1 << 20] {
        let data = sample_f64(n);
        let buffer = device.upload(&data).expect("upload");
        assert_eq!(buffer.len(), n);
        assert!(buffer.as_host_slice().is_none());
        let back = buffer.to_host_vec().expect("download");
        assert_eq!(back, data, "n = {n}");
    }
    // Bit patterns survive, NaN and signed zero included.
    let special = [f64::NAN, -0.0, f64::INFINITY, f64::MIN_POSITIVE, f64::MAX];
    let back = device
        .upload(&special)
        .and_then(|b| b.to_host_vec())
        .expect("round trip");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&back), bits(&special));
}

#[test]
fn complex_round_trip_and_overwrite() {
    let Some(device) = gpu() else { return };
    let data = sample_complex(10_001);
    let mut buffer = device.upload(&data).expect("upload");
    assert_eq!(buffer.to_host_vec().expect("download"), data);
    let other: Vec<Complex64> = data.iter().map(|z| z.conj() * 2.0).collect();
    buffer.copy_from_host(&other).expect("overwrite");
    let mut out = vec![Complex64::new(0.0, 0.0); other.len()];
    buffer.copy_to_host(&mut out).expect("download");
    assert_eq!(out, other);
    // Wrong lengths are errors, not panics.
    let err = buffer
        .copy_from_host(&other[1..])
        .expect_err("length mismatch");
    assert!(matches!(err, BackendError::LengthMismatch { .. }), "{err}");
}

#[test]
fn alloc_zeros_is_zero_and_empty_buffers_work() {
    let Some(device) = gpu() else { return };
    let zeros = device.alloc_zeros::<f64>(100_003).expect("alloc");
    assert!(zeros
        .to_host_vec()
        .expect("download")
        .iter()
        .all(|&x| x == 0.0));
    let zeros = device.alloc_zeros::<Complex64>(513).expect("alloc");
    assert!(zeros
        .to_host_vec()
        .expect("download")
        .iter()
        .all(|z| z.re == 0.0 && z.im == 0.0));
    let empty = device.alloc_zeros::<f64>(0).expect("empty alloc");
    assert!(empty.is_empty());
    assert!(empty.to_host_vec().expect("empty download").is_empty());
    let mut empty2 = device.upload::<f64>(&[]).expect("empty upload");
    assert_eq!(
        empty.copy_to(&mut empty2).expect("empty copy"),
        CopyRoute::Direct
    );
}

#[test]
fn copy_between_two_ranks_on_one_gpu() {
    let Some(devices) = gpus(DeviceRequest::Ordinals(vec![0, 0])) else {
        return;
    };
    let (a, b) = (&devices[0], &devices[1]);
    assert_eq!((a.index(), b.index()), (0, 1));
    assert!(a.same_physical_device(b));
    let data = sample_f64(65_537);
    let source = a.upload(&data).expect("upload on rank 0");
    let mut dest = b.alloc_zeros::<f64>(data.len()).expect("alloc on rank 1");
    assert_eq!(source.copy_to(&mut dest).expect("copy"), CopyRoute::Direct);
    assert_eq!(dest.to_host_vec().expect("download"), data);
    let back = dest.clone_to(a).expect("clone back");
    assert_eq!(back.to_host_vec().expect("download"), data);

    // Each rank on its own thread, as a group runs them: rank 1 orders its copy after rank
    // 0's upload through an event.
    let data = sample_complex(4099);
    let received = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = &data;
        scope.spawn(move || {
            let buffer = a.upload(sent).expect("upload on rank 0");
            let event = a.record_event().expect("record");
            tx.send((buffer, event)).expect("send");
        });
        let rank1 = scope.spawn(move || {
            let (buffer, event) = rx.recv().expect("receive");
            b.wait_event(&event).expect("wait");
            let copy = buffer.clone_to(b).expect("copy on rank 1");
            copy.to_host_vec().expect("download")
        });
        rank1.join().expect("rank 1")
    });
    assert_eq!(received, data);
}

#[test]
fn copy_between_gpu_and_simulated_device_goes_via_host() {
    let Some(device) = gpu() else { return };
    let host = Resources::cpu(1).select().expect("cpu device").remove(0);
    let data = sample_complex(3001);
    let on_gpu = device.upload(&data).expect("upload");
    let mut on_host = host
        .alloc_zeros::<Complex64>(data.len())
        .expect("host alloc");
    assert_eq!(
        on_gpu.copy_to(&mut on_host).expect("gpu -> host"),
        CopyRoute::ViaHost
    );
    assert_eq!(on_host.as_host_slice().expect("host memory"), &data[..]);

    let doubled: Vec<Complex64> = data.iter().map(|z| z * 2.0).collect();
    let from_host = host.upload(&doubled).expect("host upload");
    let mut on_gpu = device.alloc_zeros::<Complex64>(data.len()).expect("alloc");
    assert_eq!(
        from_host.copy_to(&mut on_gpu).expect("host -> gpu"),
        CopyRoute::ViaHost
    );
    assert_eq!(on_gpu.to_host_vec().expect("download"), doubled);
}

#[test]
fn events_order_work_between_two_streams() {
    let Some(device) = gpu() else { return };
    let first = device.new_stream().expect("stream 1");
    let second = device.new_stream().expect("stream 2");
    assert_eq!(first.device().to_string(), "gpu:0");

    let data = sample_f64(1 << 22);
    let buffer = device.upload(&data).expect("upload");
    let uploaded = device.record_event().expect("record on the default stream");
    first.wait_event(&uploaded).expect("stream 1 waits");
    let after_first = first.record_event().expect("record on stream 1");
    second.wait_event(&after_first).expect("stream 2 waits");
    let after_second = second.record_event().expect("record on stream 2");
    after_second.synchronize().expect("synchronize");
    // The chain completed, so everything it waited for did.
    assert!(after_second.is_complete().expect("query"));
    assert!(after_first.is_complete().expect("query"));
    assert!(uploaded.is_complete().expect("query"));
    first.synchronize().expect("stream 1");
    second.synchronize().expect("stream 2");
    device.synchronize().expect("device");
    device
        .default_stream()
        .synchronize()
        .expect("default stream");
    assert_eq!(buffer.to_host_vec().expect("download"), data);

    // A host stream waiting for a GPU event blocks until it completes.
    let host = Resources::cpu(1).select().expect("cpu device").remove(0);
    let event = device.record_event().expect("record");
    host.wait_event(&event).expect("host waits for the GPU");
    assert!(event.is_complete().expect("query"));
}

#[test]
fn memory_info_is_sane_and_caps_apply() {
    let Some(device) = gpu() else { return };
    let info = device.memory_info().expect("memory info");
    assert!(info.total > 0);
    assert!(info.free > 0 && info.free <= info.total, "{info:?}");
    assert_eq!(
        device.physical_memory().expect("physical").total,
        info.total
    );
    let listed = device.info().expect("info");
    assert!(!listed.name.is_empty());
    println!("{}: {} ({:?})", device, listed.name, info);

    let cap = (info.total / 2).max(1 << 20);
    let capped = Resources::gpu(1)
        .with_device_memory_cap(cap)
        .select()
        .expect("capped selection")
        .remove(0);
    let before = capped.memory_info().expect("memory info");
    assert_eq!(before.total, cap);
    assert!(before.free <= cap);
    let held = capped
        .alloc_zeros::<u8>(1 << 20)
        .expect("alloc under the cap");
    let after = capped.memory_info().expect("memory info");
    assert!(after.free <= cap - (1 << 20), "{after:?}");
    drop(held);

    let small = Resources::gpu(1)
        .with_device_memory_cap(1 << 20)
        .select()
        .expect("small cap")
        .remove(0);
    let err = small.alloc_zeros::<f64>(1 << 20).expect_err("over the cap");
    assert!(matches!(err, BackendError::OutOfMemory { .. }), "{err}");
}

#[test]
fn an_allocation_larger_than_the_gpu_is_out_of_memory() {
    let Some(device) = gpu() else { return };
    let total = device.memory_info().expect("memory info").total;
    let len = usize::try_from(total + (1 << 30)).expect("fits in usize");
    let err = device.alloc_zeros::<u8>(len).expect_err("too large");
    assert!(matches!(err, BackendError::OutOfMemory { .. }), "{err}");
    // The device still works afterwards.
    let back = device.upload(&[1.0_f64, 2.0]).and_then(|b| b.to_host_vec());
    assert_eq!(back.expect("round trip"), vec![1.0, 2.0]);
}

#[test]
fn peer_matrix_diagonal_is_true() {
    let Some(devices) = gpus(DeviceRequest::All) else {
        return;
    };
    let matrix = peer_access_matrix(&devices);
    for (i, row) in matrix.iter().enumerate() {
        assert!(row[i], "device {i} must reach itself");
    }
    let enabled = enable_peer_access(&devices).expect("enable peer access");
    for (i, row) in enabled.iter().enumerate() {
        assert!(row[i]);
    }
    // Enabling twice is not an error.
    assert_eq!(enable_peer_access(&devices).expect("again"), enabled);
    println!("peer access: {enabled:?}");

    // Two ranks on one GPU reach each other.
    if let Some(shared) = gpus(DeviceRequest::Ordinals(vec![0, 0])) {
        assert!(peer_access_matrix(&shared).iter().flatten().all(|&x| x));
    }

    // Between two GPUs the copy takes the peer route where the driver allows it.
    if devices.len() >= 2 {
        let data = sample_f64(10_000);
        let source = devices[0].upload(&data).expect("upload");
        let mut dest = devices[1].alloc_zeros::<f64>(data.len()).expect("alloc");
        let route = source.copy_to(&mut dest).expect("copy");
        let expected = if matrix[1][0] {
            CopyRoute::Peer
        } else {
            CopyRoute::ViaHost
        };
        assert_eq!(route, expected);
        assert_eq!(dest.to_host_vec().expect("download"), data);
    }
}

#[test]
fn a_cap_larger_than_the_gpu_is_refused() {
    let Some(device) = gpu() else { return };
    let total = device.physical_memory().expect("memory").total;
    let err = Resources::gpu(1)
        .with_device_memory_cap(total + 1)
        .select()
        .expect_err("cap too large");
    match err {
        BackendError::CapExceedsDevice {
            cap,
            total: reported,
            device,
            ..
        } => {
            assert_eq!(cap, total + 1);
            assert_eq!(reported, total);
            assert_eq!(device, "gpu:0");
        }
        other => panic!("expected CapExceedsDevice, got {other}"),
    }
}

#[test]
fn an_ordinal_past_the_last_gpu_is_unknown() {
    if gpu().is_none() {
        return;
    }
    let count = gpu_count().expect("count");
    let err = Resources::gpu(1)
        .with_devices(DeviceRequest::Ordinals(vec![0, count]))
        .select()
        .expect_err("unknown ordinal");
    match err {
        BackendError::UnknownOrdinal {
            ordinal,
            count: reported,
            kind,
        } => {
            assert_eq!((ordinal, reported, kind), (count, count, "gpu"));
        }
        other => panic!("expected UnknownOrdinal, got {other}"),
    }
    let err = Resources::gpu(count + 1).select().expect_err("too many");
    assert!(
        matches!(err, BackendError::MoreDevicesThanExist { .. }),
        "{err}"
    );
}

/// `C = op(A) op(B)` on the GPU against the same call on a simulated device, f64 and complex,
/// one product and a strided batch: cuBLAS and faer sum in different orders, so they agree to
/// rounding, not bitwise.
#[test]
fn cublas_gemm_matches_the_host_gemm() {
    use tutti_backend::{Gemm, Op};
    let Some(gpu) = gpu() else { return };
    let host = Resources::cpu(1).select().expect("cpu device").remove(0);
    let (m, n, k, count) = (33, 17, 29, 3);
    let gemm = Gemm::<f64>::new(m, n, k)
        .with_a(Op::T, 2, k + 1)
        .with_c(1, m)
        .strided(count, (k + 1) * m + 5, k * n, m * n)
        .with_scaling(0.5, -1.25);
    let a = sample_f64(2 + (count - 1) * ((k + 1) * m + 5) + (k + 1) * m);
    let b = sample_f64(count * k * n);
    let c = sample_f64(1 + count * m * n);
    let run = |device: &Device| {
        let (da, db) = (device.upload(&a).expect("A"), device.upload(&b).expect("B"));
        let mut dc = device.upload(&c).expect("C");
        device.gemm(&gemm, &da, &db, &mut dc).expect("gemm");
        dc.to_host_vec().expect("download")
    };
    let (on_gpu, on_host) = (run(&gpu), run(&host));
    let diff = on_gpu
        .iter()
        .zip(&on_host)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    let scale = on_host.iter().fold(1.0_f64, |s, x| s.max(x.abs()));
    assert!(
        diff <= 1e-13 * scale,
        "f64 gemm: GPU and host differ by {diff:e}"
    );

    let z = Gemm::<Complex64>::new(m, n, k)
        .with_a(Op::C, 0, k)
        .with_b(Op::T, 0, n)
        .with_scaling(Complex64::new(0.0, 1.0), Complex64::new(0.0, 0.0));
    let za = sample_complex(k * m);
    let zb = sample_complex(n * k);
    let zrun = |device: &Device| {
        let (da, db) = (
            device.upload(&za).expect("A"),
            device.upload(&zb).expect("B"),
        );
        let mut dc = device.alloc_zeros::<Complex64>(m * n).expect("C");
        device.gemm(&z, &da, &db, &mut dc).expect("gemm");
        dc.to_host_vec().expect("download")
    };
    let (on_gpu, on_host) = (zrun(&gpu), zrun(&host));
    let diff = on_gpu
        .iter()
        .zip(&on_host)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max);
    let scale = on_host.iter().fold(1.0_f64, |s, x| s.max(x.norm()));
    assert!(
        diff <= 1e-13 * scale,
        "complex gemm: GPU and host differ by {diff:e}"
    );
}

/// cuSOLVER's thin Q against faer's: equal up to the sign (phase) of each column, so the
/// projectors `Q Q^H` agree.
#[test]
fn cusolver_thin_q_spans_what_the_host_q_spans() {
    let Some(gpu) = gpu() else { return };
    let host = Resources::cpu(1).select().expect("cpu device").remove(0);
    let (m, n) = (120, 24);
    let a = sample_f64(m * n);
    let q_of = |device: &Device| {
        let mut buffer = device.upload(&a).expect("A");
        device.qr_q(&mut buffer, m, n, m).expect("qr_q");
        buffer.to_host_vec().expect("download")
    };
    let (qg, qh) = (q_of(&gpu), q_of(&host));
    let mut worst = 0.0_f64;
    for j in 0..n {
        let dot: f64 = (0..m).map(|r| qg[r + j * m] * qh[r + j * m]).sum();
        // Columns equal up to a sign: |<q_gpu, q_host>| = 1.
        worst = worst.max((dot.abs() - 1.0).abs());
    }
    assert!(
        worst < 1e-12,
        "columns of the two Q differ beyond sign: {worst:e}"
    );
    let za = sample_complex(m * n);
    let zq = |device: &Device| {
        let mut buffer = device.upload(&za).expect("A");
        device.qr_q(&mut buffer, m, n, m).expect("qr_q");
        buffer.to_host_vec().expect("download")
    };
    let (qg, qh) = (zq(&gpu), zq(&host));
    let mut worst = 0.0_f64;
    for j in 0..n {
        let dot: Complex64 = (0..m).map(|r| qg[r + j * m].conj() * qh[r + j * m]).sum();
        worst = worst.max((dot.norm() - 1.0).abs());
    }
    assert!(
        worst < 1e-12,
        "complex columns differ beyond phase: {worst:e}"
    );
}
