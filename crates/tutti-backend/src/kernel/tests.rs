//! Kernel launches on simulated devices: the twins against plain loops, bit for bit, and the
//! launch checks.

use num_complex::Complex64;

use super::builtin::{self, axpy, permute_bac, MODULE};
use super::*;
use crate::Resources;

fn device() -> Device {
    Resources::cpu(1)
        .select()
        .expect("a simulated device")
        .remove(0)
}

/// Deterministic, irregular values (no zeros, no round numbers), so a wrong index shows.
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1_u64 << 53) as f64 * 2.0 - 0.999
        })
        .collect()
}

fn plain_permute<T: Copy>(x: &[T], [a, b, c]: [usize; 3]) -> Vec<T> {
    let mut y = Vec::with_capacity(x.len());
    for j in 0..b {
        for i in 0..a {
            for k in 0..c {
                y.push(x[(i * b + j) * c + k]);
            }
        }
    }
    y
}

const SHAPES: [[usize; 3]; 8] = [
    [1, 1, 1],
    [3, 5, 7],
    [4, 1, 9],
    [1, 6, 2],
    [17, 33, 1],
    [2, 3, 4096],
    [64, 48, 3],
    [5, 0, 3],
];

#[test]
fn permute_bac_twin_equals_the_plain_loop_bitwise() {
    let device = device();
    for (s, shape) in SHAPES.into_iter().enumerate() {
        let n = shape.iter().product();
        let data = values(n, s as u64 + 1);
        let x = device.upload(&data).expect("upload");
        let mut y = device.alloc_zeros::<f64>(n).expect("alloc");
        permute_bac(&x, &mut y, shape).expect("permute f64");
        let got = y.to_host_vec().expect("download");
        let want = plain_permute(&data, shape);
        assert_eq!(got.len(), want.len());
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "f64 shape {shape:?}"
        );

        let complex: Vec<Complex64> = data
            .iter()
            .zip(values(n, s as u64 + 100))
            .map(|(&re, im)| Complex64::new(re, im))
            .collect();
        let x = device.upload(&complex).expect("upload");
        let mut y = device.alloc_zeros::<Complex64>(n).expect("alloc");
        permute_bac(&x, &mut y, shape).expect("permute c64");
        let got = y.to_host_vec().expect("download");
        let want = plain_permute(&complex, shape);
        assert!(
            got.iter()
                .zip(&want)
                .all(|(g, w)| g.re.to_bits() == w.re.to_bits() && g.im.to_bits() == w.im.to_bits()),
            "c64 shape {shape:?}"
        );
        if n > 1 && shape[0] > 1 && shape[1] > 1 {
            assert_ne!(got, complex, "a real swap moves elements, shape {shape:?}");
        }
    }
}

#[test]
fn permute_bac_on_several_devices_gives_the_same_bits() {
    let shape = [7, 11, 13];
    let data = values(7 * 11 * 13, 42);
    let want = plain_permute(&data, shape);
    for count in 1..=4 {
        for device in Resources::cpu(count).select().expect("devices") {
            let x = device.upload(&data).expect("upload");
            let mut y = device.alloc_zeros::<f64>(data.len()).expect("alloc");
            permute_bac(&x, &mut y, shape).expect("permute");
            assert_eq!(y.to_host_vec().expect("download"), want);
        }
    }
}

#[test]
fn axpy_twin_equals_multiply_then_add_bitwise() {
    let device = device();
    let n = 50_000;
    let (x, y0) = (values(n, 7), values(n, 8));
    let alpha = 1.0 / 3.0;
    let xb = device.upload(&x).expect("upload");
    let mut yb = device.upload(&y0).expect("upload");
    axpy(alpha, &xb, &mut yb).expect("axpy");
    let got = yb.to_host_vec().expect("download");
    let want: Vec<f64> = x.iter().zip(&y0).map(|(x, y)| alpha * x + y).collect();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(g, w)| g.to_bits() == w.to_bits()));
    // With these inputs a fused multiply-add rounds differently somewhere: the check above
    // really pins "product, then sum".
    let fused = x
        .iter()
        .zip(&y0)
        .filter(|(x, y)| alpha.mul_add(**x, **y) != alpha * **x + **y);
    assert!(fused.count() > 1000);
}

#[test]
fn threads_beyond_the_grid_write_nothing() {
    // 1000 elements, a grid of 2 blocks of 256 threads: as on a GPU, only 512 are written.
    let device = device();
    let x = device.upload(&values(1000, 3)).expect("upload");
    let mut y = device.alloc_zeros::<f64>(1000).expect("alloc");
    let dims = LaunchDims {
        grid: [2, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
    };
    device
        .launch(
            &MODULE,
            "tt_permute_bac_f64",
            dims,
            &mut [
                Arg::input(&x),
                Arg::output(&mut y),
                Arg::u32(1),
                Arg::u32(1),
                Arg::u32(1000),
            ],
        )
        .expect("launch");
    let got = y.to_host_vec().expect("download");
    let want = x.to_host_vec().expect("download");
    assert_eq!(&got[..512], &want[..512]);
    assert!(got[512..].iter().all(|&v| v == 0.0));
}

fn launch_error(device: &Device, entry: &str, dims: LaunchDims, args: &mut [Arg<'_>]) -> String {
    match device.launch(&MODULE, entry, dims, args) {
        Err(err @ BackendError::Kernel { .. }) => err.to_string(),
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

#[test]
fn launches_that_do_not_match_the_entry_are_refused() {
    let device = device();
    let x = device.upload(&[1.0_f64, 2.0]).expect("upload");
    let mut y = device.alloc_zeros::<f64>(2).expect("alloc");
    let mut wrong = device.alloc_zeros::<f32>(2).expect("alloc");
    let dims = LaunchDims::linear(2, 256).expect("dims");
    let entry = "tt_axpy_f64";

    let message = launch_error(&device, entry, dims, &mut [Arg::u64(2), Arg::f64(1.0)]);
    assert!(message.contains("tutti_backend::tt_axpy_f64"), "{message}");
    assert!(
        message.contains("2 arguments given, the entry takes 4"),
        "{message}"
    );

    let message = launch_error(
        &device,
        entry,
        dims,
        &mut [
            Arg::u64(2),
            Arg::f64(1.0),
            Arg::input(&x),
            Arg::output(&mut wrong),
        ],
    );
    assert!(
        message.contains("parameter 3: expected an in-out f64 buffer, got a writable f32 buffer"),
        "{message}"
    );

    let message = launch_error(
        &device,
        entry,
        dims,
        &mut [
            Arg::u32(2),
            Arg::f64(1.0),
            Arg::input(&x),
            Arg::output(&mut y),
        ],
    );
    assert!(
        message.contains("parameter 0: expected u64, got u32"),
        "{message}"
    );

    // A read-only buffer where the kernel writes.
    let message = launch_error(
        &device,
        entry,
        dims,
        &mut [Arg::u64(2), Arg::f64(1.0), Arg::input(&x), Arg::input(&x)],
    );
    assert!(message.contains("parameter 3"), "{message}");

    let message = launch_error(&device, "tt_nothing", dims, &mut []);
    assert!(message.contains("no such entry point"), "{message}");
    assert!(message.contains("tt_permute_bac_f64"), "{message}");
    assert_eq!(
        y.to_host_vec().expect("download"),
        [0.0, 0.0],
        "nothing ran"
    );
}

#[test]
fn launch_dimensions_beyond_cuda_limits_are_refused() {
    let device = device();
    let x = device.upload(&[1.0_f64; 4]).expect("upload");
    let mut y = device.alloc_zeros::<f64>(4).expect("alloc");
    let cases: [(LaunchDims, &str); 6] = [
        (
            LaunchDims {
                grid: [1, 1, 1],
                block: [1025, 1, 1],
                shared_bytes: 0,
            },
            "1025 threads",
        ),
        (
            LaunchDims {
                grid: [1, 1, 1],
                block: [32, 32, 2],
                shared_bytes: 0,
            },
            "2048 threads",
        ),
        (
            LaunchDims {
                grid: [1, 65536, 1],
                block: [1, 1, 1],
                shared_bytes: 0,
            },
            "too large",
        ),
        (
            LaunchDims {
                grid: [1, 1, 70000],
                block: [1, 1, 1],
                shared_bytes: 0,
            },
            "too large",
        ),
        (
            LaunchDims {
                grid: [0, 1, 1],
                block: [4, 1, 1],
                shared_bytes: 0,
            },
            "zero launch dimension",
        ),
        (
            LaunchDims {
                grid: [1, 1, 1],
                block: [4, 1, 1],
                shared_bytes: 64 * 1024,
            },
            "shared memory",
        ),
    ];
    for (dims, expected) in cases {
        let message = launch_error(
            &device,
            "tt_axpy_f64",
            dims,
            &mut [
                Arg::u64(4),
                Arg::f64(1.0),
                Arg::input(&x),
                Arg::output(&mut y),
            ],
        );
        assert!(message.contains(expected), "{dims:?}: {message}");
    }
    assert!(LaunchDims::linear(10, 0).is_err());
    assert!(LaunchDims::linear(10, 1025).is_err());
    assert!(LaunchDims::linear(u64::MAX, 1).is_err());
    assert_eq!(LaunchDims::linear(0, 256).expect("dims").grid, [1, 1, 1]);
    assert_eq!(LaunchDims::linear(257, 256).expect("dims").grid, [2, 1, 1]);
}

#[test]
fn buffers_on_another_device_are_refused() {
    let devices = Resources::cpu(2).select().expect("devices");
    let x = devices[1].upload(&[1.0_f64; 3]).expect("upload");
    let mut y = devices[0].alloc_zeros::<f64>(3).expect("alloc");
    let message = launch_error(
        &devices[0],
        "tt_axpy_f64",
        LaunchDims::linear(3, 256).expect("dims"),
        &mut [
            Arg::u64(3),
            Arg::f64(1.0),
            Arg::input(&x),
            Arg::output(&mut y),
        ],
    );
    assert!(
        message.contains("parameter 2 (an in f64 buffer) lives on cpu:1"),
        "{message}"
    );
    assert!(message.contains("the launch is on cpu:0"), "{message}");
}

#[test]
fn a_kernel_told_to_run_out_of_bounds_is_an_error_on_the_host() {
    let device = device();
    let x = device.upload(&[1.0_f64; 3]).expect("upload");
    let mut y = device.alloc_zeros::<f64>(3).expect("alloc");
    let message = launch_error(
        &device,
        "tt_axpy_f64",
        LaunchDims::linear(4, 256).expect("dims"),
        &mut [
            Arg::u64(4),
            Arg::f64(1.0),
            Arg::input(&x),
            Arg::output(&mut y),
        ],
    );
    assert!(message.contains("out of bounds"), "{message}");
}

#[test]
fn shape_errors_of_the_helpers_name_the_buffer() {
    let device = device();
    let x = device.upload(&[1.0_f64; 6]).expect("upload");
    let mut y = device.alloc_zeros::<f64>(5).expect("alloc");
    let err = permute_bac(&x, &mut y, [1, 2, 3]).expect_err("short y");
    assert!(err.to_string().contains("y has 5 elements"), "{err}");
    let err = permute_bac(&x, &mut y, [1 << 33, 1, 0]).expect_err("huge extent");
    assert!(err.to_string().contains("at most"), "{err}");
    let err = axpy(1.0, &x, &mut y).expect_err("lengths");
    assert!(matches!(err, BackendError::LengthMismatch { .. }), "{err}");
}

fn panicking_twin(_: &HostLaunch<'_>, mut args: HostArgs<'_>) -> Result<(), BackendError> {
    let y = args.output::<u32>(0)?;
    y[usize::MAX / 2] = 1; // out of bounds: a bug a GPU would not report
    Ok(())
}

fn twice_taking_twin(_: &HostLaunch<'_>, mut args: HostArgs<'_>) -> Result<(), BackendError> {
    args.output::<u32>(0)?;
    args.output::<u32>(0)?;
    Ok(())
}

static BROKEN: KernelModule = KernelModule {
    name: "tutti_test_broken",
    source: "extern \"C\" __global__ void tt_broken(unsigned* y) {}",
    fmad: false,
    entries: &[
        KernelEntry {
            name: "tt_broken",
            params: &[Param::Out(ElemKind::U32)],
            host: panicking_twin,
        },
        KernelEntry {
            name: "tt_twice",
            params: &[Param::Out(ElemKind::U32)],
            host: twice_taking_twin,
        },
    ],
};

#[test]
fn twin_failures_are_errors_not_panics() {
    let device = device();
    let mut y = device.alloc_zeros::<u32>(4).expect("alloc");
    let dims = LaunchDims::linear(4, 4).expect("dims");
    let err = device
        .launch(&BROKEN, "tt_broken", dims, &mut [Arg::output(&mut y)])
        .expect_err("panicking twin");
    assert!(err.to_string().contains("the host twin panicked"), "{err}");
    let err = device
        .launch(&BROKEN, "tt_twice", dims, &mut [Arg::output(&mut y)])
        .expect_err("taken twice");
    assert!(err.to_string().contains("taken already"), "{err}");
}

const SAMPLE_PTX: &str = "
.version 9.0
.target sm_90
.address_size 64

	// .globl	tt_permute_bac_f64
.visible .entry tt_permute_bac_f64(
	.param .u64 .ptr .align 1 tt_permute_bac_f64_param_0,
	.param .u64 .ptr .align 1 tt_permute_bac_f64_param_1,
	.param .u32 tt_permute_bac_f64_param_2,
	.param .u32 tt_permute_bac_f64_param_3,
	.param .u32 tt_permute_bac_f64_param_4
)
{
	ret;
}
.visible .entry tt_permute_bac_c64(
	.param .u64 tt_permute_bac_c64_param_0,
	.param .u64 tt_permute_bac_c64_param_1,
	.param .u32 tt_permute_bac_c64_param_2,
	.param .u32 tt_permute_bac_c64_param_3,
	.param .u32 tt_permute_bac_c64_param_4
)
{
	ret;
}
.visible .entry tt_axpy_f64(
	.param .u64 tt_axpy_f64_param_0,
	.param .f64 tt_axpy_f64_param_1,
	.param .u64 tt_axpy_f64_param_2,
	.param .u64 tt_axpy_f64_param_3
)
{
	ret;
}
";

#[test]
fn ptx_signatures_are_read_and_checked() {
    let entries = ptx_entries(SAMPLE_PTX);
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0].name, "tt_permute_bac_f64");
    assert_eq!(entries[0].params, [".u64", ".u64", ".u32", ".u32", ".u32"]);
    assert_eq!(entries[2].params, [".u64", ".f64", ".u64", ".u64"]);
    check_ptx_signatures(&MODULE, SAMPLE_PTX).expect("matching signatures");

    let narrowed = SAMPLE_PTX.replace(".f64 tt_axpy_f64_param_1", ".f32 tt_axpy_f64_param_1");
    let err = check_ptx_signatures(&MODULE, &narrowed).expect_err("f32 for an f64");
    assert!(err
        .to_string()
        .contains("parameter 1 is described as f64 but compiled as .f32"));
    let shorter = SAMPLE_PTX.replace(",\n\t.param .u64 tt_axpy_f64_param_3", "");
    let err = check_ptx_signatures(&MODULE, &shorter).expect_err("missing parameter");
    assert!(err.to_string().contains("takes 3 parameters"), "{err}");
    let renamed = SAMPLE_PTX.replace("tt_axpy_f64(", "_Z11tt_axpy_f64ydPKdPd(");
    let err = check_ptx_signatures(&MODULE, &renamed).expect_err("mangled name");
    assert!(err.to_string().contains("no .entry of that name"), "{err}");
    assert!(ptx_entries(".visible .entry empty()\n{ ret; }")[0]
        .params
        .is_empty());
}

#[test]
fn every_builtin_entry_has_a_unique_name() {
    for module in builtin::modules() {
        let mut names: Vec<_> = module.entries.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), module.entries.len(), "{}", module.name);
        for entry in module.entries {
            assert!(
                module.source.contains(&format!("void {}(", entry.name)),
                "{}",
                entry.name
            );
        }
    }
}
