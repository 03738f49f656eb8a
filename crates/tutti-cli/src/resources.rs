//! Device-selection options shared by every subcommand: where a computation runs.

use std::path::PathBuf;

use clap::Args;
use tutti_backend::{DeviceRequest, KindRequest, Resources};

/// Which devices to use, and how much memory and scratch space (the same flags on every
/// workload subcommand; they build one `tutti_backend::Resources`).
#[derive(Args, Clone, Debug, Default)]
pub struct DeviceArgs {
    /// Number of devices (default: every GPU, or one simulated device using all cores).
    #[arg(long, short = 'd', conflicts_with = "ordinals")]
    pub devices: Option<usize>,
    /// Device ordinals, comma-separated; an ordinal may repeat (two ranks on one GPU).
    #[arg(long, value_delimiter = ',')]
    pub ordinals: Option<Vec<usize>>,
    /// Device kind: cpu (simulated), gpu, or auto (GPUs if any, else cpu).
    #[arg(long, default_value = "auto")]
    pub kind: KindRequest,
    /// Per-device memory cap, in MiB.
    #[arg(long, value_name = "MIB")]
    pub device_memory_mib: Option<u64>,
    /// Host memory cap for the whole run, in MiB.
    #[arg(long, value_name = "MIB")]
    pub host_memory_mib: Option<u64>,
    /// Directory for scratch (spill) files (default: the system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Limit on the scratch files written, in MiB.
    #[arg(long, value_name = "MIB")]
    pub scratch_limit_mib: Option<u64>,
}

/// `--kind` as written on the command line.
pub fn kind_name(kind: KindRequest) -> &'static str {
    match kind {
        KindRequest::Cpu => "cpu",
        KindRequest::Gpu => "gpu",
        KindRequest::Auto => "auto",
    }
}

/// MiB to bytes, saturating: a cap beyond any device is refused by the device selection
/// with both numbers, not wrapped to a small one.
fn mib(value: u64) -> u64 {
    value.saturating_mul(1 << 20)
}

impl DeviceArgs {
    /// The resources these options select.
    pub fn resources(&self) -> Resources {
        let devices = match (&self.ordinals, self.devices) {
            (Some(ordinals), _) => DeviceRequest::Ordinals(ordinals.clone()),
            (None, Some(n)) => DeviceRequest::Count(n),
            (None, None) => DeviceRequest::All,
        };
        let mut resources = Resources::default()
            .with_kind(self.kind)
            .with_devices(devices);
        if let Some(value) = self.device_memory_mib {
            resources = resources.with_device_memory_cap(mib(value));
        }
        if let Some(value) = self.host_memory_mib {
            resources = resources.with_host_memory_cap(mib(value));
        }
        if let Some(dir) = &self.scratch {
            resources = resources.with_scratch_dir(dir.clone());
        }
        if let Some(value) = self.scratch_limit_mib {
            resources = resources.with_scratch_limit(mib(value));
        }
        resources
    }

    /// These flags as the `inputs.resources` object of `--json` (`null` where not given).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": kind_name(self.kind),
            "devices": self.devices,
            "ordinals": self.ordinals,
            "device_memory_mib": self.device_memory_mib,
            "host_memory_mib": self.host_memory_mib,
            "scratch": self.scratch,
            "scratch_limit_mib": self.scratch_limit_mib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        devices: DeviceArgs,
    }

    fn parse(args: &[&str]) -> Resources {
        let mut argv = vec!["probe"];
        argv.extend_from_slice(args);
        Probe::try_parse_from(argv)
            .expect("valid flags")
            .devices
            .resources()
    }

    #[test]
    fn no_flags_are_the_backend_defaults() {
        assert_eq!(parse(&[]), Resources::default());
    }

    #[test]
    fn every_flag_reaches_the_resources() {
        let got = parse(&[
            "--kind",
            "cpu",
            "--ordinals",
            "1,0,1",
            "--device-memory-mib",
            "3",
            "--host-memory-mib",
            "5",
            "--scratch",
            "/tmp/x",
            "--scratch-limit-mib",
            "7",
        ]);
        let expected = Resources::default()
            .with_kind(KindRequest::Cpu)
            .with_devices(DeviceRequest::Ordinals(vec![1, 0, 1]))
            .with_device_memory_cap(3 << 20)
            .with_host_memory_cap(5 << 20)
            .with_scratch_dir("/tmp/x")
            .with_scratch_limit(7 << 20);
        assert_eq!(got, expected);
        assert_eq!(parse(&["-d", "3", "--kind", "gpu"]), Resources::gpu(3));
    }

    #[test]
    fn a_zero_count_or_cap_is_refused_when_the_devices_open() {
        for (args, says) in [
            (&["--devices", "0"][..], "zero devices requested"),
            (
                &["--device-memory-mib", "0"],
                "the device memory cap must be positive",
            ),
            (
                &["--host-memory-mib", "0"],
                "the host memory cap must be positive",
            ),
            (
                &["--scratch-limit-mib", "0"],
                "the scratch limit must be positive",
            ),
        ] {
            let error = parse(args).select().expect_err("refused");
            assert!(error.to_string().contains(says), "{args:?}: {error}");
        }
    }

    #[test]
    fn huge_caps_saturate_instead_of_wrapping() {
        let got = parse(&["--device-memory-mib", &u64::MAX.to_string()]);
        assert_eq!(got.device_memory_cap, Some(u64::MAX));
    }

    #[test]
    fn devices_and_ordinals_conflict() {
        let result = Probe::try_parse_from(["probe", "-d", "2", "--ordinals", "0,1"]);
        assert!(result.is_err());
    }
}

/// Values of `--kernels` (the workloads with a device path: `fmm`, `sweep`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelsArg {
    /// The device path on GPU ranks, the host code on simulated devices.
    Auto,
    /// The device path on every rank (on simulated devices the host implementations).
    Always,
    /// The host code on every rank.
    Never,
}

impl KernelsArg {
    /// The value as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

impl From<KernelsArg> for tutti_backend::Kernels {
    fn from(value: KernelsArg) -> Self {
        match value {
            KernelsArg::Auto => Self::Auto,
            KernelsArg::Always => Self::Always,
            KernelsArg::Never => Self::Never,
        }
    }
}
