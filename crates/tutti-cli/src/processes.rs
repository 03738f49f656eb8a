//! `--mpi auto|on|off`: whether this `tutti` is one process of an MPI job, and the group its
//! computation runs on.

use tutti_backend::{GpuUse, Resources};
use tutti_group::Group;
use tutti_mpi::launch::{detect_here, wants_mpi, Launch, MpiMode};

use crate::failure::Failure;

/// This process's place in the run: alone, or one rank of an MPI job.
pub struct Processes {
    launch: Option<Launch>,
    #[cfg(feature = "mpi")]
    world: Option<tutti_mpi::mpi::World>,
}

impl Processes {
    /// Detects the launcher and, where `mode` says so, joins the MPI job. A launcher's
    /// variables that make no sense, or MPI asked of a build without it, are input
    /// failures; MPI failing to start is not.
    pub fn start(mode: MpiMode) -> Result<Self, Failure> {
        let launch = detect_here().map_err(|e| Failure::input(e.to_string()))?;
        if !wants_mpi(mode, launch.as_ref()) {
            return Ok(Self {
                launch,
                #[cfg(feature = "mpi")]
                world: None,
            });
        }
        #[cfg(feature = "mpi")]
        {
            let world = tutti_mpi::mpi::World::init().map_err(|e| format!("MPI: {e}"))?;
            Ok(Self {
                launch,
                world: Some(world),
            })
        }
        #[cfg(not(feature = "mpi"))]
        {
            let started_by = launch
                .as_ref()
                .map_or_else(|| "--mpi on".to_string(), |l| l.launcher.to_string());
            Err(Failure::input(format!(
                "{started_by} asks for MPI, but this tutti was built without it: build it with \
                 `cargo build --release -p tutti-cli --features mpi`, or pass `--mpi off` to \
                 run every process on its own"
            )))
        }
    }

    /// Whether this process is one of several over MPI.
    pub fn spanning(&self) -> bool {
        #[cfg(feature = "mpi")]
        {
            self.world.is_some()
        }
        #[cfg(not(feature = "mpi"))]
        {
            false
        }
    }

    /// Whether this process prints the results: rank 0, or a process on its own.
    pub fn prints(&self) -> bool {
        #[cfg(feature = "mpi")]
        {
            self.world.as_ref().is_none_or(|world| world.rank() == 0)
        }
        #[cfg(not(feature = "mpi"))]
        {
            true
        }
    }

    /// The group of the computation: over MPI, a rank per device `resources` selects in
    /// each process (`--devices N` gives every process N), with the process's node share of
    /// the cores, host memory and GPUs ([`tutti_mpi::node_share`]); else every device
    /// `resources` selects, on the node share a launcher gives this process
    /// ([`tutti_mpi::launch_share`]) when it runs alone under one.
    pub fn group(&self, resources: &Resources, gpu_use: GpuUse) -> Result<Group, Failure> {
        #[cfg(feature = "mpi")]
        if let Some(world) = &self.world {
            // The processes of one node share its cores, memory and GPUs.
            let resources = tutti_mpi::node_share(
                resources,
                world.local_rank(),
                world.local_size(),
                tutti_mpi::Node::here(),
            );
            let devices = resources
                .select_for(gpu_use)
                .map_err(|e| tell_others(world, e.into()))?;
            if devices.len() > 1 && world.thread_level() < tutti_mpi::mpi::ThreadLevel::Serialized {
                return Err(tell_others(
                    world,
                    Failure::input(format!(
                        "the flags select {} devices in each process, which needs MPI to \
                         provide MPI_THREAD_SERIALIZED, and this MPI provides {:?}: pass \
                         `--devices 1` and start more processes",
                        devices.len(),
                        world.thread_level()
                    )),
                ));
            }
            // Forming the group is collective: its errors reach every process alike.
            return Ok(Group::spanning_devices(world.fabric(), devices)?);
        }
        Ok(Group::from_resources(
            &self.alone_share(resources),
            gpu_use,
        )?)
    }

    /// `resources` for a process that runs alone: its node share when a launcher started it
    /// (`--mpi off` under `mpirun`; [`tutti_mpi::launch_share`]), else `resources`.
    pub fn alone_share(&self, resources: &Resources) -> Resources {
        tutti_mpi::launch_share(resources, self.launch.as_ref(), tutti_mpi::Node::here())
    }

    /// The number of processes in the run: the MPI world's size, or 1.
    pub fn size(&self) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(world) = &self.world {
            return world.size();
        }
        1
    }

    /// Over MPI, this process's node share of `resources` ([`tutti_mpi::node_share`]) and a
    /// group with one rank per process, this one's on the first device of the share (for
    /// computations that split work among processes and run each process's part on its own
    /// devices, as campaigns do); `None` for a process alone.
    pub fn share(
        &self,
        resources: &Resources,
        gpu_use: GpuUse,
    ) -> Result<Option<(Group, Resources)>, Failure> {
        #[cfg(feature = "mpi")]
        if let Some(world) = &self.world {
            let share = tutti_mpi::node_share(
                resources,
                world.local_rank(),
                world.local_size(),
                tutti_mpi::Node::here(),
            );
            let device = share
                .select_for(gpu_use)
                .map_err(Failure::from)
                .and_then(|devices| {
                    devices
                        .into_iter()
                        .next()
                        .ok_or_else(|| Failure::input("the flags select no device in this process"))
                })
                .map_err(|e| tell_others(world, e))?;
            return Ok(Some((Group::spanning(world.fabric(), device), share)));
        }
        let _ = (resources, gpu_use);
        Ok(None)
    }

    /// Refuses a subcommand that does not run across processes yet, when this is one (an
    /// input failure: run it otherwise).
    pub fn refuse_spanning(&self, what: &str) -> Result<(), Failure> {
        if self.spanning() {
            let launched = self
                .launch
                .as_ref()
                .map_or_else(String::new, |l| format!(" (started by {})", l.launcher));
            return Err(Failure::input(format!(
                "{what} does not run across processes yet{launched}; run it as one process, or \
                 pass `--mpi off` to run every process on its own"
            )));
        }
        Ok(())
    }
}

/// `error`, after telling the other processes: a process that fails before its first
/// collective (its flags select no device on its node, say) joins that collective's round as
/// failed, so the others return with its message instead of waiting for it.
#[cfg(feature = "mpi")]
fn tell_others(world: &tutti_mpi::mpi::World, error: Failure) -> Failure {
    use tutti_group::Fabric;
    if let Ok(transport) = world.fabric().open() {
        transport.abort_with(error.message());
    }
    error
}
