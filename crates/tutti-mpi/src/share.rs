//! A process's share of its node: when several processes of an MPI job run on one node, each
//! takes its part of the cores, the host memory and the GPUs, instead of each assuming the
//! whole node (which would oversubscribe the cores L times and put every process on GPU 0).

use tutti_backend::{DeviceRequest, KindRequest, Resources};

/// What the node has, as this process sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Cores this process may run on (its affinity mask: a launcher that binds processes to
    /// cores narrows it).
    pub cores_here: usize,
    /// Cores online on the node.
    pub cores_online: usize,
    /// Physical host memory in bytes.
    pub host_memory: u64,
    /// GPUs this process sees (after `CUDA_VISIBLE_DEVICES`); 0 without CUDA.
    pub gpus: usize,
}

impl Node {
    /// This node, read from the operating system and the CUDA driver.
    pub fn here() -> Self {
        let cores_here = tutti_backend::system::host_cores();
        // SAFETY: sysconf reads a system constant; no pointers are involved.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        Self {
            cores_here,
            cores_online: usize::try_from(online)
                .unwrap_or(cores_here)
                .max(cores_here),
            host_memory: tutti_backend::system::host_memory().map_or(0, |m| m.total),
            gpus: tutti_backend::gpu_count().unwrap_or(0),
        }
    }
}

/// `resources` for the process of node-local rank `local_rank` among `local_size` on `node`:
///
/// - **Cores.** Without a cap of the caller's, a process takes `cores / local_size` of the
///   node's online cores (the remainder going to the first processes), or fewer when its
///   launcher bound it to fewer. A binding to a socket shared with other processes thus
///   takes the even share, not the socket. Processes that share one cgroup cpuset or quota
///   smaller than the node are not detected (that needs their affinity masks gathered).
/// - **Host memory.** Without a cap of the caller's, `memory / local_size`.
/// - **GPU.** A request that may open GPUs (`gpu` or `auto`) for `k` devices per process
///   (all devices counting as one) names GPUs `local_rank * k .. local_rank * k + k`,
///   modulo the node's GPUs, so the processes of a node spread over its GPUs (processes
///   share them when there are more ranks than GPUs). A k above the node's GPU count is
///   left as it is, for the selection to refuse. Explicit ordinals are kept.
///
/// One process alone on its node (`local_size` 1) keeps `resources` as they are.
pub fn node_share(
    resources: &Resources,
    local_rank: usize,
    local_size: usize,
    node: Node,
) -> Resources {
    let mut shared = resources.clone();
    if local_size <= 1 {
        return shared;
    }
    if shared.host_cores.is_none() {
        let cores = node.cores_online.max(1);
        let even = cores / local_size + usize::from(local_rank < cores % local_size);
        // A process bound to fewer cores keeps its binding; one bound to more (a socket, a
        // NUMA domain shared with other processes) takes no more than its even share.
        shared = shared.with_host_cores(even.min(node.cores_here).max(1));
    }
    if shared.host_memory_cap.is_none() && node.host_memory > 0 {
        shared = shared.with_host_memory_cap(node.host_memory / local_size as u64);
    }
    let per_process = match shared.devices {
        DeviceRequest::All => Some(1),
        DeviceRequest::Count(k) => Some(k),
        DeviceRequest::Ordinals(_) => None,
    };
    // More GPUs per process than the node has is left to the selection, which refuses it
    // as it does for one process (and no list of a huge count is built).
    let spread = shared.kind != KindRequest::Cpu && node.gpus > 0;
    if let (Some(k), true) = (per_process.filter(|&k| k <= node.gpus), spread) {
        // Process l takes GPUs l*k .. l*k + k, wrapping around the node's GPUs.
        let first = local_rank.wrapping_mul(k);
        let ordinals = (0..k).map(|i| first.wrapping_add(i) % node.gpus).collect();
        shared = shared.with_devices(DeviceRequest::Ordinals(ordinals));
    }
    shared
}

/// `resources` for a process a launcher started, without MPI: its node share
/// ([`node_share`]) where the launcher says the node-local rank and count (Open MPI,
/// Hydra, PMIx and Slurm steps do), else `resources` unchanged. For programs that run under
/// `mpirun` or `srun` without joining an MPI world (`tutti --mpi off`), so that the
/// processes of one node still split its cores, memory and GPUs.
pub fn launch_share(
    resources: &Resources,
    launch: Option<&crate::launch::Launch>,
    node: Node,
) -> Resources {
    match launch.and_then(|l| l.local_rank.zip(l.local_size)) {
        Some((local_rank, local_size)) if local_rank < local_size => {
            node_share(resources, local_rank, local_size, node)
        }
        _ => resources.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODE: Node = Node {
        cores_here: 16,
        cores_online: 16,
        host_memory: 128 << 30,
        gpus: 4,
    };

    #[test]
    fn a_launch_without_mpi_takes_its_share_where_the_launcher_says() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let open_mpi = crate::launch::detect(vars(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        ]))
        .unwrap();
        let shared = launch_share(&Resources::cpu(1), open_mpi.as_ref(), NODE);
        assert_eq!(shared, node_share(&Resources::cpu(1), 1, 2, NODE));
        assert_eq!(shared.host_cores, Some(8));
        assert_eq!(
            launch_share(&Resources::cpu(1), None, NODE),
            Resources::cpu(1),
            "no launcher: unchanged"
        );
    }

    #[test]
    fn one_process_keeps_its_resources() {
        let resources = Resources::default();
        assert_eq!(node_share(&resources, 0, 1, NODE), resources);
    }

    #[test]
    fn unbound_processes_split_the_cores_and_memory_evenly() {
        let cpu = Resources::cpu(1);
        let shares: Vec<Resources> = (0..3).map(|l| node_share(&cpu, l, 3, NODE)).collect();
        let cores: Vec<usize> = shares.iter().filter_map(|r| r.host_cores).collect();
        assert_eq!(cores, vec![6, 5, 5], "16 cores over 3 processes");
        assert!(shares
            .iter()
            .all(|r| r.host_memory_cap == Some((128 << 30) / 3)));
        assert!(
            shares.iter().all(|r| r.devices == DeviceRequest::Count(1)),
            "cpu: no GPU"
        );
    }

    #[test]
    fn a_bound_process_and_caller_caps_are_kept() {
        let bound = Node {
            cores_here: 4,
            ..NODE
        };
        let shared = node_share(&Resources::cpu(1), 1, 4, bound);
        assert_eq!(
            shared.host_cores,
            Some(4),
            "bound to 4 cores, its even share is 4"
        );
        let one_core = Node {
            cores_here: 1,
            ..NODE
        };
        let shared = node_share(&Resources::cpu(1), 1, 4, one_core);
        assert_eq!(shared.host_cores, Some(1), "bound to one core: it keeps it");
        // 8 processes on 2 sockets of 16 cores: a process bound to its socket takes 4.
        let socket = Node {
            cores_here: 16,
            cores_online: 32,
            ..NODE
        };
        let shared = node_share(&Resources::cpu(1), 5, 8, socket);
        assert_eq!(shared.host_cores, Some(4));
        let capped = Resources::cpu(1)
            .with_host_cores(2)
            .with_host_memory_cap(1 << 30);
        let shared = node_share(&capped, 1, 4, NODE);
        assert_eq!(
            (shared.host_cores, shared.host_memory_cap),
            (Some(2), Some(1 << 30))
        );
    }

    #[test]
    fn processes_spread_over_the_gpus_round_robin() {
        let ordinal = |local_rank: usize, request: Resources| {
            node_share(&request, local_rank, 6, NODE).devices
        };
        for (local, expected) in [(0, 0), (1, 1), (3, 3), (4, 0), (5, 1)] {
            assert_eq!(
                ordinal(local, Resources::default()),
                DeviceRequest::Ordinals(vec![expected])
            );
            assert_eq!(
                ordinal(local, Resources::gpu(1)),
                DeviceRequest::Ordinals(vec![expected])
            );
        }
        // Two GPUs per process: process 1 of 6 takes 2 and 3, process 2 wraps to 0 and 1.
        assert_eq!(
            ordinal(1, Resources::gpu(2)),
            DeviceRequest::Ordinals(vec![2, 3])
        );
        assert_eq!(
            ordinal(2, Resources::gpu(2)),
            DeviceRequest::Ordinals(vec![0, 1])
        );
        assert_eq!(
            ordinal(1, Resources::gpu(3)),
            DeviceRequest::Ordinals(vec![3, 0, 1])
        );
        // More per process than the node has: left to the selection to refuse.
        assert_eq!(ordinal(1, Resources::gpu(5)), DeviceRequest::Count(5));
        assert_eq!(
            ordinal(1, Resources::gpu(i32::MAX as usize)),
            DeviceRequest::Count(i32::MAX as usize)
        );
        let explicit = Resources::gpu(1).with_devices(DeviceRequest::Ordinals(vec![2]));
        assert_eq!(ordinal(4, explicit), DeviceRequest::Ordinals(vec![2]));
        let none = Node { gpus: 0, ..NODE };
        assert_eq!(
            node_share(&Resources::default(), 3, 6, none).devices,
            DeviceRequest::All
        );
    }
}
