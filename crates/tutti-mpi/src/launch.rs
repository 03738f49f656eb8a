//! Launch detection: whether this process was started by an MPI launcher (`mpirun`,
//! `mpiexec`, `srun`), and as which rank of how many, read from the variables each launcher
//! sets. Pure functions of the environment, so every launcher's case is unit-tested.

use std::fmt;

/// The launcher family whose variables were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI's `mpirun`/`mpiexec` (`OMPI_COMM_WORLD_*`), also under PRRTE.
    OpenMpi,
    /// MPICH's or Intel MPI's Hydra (`PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`).
    Hydra,
    /// A PMIx launcher that names no size (`PMIX_RANK`).
    Pmix,
    /// A Slurm job step started by `srun` (`SLURM_PROCID`, `SLURM_STEP_ID`).
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OpenMpi => "Open MPI mpirun",
            Self::Hydra => "Hydra (MPICH, Intel MPI)",
            Self::Pmix => "PMIx",
            Self::Slurm => "Slurm srun",
        })
    }
}

/// What the launcher says about this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Who launched it.
    pub launcher: Launcher,
    /// This process's rank in the launch.
    pub rank: usize,
    /// The number of processes, where the launcher says.
    pub size: Option<usize>,
    /// This process's rank among those on its node, where the launcher says.
    pub local_rank: Option<usize>,
    /// The number of processes on this node, where the launcher says.
    pub local_size: Option<usize>,
}

/// Whether to use MPI: `--mpi auto|on|off` (or `TUTTI_MPI=auto|1|0`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MpiMode {
    /// Use MPI when a launcher started more than one process (or did not say how many).
    #[default]
    Auto,
    /// Always initialise MPI (a run of one process under MPI is allowed).
    On,
    /// Never use MPI, even under a launcher: every process runs alone.
    Off,
}

impl std::str::FromStr for MpiMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Self::Auto),
            "on" | "1" | "yes" | "true" => Ok(Self::On),
            "off" | "0" | "no" | "false" => Ok(Self::Off),
            other => Err(format!(
                "the MPI mode must be auto, on or off (or TUTTI_MPI=1/0), not `{other}`"
            )),
        }
    }
}

/// A launcher variable that is set but not a number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchError(pub String);

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LaunchError {}

/// The launch described by the variables `var` returns, or `None` outside a launcher.
///
/// Open MPI is checked first (its variables are authoritative when present), then Hydra,
/// then PMIx, then Slurm, which counts only inside a job step: a batch script's shell also
/// has `SLURM_PROCID` and `SLURM_NTASKS`, but no `SLURM_STEP_ID` (as Slurm documents the
/// step variables; not checked on a cluster here).
pub fn detect(var: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>, LaunchError> {
    let number = |name: &str| -> Result<Option<usize>, LaunchError> {
        match var(name) {
            None => Ok(None),
            Some(text) => text.trim().parse::<usize>().map(Some).map_err(|_| {
                LaunchError(format!(
                    "the launcher variable {name}={text:?} is not a non-negative integer"
                ))
            }),
        }
    };
    let launch = |launcher, rank, size, local_rank, local_size| -> Result<_, LaunchError> {
        let launch = Launch {
            launcher,
            rank,
            size,
            local_rank,
            local_size,
        };
        if let Some(size) = size {
            if rank >= size {
                return Err(LaunchError(format!(
                    "{launcher} says this is rank {rank} of {size} processes"
                )));
            }
        }
        Ok(Some(launch))
    };
    if let Some(rank) = number("OMPI_COMM_WORLD_RANK")? {
        return launch(
            Launcher::OpenMpi,
            rank,
            number("OMPI_COMM_WORLD_SIZE")?,
            number("OMPI_COMM_WORLD_LOCAL_RANK")?,
            number("OMPI_COMM_WORLD_LOCAL_SIZE")?,
        );
    }
    if let Some(rank) = number("PMI_RANK")? {
        return launch(
            Launcher::Hydra,
            rank,
            number("PMI_SIZE")?,
            number("MPI_LOCALRANKID")?,
            number("MPI_LOCALNRANKS")?,
        );
    }
    if let Some(rank) = number("PMIX_RANK")? {
        return launch(Launcher::Pmix, rank, None, None, None);
    }
    if var("SLURM_STEP_ID").is_some() {
        if let Some(rank) = number("SLURM_PROCID")? {
            let size = match number("SLURM_STEP_NUM_TASKS")? {
                Some(size) => Some(size),
                None => number("SLURM_NTASKS")?,
            };
            return launch(Launcher::Slurm, rank, size, number("SLURM_LOCALID")?, None);
        }
    }
    Ok(None)
}

/// The environment Open MPI's `mpirun` needs in a root container with more processes than
/// cores, as in CI: run as root, oversubscribe, no cross-memory attach (containers forbid
/// it), and yield when idle. tutti's own `mpirun` tests set these.
pub const OPEN_MPI_CONTAINER_ENV: &[(&str, &str)] = &[
    ("OMPI_ALLOW_RUN_AS_ROOT", "1"),
    ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
    ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
    ("OMPI_MCA_btl_vader_single_copy_mechanism", "none"),
    ("OMPI_MCA_mpi_yield_when_idle", "1"),
];

/// The launch of this process, from its environment.
pub fn detect_here() -> Result<Option<Launch>, LaunchError> {
    detect(|name| std::env::var(name).ok())
}

/// Whether to initialise MPI, given the mode asked for and the launch found.
pub fn wants_mpi(mode: MpiMode, launch: Option<&Launch>) -> bool {
    match mode {
        MpiMode::Off => false,
        MpiMode::On => true,
        MpiMode::Auto => launch.is_some_and(|launch| launch.size.is_none_or(|size| size > 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn no_launcher_is_none() {
        assert_eq!(detect(env(&[("HOME", "/root")])), Ok(None));
        assert!(!wants_mpi(MpiMode::Auto, None));
        assert!(wants_mpi(MpiMode::On, None));
    }

    #[test]
    fn open_mpi_variables() {
        let launch = detect(env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            // Hydra's variables too: Open MPI's win.
            ("PMI_RANK", "7"),
        ]))
        .expect("valid")
        .expect("launched");
        assert_eq!(
            launch,
            Launch {
                launcher: Launcher::OpenMpi,
                rank: 2,
                size: Some(4),
                local_rank: Some(0),
                local_size: Some(2),
            }
        );
        assert!(wants_mpi(MpiMode::Auto, Some(&launch)));
        assert!(!wants_mpi(MpiMode::Off, Some(&launch)));
    }

    #[test]
    fn hydra_pmix_and_slurm_steps() {
        let hydra = detect(env(&[
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "3"),
            ("MPI_LOCALRANKID", "1"),
            ("MPI_LOCALNRANKS", "3"),
        ]))
        .expect("valid")
        .expect("launched");
        assert_eq!(
            (hydra.launcher, hydra.rank, hydra.size),
            (Launcher::Hydra, 1, Some(3))
        );
        assert_eq!((hydra.local_rank, hydra.local_size), (Some(1), Some(3)));

        let pmix = detect(env(&[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "job.1")]))
            .expect("valid")
            .expect("launched");
        assert_eq!((pmix.launcher, pmix.size), (Launcher::Pmix, None));
        assert!(
            wants_mpi(MpiMode::Auto, Some(&pmix)),
            "size unknown: use MPI"
        );

        let step = detect(env(&[
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_STEP_NUM_TASKS", "4"),
            ("SLURM_LOCALID", "1"),
        ]))
        .expect("valid")
        .expect("launched");
        assert_eq!(
            (step.launcher, step.rank, step.size),
            (Launcher::Slurm, 3, Some(4))
        );
        assert_eq!(step.local_rank, Some(1));
    }

    #[test]
    fn a_batch_shell_and_a_single_process_do_not_use_mpi() {
        let batch = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "8")]);
        assert_eq!(detect(batch), Ok(None), "no SLURM_STEP_ID: not a step");
        let single = detect(env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "1"),
        ]))
        .expect("valid");
        assert!(!wants_mpi(MpiMode::Auto, single.as_ref()));
        assert!(wants_mpi(MpiMode::On, single.as_ref()));
    }

    #[test]
    fn malformed_variables_are_errors_naming_them() {
        let err = detect(env(&[("OMPI_COMM_WORLD_RANK", "two")])).unwrap_err();
        assert!(err.0.contains("OMPI_COMM_WORLD_RANK=\"two\""), "{err}");
        let err = detect(env(&[("PMI_RANK", "5"), ("PMI_SIZE", "4")])).unwrap_err();
        assert!(err.0.contains("rank 5 of 4"), "{err}");
    }

    #[test]
    fn modes_parse_from_flags_and_variables() {
        assert_eq!("auto".parse::<MpiMode>(), Ok(MpiMode::Auto));
        assert_eq!("1".parse::<MpiMode>(), Ok(MpiMode::On));
        assert_eq!("OFF".parse::<MpiMode>(), Ok(MpiMode::Off));
        assert!("sometimes"
            .parse::<MpiMode>()
            .unwrap_err()
            .contains("auto, on or off"));
    }
}
