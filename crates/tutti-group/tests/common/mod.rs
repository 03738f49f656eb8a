//! Helpers shared by the group's integration tests.

use std::sync::mpsc;
use std::time::Duration;

use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;

/// A hang fails the test after this long instead of hanging CI.
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Runs `test` on a thread and fails if it has not finished within [`HANG_LIMIT`].
pub fn within_limit<T: Send + 'static>(test: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, wait) = mpsc::channel();
    std::thread::spawn(move || {
        // A panic drops `done`, which the receiver reports below as a failure.
        let _ = done.send(test());
    });
    match wait.recv_timeout(HANG_LIMIT) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the test hung for {HANG_LIMIT:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the test panicked (see above)"),
    }
}

/// A group of `size` simulated devices.
pub fn cpu_group(size: usize) -> Group {
    Group::from_resources(&Resources::cpu(size), GpuUse::HostOnly).expect("simulated devices")
}
