//! Objects to place: what a workload will hold, and how big it is.

use std::fmt;

use crate::Tier;

/// Whether every device needs its own instance of an object or one serves the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Each device holds its own instance (a private workspace, or its part of a split
    /// array): on the device tier it takes its size on every device; on host or disk, the
    /// instances of all devices take `devices` times its size.
    PerDevice,
    /// One instance for the node (read-only input, say): on the device tier it is
    /// replicated and takes its size on every device; on host or disk, one copy.
    Shared,
}

impl Scope {
    /// `"per device"` or `"shared"`, as printed in plans.
    pub fn name(self) -> &'static str {
        match self {
            Scope::PerDevice => "per device",
            Scope::Shared => "shared",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A large object a workload will hold: `count` items of `bytes_each` bytes.
///
/// The size of one instance is `bytes_each * count` bytes; [`Scope`] says how many
/// instances there are. Objects are placed in order of [`ObjectSpec::first_use`] (ties in
/// the order given), each on the fastest tier that still has room, never slower than
/// [`ObjectSpec::slowest_tier`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSpec {
    name: String,
    bytes_each: u64,
    count: u64,
    scope: Scope,
    first_use: u64,
    slowest_tier: Tier,
}

impl ObjectSpec {
    /// An object each device holds its own instance of: `count` items of `bytes_each`
    /// bytes per device. Used first at step 0, allowed on every tier.
    pub fn per_device(name: impl Into<String>, bytes_each: u64, count: u64) -> Self {
        Self::new(name, bytes_each, count, Scope::PerDevice)
    }

    /// An object of which one instance, `count` items of `bytes_each` bytes, serves the
    /// node. Used first at step 0, allowed on every tier.
    pub fn shared(name: impl Into<String>, bytes_each: u64, count: u64) -> Self {
        Self::new(name, bytes_each, count, Scope::Shared)
    }

    /// An object of the given scope. Used first at step 0, allowed on every tier.
    pub fn new(name: impl Into<String>, bytes_each: u64, count: u64, scope: Scope) -> Self {
        Self {
            name: name.into(),
            bytes_each,
            count,
            scope,
            first_use: 0,
            slowest_tier: Tier::Disk,
        }
    }

    /// The same object, first used at step `step` of the computation: earlier steps are
    /// placed first and so get the faster tiers. Steps are only compared, never counted.
    pub fn first_used_at(mut self, step: u64) -> Self {
        self.first_use = step;
        self
    }

    /// The same object, never placed on a tier slower than `tier`: [`Tier::Device`] means
    /// "must live in device memory", [`Tier::Host`] "must not spill to disk".
    pub fn no_slower_than(mut self, tier: Tier) -> Self {
        self.slowest_tier = tier;
        self
    }

    /// The object's name, unique within a plan.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of one item.
    pub fn bytes_each(&self) -> u64 {
        self.bytes_each
    }

    /// Items in one instance.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Per device or shared.
    pub fn scope(&self) -> Scope {
        self.scope
    }

    /// The step at which the object is first used.
    pub fn first_use(&self) -> u64 {
        self.first_use
    }

    /// The slowest tier the object may be placed on.
    pub fn slowest_tier(&self) -> Tier {
        self.slowest_tier
    }

    /// Bytes of one instance, `bytes_each * count`; `None` when that overflows `u64`.
    pub fn instance_bytes(&self) -> Option<u64> {
        self.bytes_each.checked_mul(self.count)
    }

    /// Bytes the object takes on `tier` with `devices` devices, or `None` on overflow:
    /// per device on [`Tier::Device`]; for the node on host and disk, where a
    /// [`Scope::PerDevice`] object takes `devices` instances.
    pub fn footprint(&self, tier: Tier, devices: usize) -> Option<u64> {
        let instance = self.instance_bytes()?;
        match (tier, self.scope) {
            (Tier::Device, _) | (_, Scope::Shared) => Some(instance),
            (_, Scope::PerDevice) => instance.checked_mul(devices as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprints_follow_scope() {
        let own = ObjectSpec::per_device("workspace", 10, 3);
        let one = ObjectSpec::shared("input", 10, 3);
        for (object, device, host, disk) in [(&own, 30, 120, 120), (&one, 30, 30, 30)] {
            assert_eq!(object.footprint(Tier::Device, 4), Some(device));
            assert_eq!(object.footprint(Tier::Host, 4), Some(host));
            assert_eq!(object.footprint(Tier::Disk, 4), Some(disk));
        }
        assert_eq!(ObjectSpec::shared("x", u64::MAX, 2).instance_bytes(), None);
        let big = ObjectSpec::per_device("x", u64::MAX / 2, 1);
        assert_eq!(big.footprint(Tier::Device, 3), Some(u64::MAX / 2));
        assert_eq!(big.footprint(Tier::Host, 3), None);
    }

    #[test]
    fn builders_set_use_and_constraint() {
        let object = ObjectSpec::per_device("a", 1, 2)
            .first_used_at(7)
            .no_slower_than(Tier::Host);
        assert_eq!(object.first_use(), 7);
        assert_eq!(object.slowest_tier(), Tier::Host);
        assert_eq!(object.scope().to_string(), "per device");
        assert_eq!(object.name(), "a");
    }
}
