//! Budgets: how many bytes each tier may hold.

use std::fmt;

use tutti_backend::{format_bytes, system, Device, DeviceKind, Resources};

use crate::PlanError;

/// Where an object lives, fastest first: `Device < Host < Disk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// Device memory: every device holds the object (its own part, or a replica).
    Device,
    /// Host memory, shared by all devices of the node.
    Host,
    /// Spill files in the scratch directory.
    Disk,
}

impl Tier {
    /// The three tiers, fastest first.
    pub const ALL: [Tier; 3] = [Tier::Device, Tier::Host, Tier::Disk];

    /// `"device"`, `"host"` or `"disk"`, as printed in plans and messages.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Device => "device",
            Tier::Host => "host",
            Tier::Disk => "disk",
        }
    }

    /// How an amount of bytes on this tier reads in a message: `"12.0 GiB per device"`,
    /// `"12.0 GiB of host memory"`, `"12.0 GiB of scratch disk"`.
    pub fn describe(self, bytes: u64) -> String {
        let bytes = format_bytes(bytes);
        match self {
            Tier::Device => format!("{bytes} per device"),
            Tier::Host => format!("{bytes} of host memory"),
            Tier::Disk => format!("{bytes} of scratch disk"),
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The bytes a computation may use on each tier, for a given number of devices.
///
/// All figures are in bytes. The device figure is **per device** (the smallest over the
/// devices, so that a per-device object that fits there fits on every device); the host and
/// disk figures are for the whole node.
///
/// When the devices are simulated on the host ([`Budget::device_memory_is_host`]), device
/// memory is carved out of host memory: the planner then charges what it places on the
/// device tier to the host tier too, once per device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    devices: usize,
    device_bytes: u64,
    host_bytes: u64,
    disk_bytes: u64,
    device_memory_is_host: bool,
}

impl Budget {
    /// A budget stated exactly: `devices` devices with `device_bytes` each, `host_bytes` of
    /// host memory and `disk_bytes` of scratch space, all in bytes. Device memory is taken to
    /// be separate from host memory (as on GPUs); see [`Budget::with_device_memory_is_host`].
    ///
    /// Errors: [`PlanError::ZeroDevices`] when `devices` is 0.
    pub fn new(
        devices: usize,
        device_bytes: u64,
        host_bytes: u64,
        disk_bytes: u64,
    ) -> Result<Self, PlanError> {
        if devices == 0 {
            return Err(PlanError::ZeroDevices);
        }
        Ok(Self {
            devices,
            device_bytes,
            host_bytes,
            disk_bytes,
            device_memory_is_host: false,
        })
    }

    /// The same budget, saying whether device memory is host memory (simulated devices).
    pub fn with_device_memory_is_host(mut self, shared: bool) -> Self {
        self.device_memory_is_host = shared;
        self
    }

    /// The budget of `devices` under `resources`, measured now:
    ///
    /// - device: the smallest free memory over `devices` ([`Device::memory_info`], which
    ///   already applies a per-device cap), bounded by `resources.device_memory_cap`;
    /// - host: the host's available memory, bounded by `resources.host_memory_cap`;
    /// - disk: the free space (`statvfs`) of the file system holding
    ///   `resources.scratch_dir()`, bounded by `resources.scratch_limit`.
    ///
    /// Simulated devices set [`Budget::device_memory_is_host`].
    ///
    /// Errors: [`PlanError::ZeroDevices`] for an empty slice; [`PlanError::Backend`] when a
    /// device's memory, the host's memory or the scratch directory cannot be read (a missing
    /// scratch directory is an error).
    pub fn from_devices(devices: &[Device], resources: &Resources) -> Result<Self, PlanError> {
        let mut device_bytes = u64::MAX;
        for device in devices {
            device_bytes = device_bytes.min(device.memory_info()?.free);
        }
        if let Some(cap) = resources.device_memory_cap {
            device_bytes = device_bytes.min(cap);
        }
        let mut host_bytes = system::host_memory()?.available;
        if let Some(cap) = resources.host_memory_cap {
            host_bytes = host_bytes.min(cap);
        }
        let scratch_dir = resources.checked_scratch_dir()?;
        let (mut disk_bytes, _) = system::filesystem_space(&scratch_dir)?;
        if let Some(limit) = resources.scratch_limit {
            disk_bytes = disk_bytes.min(limit);
        }
        let simulated = devices.iter().any(|d| d.kind() == DeviceKind::Host);
        Ok(
            Self::new(devices.len(), device_bytes, host_bytes, disk_bytes)?
                .with_device_memory_is_host(simulated),
        )
    }

    /// The number of devices (at least 1).
    pub fn devices(&self) -> usize {
        self.devices
    }

    /// Bytes free on each device.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// Bytes of host memory for the whole node.
    pub fn host_bytes(&self) -> u64 {
        self.host_bytes
    }

    /// Bytes of scratch disk for the whole node.
    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// Whether device memory is host memory (simulated devices): device use also counts
    /// against the host tier, once per device.
    pub fn device_memory_is_host(&self) -> bool {
        self.device_memory_is_host
    }

    /// The bytes of `tier`: per device for [`Tier::Device`], for the node otherwise.
    pub fn capacity(&self, tier: Tier) -> u64 {
        match tier {
            Tier::Device => self.device_bytes,
            Tier::Host => self.host_bytes,
            Tier::Disk => self.disk_bytes,
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} device(s): {}, {}, {}",
            self.devices,
            Tier::Device.describe(self.device_bytes),
            Tier::Host.describe(self.host_bytes),
            Tier::Disk.describe(self.disk_bytes),
        )?;
        if self.device_memory_is_host {
            f.write_str(" (device memory is host memory)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_devices_is_an_error() {
        assert!(matches!(
            Budget::new(0, 1, 1, 1),
            Err(PlanError::ZeroDevices)
        ));
        let err = Budget::from_devices(&[], &Resources::cpu(1)).unwrap_err();
        assert!(matches!(err, PlanError::ZeroDevices), "{err}");
    }

    #[test]
    fn budget_of_simulated_devices_is_the_cap() {
        let cap = 3 << 20;
        let resources = Resources::cpu(2).with_device_memory_cap(cap);
        let devices = resources.select().expect("2 simulated devices");
        let budget = Budget::from_devices(&devices, &resources).expect("budget");
        assert_eq!(budget.devices(), 2);
        assert_eq!(budget.device_bytes(), cap);
        assert!(budget.device_memory_is_host());
        assert!(budget.host_bytes() > 0);
    }

    #[test]
    fn budget_takes_the_smallest_free_device() {
        let resources = Resources::cpu(2).with_device_memory_cap(1 << 20);
        let devices = resources.select().expect("select");
        let held = devices[1].alloc_zeros::<u8>(1000).expect("alloc");
        let budget = Budget::from_devices(&devices, &resources).expect("budget");
        assert_eq!(budget.device_bytes(), (1 << 20) - 1000);
        drop(held);
    }

    #[test]
    fn host_cap_and_scratch_limit_bound_the_budget() {
        let scratch = tempfile::tempdir().expect("tempdir");
        let resources = Resources::cpu(1)
            .with_host_memory_cap(5000)
            .with_scratch_dir(scratch.path())
            .with_scratch_limit(7000);
        let devices = resources.select().expect("select");
        let budget = Budget::from_devices(&devices, &resources).expect("budget");
        assert_eq!(budget.host_bytes(), 5000);
        assert_eq!(budget.disk_bytes(), 7000);
        assert_eq!(budget.capacity(Tier::Host), 5000);
        assert_eq!(budget.capacity(Tier::Disk), 7000);
    }

    #[test]
    fn missing_scratch_directory_is_an_error() {
        let resources = Resources::cpu(1).with_scratch_dir("/no/such/dir/tutti-plan");
        let devices = resources.select().expect("select");
        let err = Budget::from_devices(&devices, &resources).unwrap_err();
        assert!(err.to_string().contains("/no/such/dir/tutti-plan"), "{err}");
    }

    #[test]
    fn tiers_describe_their_units() {
        assert_eq!(Tier::Device.describe(1536), "1.5 KiB per device");
        assert_eq!(Tier::Host.describe(100), "100 B of host memory");
        assert_eq!(Tier::Disk.describe(0), "0 B of scratch disk");
        assert!(Tier::Device < Tier::Host && Tier::Host < Tier::Disk);
        let budget = Budget::new(2, 100, 1000, 0)
            .expect("budget")
            .with_device_memory_is_host(true);
        assert_eq!(
            budget.to_string(),
            "2 device(s): 100 B per device, 1000 B of host memory, 0 B of scratch disk \
             (device memory is host memory)"
        );
    }
}
