//! The sparse factorization handle across "processes", called as C would: threads of this
//! test stand in for an MPI job's processes, each with its own world over a loopback wire
//! (`tutti::world::loopback_worlds`), so no MPI launch is needed. Every "process" analyses,
//! factors and solves collectively; the solution is bitwise that of as many devices in one
//! process; a check that fails in one process only fails it with its own status and the
//! others with `TUTTI_ERROR_REMOTE`, without anyone waiting forever (a hang fails the test).
//! Needs the `mpi` feature (the loopback lives in tutti-mpi, an optional dependency):
//! `cargo test -p tutti-capi --features mpi --test sparse_world`.
#![cfg(feature = "mpi")]

use std::ffi::c_int;
use std::ptr;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use tutti::boundary::last_error;
use tutti::world::{loopback_worlds, LoopbackWorld};
use tutti::{
    tutti_sparse_analyse, tutti_sparse_factor, tutti_sparse_factor_c128, tutti_sparse_free,
    tutti_sparse_info, tutti_sparse_options_default, tutti_sparse_solve, tutti_sparse_solve_c128,
    TuttiDtype, TuttiKind, TuttiSparse, TuttiSparseInfo, TuttiSparseOptions, TuttiStatus,
    TuttiWorld,
};
use tutti_sparse::models::{convection_diffusion, helmholtz};
use tutti_sparse::{c64, CsrMatrix, Scalar};

const OK: c_int = TuttiStatus::TUTTI_OK as c_int;
const INVALID: c_int = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int;
const REMOTE: c_int = TuttiStatus::TUTTI_ERROR_REMOTE as c_int;
const OUT_OF_MEMORY: c_int = TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY as c_int;

/// A receive on the loopback that waits longer than this fails.
const WIRE_TIMEOUT: Duration = Duration::from_secs(30);
/// A scenario that takes longer than this has hung.
const HANG_LIMIT: Duration = Duration::from_secs(120);

/// Runs `work(rank, world)` on `size` threads standing in for processes, each with its own
/// loopback world; returns their values in rank order. Fails when one panics or when they
/// have not all returned within [`HANG_LIMIT`].
fn on_processes<R, F>(size: usize, work: F) -> Vec<R>
where
    R: Send + 'static,
    F: Fn(usize, LoopbackWorld) -> R + Send + Sync + 'static,
{
    let work = Arc::new(work);
    let (sender, receiver) = mpsc::channel();
    for (rank, world) in loopback_worlds(size, WIRE_TIMEOUT).into_iter().enumerate() {
        let (work, sender) = (Arc::clone(&work), sender.clone());
        std::thread::spawn(move || {
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(rank, world)));
            let _ = sender.send((rank, outcome));
        });
    }
    drop(sender);
    let mut values: Vec<Option<R>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let (rank, outcome) = receiver
            .recv_timeout(HANG_LIMIT)
            .expect("every process returns: none hangs");
        match outcome {
            Ok(value) => values[rank] = Some(value),
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }
    values.into_iter().flatten().collect()
}

/// Default options for values of `T` on `devices` simulated devices per process, over
/// `world` (NULL: this process alone).
fn options<T: Scalar>(devices: c_int, world: *const TuttiWorld) -> TuttiSparseOptions {
    let mut options = TuttiSparseOptions::default();
    // SAFETY: a valid, writable options struct.
    assert_eq!(unsafe { tutti_sparse_options_default(&mut options) }, OK);
    options.resources.kind = TuttiKind::TUTTI_KIND_CPU as c_int;
    options.resources.devices = devices;
    options.resources.world = world;
    options.dtype = if T::PACKED == 1 {
        TuttiDtype::TUTTI_DTYPE_FLOAT64
    } else {
        TuttiDtype::TUTTI_DTYPE_COMPLEX128
    } as c_int;
    options
}

/// Analyses the CSR arrays of `a`, or the failing status and message.
fn analyse<T: Scalar>(
    a: &CsrMatrix<T>,
    options: &TuttiSparseOptions,
) -> Result<*mut TuttiSparse, (c_int, String)> {
    let shift = |v: &[usize]| v.iter().map(|&i| i as i64).collect::<Vec<_>>();
    let (pointers, indices) = (shift(a.indptr()), shift(a.indices()));
    let mut handle = ptr::null_mut();
    // SAFETY: arrays of the lengths the pointers claim (n + 1, and the entries).
    let status = unsafe {
        tutti_sparse_analyse(
            a.rows() as i64,
            pointers.as_ptr(),
            indices.as_ptr(),
            options,
            &mut handle,
        )
    };
    if status == OK {
        Ok(handle)
    } else {
        assert!(handle.is_null(), "no handle on failure");
        Err((status, last_error()))
    }
}

/// Factors with `values` (of `T`: the real or the complex entry point).
fn factor<T: Scalar>(handle: *mut TuttiSparse, values: &[T]) -> c_int {
    let mut packed = Vec::new();
    T::pack(values, &mut packed);
    let nnz = values.len() as i64;
    // SAFETY: a live handle and `values.len() * T::PACKED` readable doubles.
    unsafe {
        if T::PACKED == 1 {
            tutti_sparse_factor(handle, packed.as_ptr(), nnz)
        } else {
            tutti_sparse_factor_c128(handle, packed.as_ptr(), nnz)
        }
    }
}

/// Solves in place for the `rhs` right-hand sides of `b` (of `T`).
fn solve<T: Scalar>(handle: *mut TuttiSparse, b: &mut [T], rhs: i64) -> c_int {
    let mut packed = Vec::new();
    T::pack(b, &mut packed);
    // SAFETY: a live handle, `packed` holding n * rhs * T::PACKED doubles, no info.
    let status = unsafe {
        if T::PACKED == 1 {
            tutti_sparse_solve(handle, packed.as_mut_ptr(), rhs, ptr::null_mut())
        } else {
            tutti_sparse_solve_c128(handle, packed.as_mut_ptr(), rhs, ptr::null_mut())
        }
    };
    if status == OK {
        b.copy_from_slice(&T::unpack(&packed).expect("whole values"));
    }
    status
}

fn info(handle: *mut TuttiSparse) -> TuttiSparseInfo {
    let mut info = TuttiSparseInfo::default();
    // SAFETY: a live handle, `info` writable.
    assert_eq!(unsafe { tutti_sparse_info(handle, &mut info) }, OK);
    info
}

fn free(handle: *mut TuttiSparse) {
    // SAFETY: a handle from tutti_sparse_analyse, released once.
    assert_eq!(unsafe { tutti_sparse_free(handle) }, OK);
}

/// Two right-hand sides, column-major: `A 1` and `A t` with `t_i = i / n`.
fn right_hand_sides<T: Scalar>(a: &CsrMatrix<T>) -> Vec<T> {
    let n = a.rows();
    let mut b = vec![T::ZERO; 2 * n];
    for row in 0..n {
        for k in a.indptr()[row]..a.indptr()[row + 1] {
            let (col, v) = (a.indices()[k], a.values()[k]);
            b[row] += v;
            b[n + row] += v * T::from_real(col as f64 / n as f64);
        }
    }
    b
}

/// The solution of `a` and its right-hand sides on `devices` devices of this process, and
/// its refactorization with the values doubled.
fn in_one_process<T: Scalar>(a: &CsrMatrix<T>, devices: c_int) -> (Vec<T>, Vec<T>) {
    let handle = analyse(a, &options::<T>(devices, ptr::null())).expect("analyses");
    assert_eq!(factor(handle, a.values()), OK, "{}", last_error());
    let mut x = right_hand_sides(a);
    assert_eq!(solve(handle, &mut x, 2), OK, "{}", last_error());
    let doubled: Vec<T> = a.values().iter().map(|&v| v + v).collect();
    assert_eq!(factor(handle, &doubled), OK, "{}", last_error());
    let mut y = right_hand_sides(a);
    assert_eq!(solve(handle, &mut y, 2), OK, "{}", last_error());
    free(handle);
    (x, y)
}

/// The same over `processes` loopback processes of `per_process` devices each: every
/// process's solutions, and what `tutti_sparse_info` said on each. The world is released
/// right after the analysis: the handle holds what it needs of it.
fn over_processes<T: Scalar + Send + Sync + 'static>(
    a: &Arc<CsrMatrix<T>>,
    processes: usize,
    per_process: c_int,
) -> Vec<(Vec<T>, Vec<T>, TuttiSparseInfo)> {
    let a = Arc::clone(a);
    on_processes(processes, move |_, world| {
        let options = options::<T>(per_process, world.as_ptr());
        let handle = analyse(&a, &options).expect("analyses over the world");
        drop(world);
        assert_eq!(factor(handle, a.values()), OK, "{}", last_error());
        let mut x = right_hand_sides(&a);
        assert_eq!(solve(handle, &mut x, 2), OK, "{}", last_error());
        let doubled: Vec<T> = a.values().iter().map(|&v| v + v).collect();
        assert_eq!(factor(handle, &doubled), OK, "{}", last_error());
        let mut y = right_hand_sides(&a);
        assert_eq!(solve(handle, &mut y, 2), OK, "{}", last_error());
        let facts = info(handle);
        free(handle);
        (x, y, facts)
    })
}

#[test]
fn every_process_gets_the_bits_of_as_many_devices_in_one_process() {
    let a = Arc::new(convection_diffusion(&[14, 13], 30.0).expect("model"));
    for (processes, per_process) in [(2, 1), (3, 1), (2, 2)] {
        let ranks = processes * per_process as usize;
        let (x, y) = in_one_process(&a, ranks as c_int);
        for (rank, (xp, yp, facts)) in over_processes(&a, processes, per_process)
            .into_iter()
            .enumerate()
        {
            let what = format!("process {rank} of {processes} x {per_process} device(s)");
            assert!(
                xp == x && yp == y,
                "{what}: other bits than {ranks} devices"
            );
            assert_eq!(
                facts.devices, ranks as c_int,
                "{what}: devices over the world"
            );
            assert_eq!(facts.factored, 1, "{what}");
            assert_eq!(facts.unknowns, a.rows() as i64, "{what}");
        }
    }
    // Complex: a damped Helmholtz operator.
    let h = Arc::new(helmholtz(&[12, 11], c64::new(-0.3, 0.2)).expect("model"));
    let (x, y) = in_one_process(&h, 2);
    for (rank, (xp, yp, _)) in over_processes(&h, 2, 1).into_iter().enumerate() {
        assert!(xp == x && yp == y, "complex, process {rank}: other bits");
    }
}

/// Each process's status and message of one call.
type Outcome = (c_int, String);

/// Checks that process `bad` failed with `status` and a message containing `phrase`, and
/// every other with `TUTTI_ERROR_REMOTE` naming `bad` and the same phrase.
fn one_failed(outcomes: &[Outcome], bad: usize, status: c_int, phrase: &str, what: &str) {
    for (rank, (got, message)) in outcomes.iter().enumerate() {
        if rank == bad {
            assert_eq!(
                *got, status,
                "{what}: the bad process's own status ({message})"
            );
        } else {
            assert_eq!(*got, REMOTE, "{what}: process {rank} ({message})");
            assert!(
                message.contains(&format!("rank {bad} failed")),
                "{what}: process {rank} names rank {bad}: {message}"
            );
        }
        assert!(message.contains(phrase), "{what}: {message}");
    }
}

#[test]
fn a_check_failing_in_one_process_releases_the_others() {
    let a = Arc::new(convection_diffusion(&[10, 9], 10.0).expect("model"));
    let (reference, _) = in_one_process(&a, 2);
    let outcomes = on_processes(2, move |rank, world| {
        let mut seen: Vec<Outcome> = Vec::new();
        let mut note = |status: c_int| seen.push((status, last_error()));
        let world_options = options::<f64>(1, world.as_ptr());

        // Analysis: bad options on process 1 only, then patterns that differ.
        let bad = TuttiSparseOptions {
            leaf_size: if rank == 1 { 0 } else { 64 },
            ..world_options
        };
        note(analyse(&a, &bad).map_or_else(|(status, _)| status, |_| OK));
        let other = TuttiSparseOptions {
            block: if rank == 1 { 2 } else { 1 },
            ..world_options
        };
        note(analyse(&a, &other).map_or_else(|(status, _)| status, |_| OK));
        // A device cap the plan does not fit on process 1 only (resources may differ).
        let mut capped = world_options;
        if rank == 1 {
            capped.resources.device_memory_bytes = 4096;
        }
        note(analyse(&a, &capped).map_or_else(|(status, _)| status, |_| OK));

        let handle = analyse(&a, &world_options).expect("analyses");
        // A NaN value on process 1 only.
        let mut values = a.values().to_vec();
        if rank == 1 {
            values[5] = f64::NAN;
        }
        note(factor(handle, &values));
        // Neither process holds factors now: both refuse the solve, each its own way.
        let mut b = right_hand_sides(&a);
        note(solve(handle, &mut b, 2));
        // nnz off by one on process 0.
        let nnz = a.values().len() - usize::from(rank == 0);
        note(factor(handle, &a.values()[..nnz]));
        // The complex entry point on a real handle, on process 1.
        note(if rank == 1 {
            factor(handle, &vec![c64::new(1.0, 0.0); a.values().len()])
        } else {
            factor(handle, a.values())
        });
        assert_eq!(factor(handle, a.values()), OK, "{}", last_error());
        // n_rhs 0 on process 0, then a NaN right-hand side on process 1.
        let mut b = right_hand_sides(&a);
        note(solve(handle, &mut b, if rank == 0 { 0 } else { 2 }));
        let mut b = right_hand_sides(&a);
        if rank == 1 {
            b[3] = f64::NAN;
        }
        note(solve(handle, &mut b, 2));
        // Values differing in one bit on process 1, then right-hand sides differing on
        // process 0: every process refuses them.
        let mut values = a.values().to_vec();
        if rank == 1 {
            values[7] = f64::from_bits(values[7].to_bits() ^ 1);
        }
        note(factor(handle, &values));
        assert_eq!(factor(handle, a.values()), OK, "{}", last_error());
        let mut b = right_hand_sides(&a);
        if rank == 0 {
            b[1] += 1.0;
        }
        note(solve(handle, &mut b, 2));
        // After every failure, the handle and the world still serve.
        let mut x = right_hand_sides(&a);
        assert_eq!(solve(handle, &mut x, 2), OK, "{}", last_error());
        free(handle);
        (seen, x)
    });
    let at =
        |call: usize| -> Vec<Outcome> { outcomes.iter().map(|(s, _)| s[call].clone()).collect() };
    one_failed(&at(0), 1, INVALID, "options->leaf_size", "bad options");
    for (status, message) in at(1) {
        assert_eq!(status, INVALID, "{message}");
        assert!(
            message.contains("different patterns or options"),
            "{message}"
        );
    }
    one_failed(
        &at(2),
        1,
        OUT_OF_MEMORY,
        "does not fit",
        "a plan over the cap",
    );
    one_failed(&at(3), 1, INVALID, "NaN", "a NaN value");
    for (status, message) in at(4) {
        assert_eq!(status, INVALID, "{message}");
        assert!(message.contains("no factorization"), "{message}");
    }
    one_failed(&at(5), 0, INVALID, "argument `nnz`", "a wrong nnz");
    one_failed(
        &at(6),
        1,
        INVALID,
        "tutti_sparse_factor instead",
        "a dtype mismatch",
    );
    one_failed(&at(7), 0, INVALID, "argument `n_rhs` is 0", "n_rhs 0");
    one_failed(
        &at(8),
        1,
        INVALID,
        "right-hand side 0, row 3 is NaN",
        "a NaN in b",
    );
    // Every process finds the difference itself; one whose run hears another's report
    // first returns it as that process's (TUTTI_ERROR_REMOTE), with the same message.
    for (call, what) in [
        (9, "different matrices"),
        (10, "different right-hand sides"),
    ] {
        for (status, message) in at(call) {
            assert!(status == INVALID || status == REMOTE, "{status}: {message}");
            assert!(message.contains(what), "{message}");
        }
    }
    for (_, x) in &outcomes {
        assert!(
            *x == reference,
            "the bits of two devices after the failures"
        );
    }
}
