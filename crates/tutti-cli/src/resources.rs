//! Device-selection options shared by every subcommand.

use clap::Args;
use tutti_backend::{DeviceRequest, KindRequest, Resources};

/// Which devices to use.
#[derive(Args, Clone, Debug)]
pub struct DeviceArgs {
    /// Number of devices (default: every GPU, or one simulated device without GPUs).
    #[arg(long, short = 'd', conflicts_with = "ordinals")]
    pub devices: Option<usize>,
    /// Device ordinals, comma-separated; an ordinal may repeat (two ranks on one GPU).
    #[arg(long, value_delimiter = ',')]
    pub ordinals: Option<Vec<usize>>,
    /// Device kind: cpu (simulated), gpu, or auto.
    #[arg(long, default_value = "auto")]
    pub kind: KindRequest,
    /// Per-device memory cap, in MiB.
    #[arg(long, value_name = "MIB")]
    pub device_memory_mib: Option<u64>,
}

impl DeviceArgs {
    /// The resources these options select.
    pub fn resources(&self) -> Resources {
        let devices = match (&self.ordinals, self.devices) {
            (Some(ordinals), _) => DeviceRequest::Ordinals(ordinals.clone()),
            (None, Some(n)) => DeviceRequest::Count(n),
            (None, None) => DeviceRequest::All,
        };
        let resources = Resources::default()
            .with_kind(self.kind)
            .with_devices(devices);
        match self.device_memory_mib {
            Some(mib) => resources.with_device_memory_cap(mib.saturating_mul(1 << 20)),
            None => resources,
        }
    }
}
