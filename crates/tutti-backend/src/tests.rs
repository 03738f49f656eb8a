//! Unit tests of selection, buffers and caps on simulated devices.

use crate::*;

#[test]
fn format_bytes_reads_naturally() {
    for (bytes, text) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1_048_575, "1.0 MiB"),
        (1_048_576, "1.0 MiB"),
        (12 * 1024 * 1024 * 1024, "12.0 GiB"),
    ] {
        assert_eq!(format_bytes(bytes), text);
    }
}

#[test]
fn cpu_selection_numbers_ranks_in_order() {
    let devices = Resources::cpu(3).select().expect("3 cpu devices");
    assert_eq!(devices.len(), 3);
    for (i, device) in devices.iter().enumerate() {
        assert_eq!(device.index(), i);
        assert_eq!(device.ordinal(), i);
        assert_eq!(device.kind(), DeviceKind::Host);
        assert_eq!(device.to_string(), format!("cpu:{i}"));
    }
}

#[test]
fn cores_are_split_among_simulated_devices() {
    let cores = system::host_cores();
    for n in 1..=5 {
        let devices = Resources::cpu(n).select().expect("select");
        let threads: usize = devices.iter().map(Device::threads).sum();
        // Every device gets at least one thread; together they use all cores when there are
        // at least as many cores as devices.
        assert!(devices.iter().all(|d| d.threads() >= 1));
        assert_eq!(threads, cores.max(n));
        let pool = devices[0].thread_pool().expect("pool");
        assert_eq!(pool.current_num_threads(), devices[0].threads());
    }
}

#[test]
fn bad_requests_are_clear_errors() {
    let err = Resources::cpu(0).select().expect_err("expected an error");
    assert!(matches!(err, BackendError::ZeroDevices), "{err}");
    let err = Resources::cpu(MAX_SIMULATED_DEVICES + 1)
        .select()
        .expect_err("expected an error");
    assert!(
        matches!(err, BackendError::MoreDevicesThanExist { requested, .. } if requested == MAX_SIMULATED_DEVICES + 1),
        "{err}"
    );
    let err = Resources::cpu(1)
        .with_devices(DeviceRequest::Ordinals(vec![0, 9999]))
        .select()
        .expect_err("expected an error");
    assert!(
        matches!(err, BackendError::UnknownOrdinal { ordinal: 9999, .. }),
        "{err}"
    );
    let err = Resources::cpu(1)
        .with_device_memory_cap(0)
        .select()
        .expect_err("expected an error");
    assert!(err.to_string().contains("device memory cap"), "{err}");
    let huge = u64::MAX / 2;
    let err = Resources::cpu(2)
        .with_device_memory_cap(huge)
        .select()
        .expect_err("expected an error");
    assert!(
        matches!(err, BackendError::CapExceedsDevice { cap, .. } if cap == huge),
        "{err}"
    );
    assert!(err.to_string().contains("exceeds device cpu:0"), "{err}");
    assert!(
        err.to_string().contains("2 simulated device(s) share"),
        "{err}"
    );
}

#[cfg(not(feature = "cuda"))]
#[test]
fn gpu_request_without_cuda_build_says_so() {
    let err = Resources::gpu(1).select().expect_err("expected an error");
    assert!(matches!(err, BackendError::CudaNotBuilt), "{err}");
    assert!(err.to_string().contains("feature `cuda`"));
    // Auto falls back to simulated devices.
    let devices = Resources::default().select().expect("auto");
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].kind(), DeviceKind::Host);
}

#[test]
fn kind_request_parses() {
    assert_eq!("CPU".parse::<KindRequest>(), Ok(KindRequest::Cpu));
    assert_eq!("gpu".parse::<KindRequest>(), Ok(KindRequest::Gpu));
    assert_eq!("auto".parse::<KindRequest>(), Ok(KindRequest::Auto));
    assert!("tpu"
        .parse::<KindRequest>()
        .expect_err("expected an error")
        .contains("tpu"));
}

#[test]
fn buffers_round_trip_and_copy_between_devices() {
    let devices = Resources::cpu(2).select().expect("select");
    let data: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5 - 3.0).collect();
    let a = devices[0].upload(&data).expect("upload");
    assert_eq!(a.len(), 1000);
    assert_eq!(a.to_host_vec().expect("download"), data);
    let mut b = devices[1].alloc_zeros::<f64>(1000).expect("alloc");
    assert!(b.to_host_vec().expect("download").iter().all(|&x| x == 0.0));
    assert_eq!(a.copy_to(&mut b).expect("copy"), CopyRoute::Direct);
    assert_eq!(b.as_host_slice().expect("host memory"), &data[..]);

    let complex = vec![Complex64::new(1.0, -2.0), Complex64::new(0.5, 4.0)];
    let c = devices[1].upload(&complex).expect("upload complex");
    assert_eq!(c.to_host_vec().expect("download"), complex);
}

#[test]
fn length_mismatches_are_errors() {
    let devices = Resources::cpu(1).select().expect("select");
    let a = devices[0].upload(&[1u32, 2, 3]).expect("upload");
    let mut b = devices[0].alloc_zeros::<u32>(2).expect("alloc");
    let err = a.copy_to(&mut b).expect_err("expected an error");
    assert!(
        matches!(
            err,
            BackendError::LengthMismatch {
                source_len: 3,
                dest_len: 2,
                ..
            }
        ),
        "{err}"
    );
    let mut out = [0u32; 4];
    assert!(a.copy_to_host(&mut out).is_err());
    assert!(b.copy_from_host(&[1, 2, 3]).is_err());
}

#[test]
fn memory_cap_bounds_allocations_and_is_released_on_drop() {
    let devices = Resources::cpu(1)
        .with_device_memory_cap(1 << 20)
        .select()
        .expect("select");
    let device = &devices[0];
    assert_eq!(device.memory_info().expect("info").total, 1 << 20);
    let half = device.alloc_zeros::<u8>(600 << 10).expect("fits");
    assert!(device.memory_info().expect("info").free <= 424 << 10);
    let err = device
        .alloc_zeros::<u8>(600 << 10)
        .expect_err("expected an error");
    match err {
        BackendError::OutOfMemory {
            requested, free, ..
        } => {
            assert_eq!(requested, 600 << 10);
            assert_eq!(free, 424 << 10);
        }
        other => panic!("expected OutOfMemory, got {other}"),
    }
    drop(half);
    assert_eq!(
        device.memory_info().expect("info").free.min(1 << 20),
        1 << 20
    );
    device
        .alloc_zeros::<u8>(600 << 10)
        .expect("fits again after drop");
}

#[test]
fn simulated_devices_have_full_peer_access_and_complete_events() {
    let devices = Resources::cpu(3).select().expect("select");
    let matrix = peer_access_matrix(&devices);
    assert_eq!(matrix, vec![vec![true; 3]; 3]);
    assert_eq!(enable_peer_access(&devices).expect("enable"), matrix);
    let event = devices[0].record_event().expect("record");
    devices[1].wait_event(&event).expect("wait");
    assert!(event.is_complete().expect("query"));
    let stream = devices[2].new_stream().expect("stream");
    stream.wait_event(&event).expect("wait");
    stream.synchronize().expect("sync");
    devices[2].synchronize().expect("sync");
}

#[test]
fn info_reports_memory_and_threads() {
    let devices = Resources::cpu(2).select().expect("select");
    let info = devices[1].info().expect("info");
    assert_eq!(info.index, 1);
    assert_eq!(info.kind, DeviceKind::Host);
    assert!(info.memory.total > 0 && info.memory.free <= info.memory.total);
    let host = system::host_memory().expect("host");
    assert_eq!(info.memory.total, host.total / 2);
}

#[test]
fn core_shares_are_even_and_cover_every_core() {
    use crate::resources::core_share;
    for cores in 1..=40 {
        for ranks in 1..=12 {
            let shares: Vec<usize> = (0..ranks).map(|i| core_share(cores, ranks, i)).collect();
            assert_eq!(
                shares.iter().sum::<usize>(),
                cores.max(ranks),
                "{cores} {ranks}"
            );
            let (low, high) = (shares.iter().min(), shares.iter().max());
            assert!(high.zip(low).is_some_and(|(h, l)| h - l <= 1), "{shares:?}");
        }
    }
}

#[test]
fn auto_picks_the_host_for_host_only_work_whatever_the_node_has() {
    use crate::GpuUse;
    assert_eq!(
        Resources::default().kind_for(GpuUse::HostOnly),
        DeviceKind::Host
    );
    assert_eq!(
        Resources::cpu(2).kind_for(GpuUse::Kernels),
        DeviceKind::Host
    );
    // An explicit GPU request is honoured (or refused) whatever the computation can do.
    assert_eq!(
        Resources::gpu(1).kind_for(GpuUse::HostOnly),
        DeviceKind::Cuda
    );
    let devices = Resources::default()
        .select_for(GpuUse::HostOnly)
        .expect("auto");
    assert!(devices.iter().all(|d| d.kind() == DeviceKind::Host));
}

#[test]
fn a_host_core_cap_is_shared_by_the_devices() {
    let threads = |resources: Resources| -> Vec<usize> {
        resources
            .select()
            .expect("simulated devices")
            .iter()
            .map(Device::threads)
            .collect()
    };
    let all = crate::system::host_cores();
    assert_eq!(threads(Resources::cpu(1)), vec![all]);
    assert_eq!(threads(Resources::cpu(1).with_host_cores(1)), vec![1]);
    // Fewer cores than devices: one thread each, as without a cap.
    assert_eq!(threads(Resources::cpu(3).with_host_cores(1)), vec![1, 1, 1]);
    // A cap above the machine is the machine; zero is one core.
    assert_eq!(
        threads(Resources::cpu(1).with_host_cores(usize::MAX)),
        vec![all]
    );
    assert_eq!(threads(Resources::cpu(1).with_host_cores(0)), vec![1]);
}
