//! Placement: deciding, before any work, which tier holds each object.

use std::collections::HashSet;

use crate::{Budget, ObjectSpec, PlanError, Shortfall, Tier, TierShortfall};

/// Bytes set aside on each tier before objects are placed: the working set a computation
/// needs besides its planned objects (buffers of a chunk, solver workspaces).
///
/// `device` is per device; `host` and `disk` are for the node. All in bytes; the default
/// sets nothing aside.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headroom {
    /// Bytes on every device.
    pub device: u64,
    /// Bytes of host memory.
    pub host: u64,
    /// Bytes of scratch disk.
    pub disk: u64,
}

impl Headroom {
    /// The headroom of `tier`: per device for [`Tier::Device`], for the node otherwise.
    pub fn get(&self, tier: Tier) -> u64 {
        match tier {
            Tier::Device => self.device,
            Tier::Host => self.host,
            Tier::Disk => self.disk,
        }
    }
}

/// Places objects within a [`Budget`], after setting aside a [`Headroom`].
///
/// The rule is greedy by order of use. Objects are taken in order of
/// [`ObjectSpec::first_use`] (ties in the order given); each goes to the fastest tier,
/// among those its [`ObjectSpec::slowest_tier`] allows, whose remaining budget still holds
/// its footprint ([`ObjectSpec::footprint`]), and that footprint is charged to the tier; on
/// simulated devices ([`Budget::device_memory_is_host`]) a device placement also charges
/// the host once per device. An object that fits nowhere makes the whole plan fail with
/// [`PlanError::DoesNotFit`], listing every such object with what it needed and what was
/// free (objects that did not fit are not charged). The same budget, headroom and objects
/// always give the same plan.
///
/// ```
/// use tutti_plan::{Budget, Headroom, ObjectSpec, Planner, Tier};
///
/// let budget = Budget::new(2, 100, 1000, 0)?;
/// let plan = Planner::new(budget)
///     .with_headroom(Headroom { device: 10, ..Headroom::default() })
///     .plan(&[ObjectSpec::per_device("a", 60, 1), ObjectSpec::per_device("b", 50, 1)])?;
/// assert_eq!(plan.tier_of("a"), Some(Tier::Device));
/// assert_eq!(plan.tier_of("b"), Some(Tier::Host));
/// # Ok::<(), tutti_plan::PlanError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planner {
    budget: Budget,
    headroom: Headroom,
}

impl Planner {
    /// A planner for `budget`, with no headroom.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            headroom: Headroom::default(),
        }
    }

    /// The same planner, setting `headroom` aside before placing objects.
    pub fn with_headroom(mut self, headroom: Headroom) -> Self {
        self.headroom = headroom;
        self
    }

    /// Places `objects` by the rule written on [`Planner`].
    ///
    /// Errors: [`PlanError::DuplicateObject`] when two objects share a name;
    /// [`PlanError::SizeOverflow`] when a footprint overflows `u64`;
    /// [`PlanError::HeadroomTooLarge`] when the headroom alone exceeds a tier;
    /// [`PlanError::DoesNotFit`] when some object fits on no tier allowed to it.
    pub fn plan(&self, objects: &[ObjectSpec]) -> Result<Plan, PlanError> {
        check_names(objects)?;
        let devices = self.budget.devices();
        let charges = objects
            .iter()
            .map(|object| Charges::of(object, devices, self.budget.device_memory_is_host()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut free = self.free_after_headroom()?;

        let mut order: Vec<usize> = (0..objects.len()).collect();
        order.sort_by_key(|&i| objects[i].first_use());

        let mut tiers = vec![None; objects.len()];
        let mut shortfalls = Vec::new();
        for i in order {
            let object = &objects[i];
            let charge = &charges[i];
            let allowed = Tier::ALL
                .into_iter()
                .filter(|&tier| tier <= object.slowest_tier());
            match allowed.clone().find(|&tier| charge.fits(tier, &free)) {
                Some(tier) => {
                    charge.take(tier, &mut free);
                    tiers[i] = Some(tier);
                }
                None => shortfalls.push(Shortfall {
                    object: object.name().to_string(),
                    tiers: allowed
                        .map(|tier| TierShortfall {
                            tier,
                            needed: charge.on(tier),
                            free: charge.room(tier, &free, devices),
                        })
                        .collect(),
                }),
            }
        }
        if !shortfalls.is_empty() {
            return Err(PlanError::DoesNotFit { shortfalls });
        }

        let mut used = [0u64; 3];
        let mut placements = Vec::with_capacity(objects.len());
        for ((object, charge), tier) in objects.iter().zip(&charges).zip(tiers) {
            // Every object got a tier, or the plan failed above.
            let Some(tier) = tier else { continue };
            used[index(tier)] += charge.on(tier);
            if tier == Tier::Device {
                used[index(Tier::Host)] += charge.device_on_host;
            }
            placements.push(Placement {
                object: object.clone(),
                tier,
                bytes: charge.on(tier),
            });
        }
        Ok(Plan {
            budget: self.budget,
            headroom: self.headroom,
            placements,
            used,
        })
    }

    /// Bytes left on each tier once the headroom is set aside, indexed by [`index`].
    fn free_after_headroom(&self) -> Result<[u64; 3], PlanError> {
        let budget = &self.budget;
        // On simulated devices every device's headroom is host memory as well.
        let host_needed = if budget.device_memory_is_host() {
            self.headroom
                .device
                .checked_mul(budget.devices() as u64)
                .and_then(|devices| devices.checked_add(self.headroom.host))
        } else {
            Some(self.headroom.host)
        };
        let mut free = [0; 3];
        for tier in Tier::ALL {
            let needed = match tier {
                Tier::Host => host_needed,
                _ => Some(self.headroom.get(tier)),
            };
            let available = budget.capacity(tier);
            free[index(tier)] = needed
                .and_then(|needed| available.checked_sub(needed))
                .ok_or(PlanError::HeadroomTooLarge {
                    tier,
                    needed: needed.unwrap_or(u64::MAX),
                    available,
                })?;
        }
        Ok(free)
    }
}

/// What one object would take from each tier.
struct Charges {
    /// Bytes on each tier if placed there, indexed by [`index`].
    on_tier: [u64; 3],
    /// Host bytes taken as well when placed on the device tier (simulated devices).
    device_on_host: u64,
}

impl Charges {
    fn of(
        object: &ObjectSpec,
        devices: usize,
        device_memory_is_host: bool,
    ) -> Result<Self, PlanError> {
        let overflow = |devices| PlanError::SizeOverflow {
            name: object.name().to_string(),
            bytes_each: object.bytes_each(),
            count: object.count(),
            devices,
        };
        let instance = object.instance_bytes().ok_or_else(|| overflow(1))?;
        let mut on_tier = [0; 3];
        for tier in Tier::ALL {
            on_tier[index(tier)] = object
                .footprint(tier, devices)
                .ok_or_else(|| overflow(devices))?;
        }
        let device_on_host = if device_memory_is_host {
            instance
                .checked_mul(devices as u64)
                .ok_or_else(|| overflow(devices))?
        } else {
            0
        };
        Ok(Self {
            on_tier,
            device_on_host,
        })
    }

    fn on(&self, tier: Tier) -> u64 {
        self.on_tier[index(tier)]
    }

    fn fits(&self, tier: Tier, free: &[u64; 3]) -> bool {
        let host_ok = tier != Tier::Device || self.device_on_host <= free[index(Tier::Host)];
        self.on(tier) <= free[index(tier)] && host_ok
    }

    /// Charges the object to `tier`; only after [`Charges::fits`] said it fits.
    fn take(&self, tier: Tier, free: &mut [u64; 3]) {
        free[index(tier)] -= self.on(tier);
        if tier == Tier::Device {
            free[index(Tier::Host)] -= self.device_on_host;
        }
    }

    /// Room on `tier` for an object of this kind, in the tier's units: on the device tier
    /// of simulated devices, also bounded by each device's share of the free host memory.
    fn room(&self, tier: Tier, free: &[u64; 3], devices: usize) -> u64 {
        let room = free[index(tier)];
        if tier == Tier::Device && self.device_on_host > 0 {
            room.min(free[index(Tier::Host)] / devices as u64)
        } else {
            room
        }
    }
}

fn index(tier: Tier) -> usize {
    match tier {
        Tier::Device => 0,
        Tier::Host => 1,
        Tier::Disk => 2,
    }
}

fn check_names(objects: &[ObjectSpec]) -> Result<(), PlanError> {
    let mut seen = HashSet::new();
    for object in objects {
        if !seen.insert(object.name()) {
            return Err(PlanError::DuplicateObject {
                name: object.name().to_string(),
            });
        }
    }
    Ok(())
}

/// Where one object lives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Placement {
    /// The object, as given.
    pub object: ObjectSpec,
    /// Its tier.
    pub tier: Tier,
    /// Bytes it takes there: per device on [`Tier::Device`], for the node otherwise.
    pub bytes: u64,
}

/// A feasible placement of objects within a budget.
///
/// Printing it (`Display`) gives a table with one row per object and a footer with each
/// tier's budget, headroom, use and free bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    budget: Budget,
    headroom: Headroom,
    placements: Vec<Placement>,
    used: [u64; 3],
}

impl Plan {
    /// The placements, in the order the objects were given.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// The placement of the object called `name`.
    pub fn placement(&self, name: &str) -> Option<&Placement> {
        self.placements.iter().find(|p| p.object.name() == name)
    }

    /// The tier of the object called `name`.
    pub fn tier_of(&self, name: &str) -> Option<Tier> {
        self.placement(name).map(|p| p.tier)
    }

    /// The budget planned against.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The headroom set aside.
    pub fn headroom(&self) -> &Headroom {
        &self.headroom
    }

    /// Bytes the placed objects take from `tier` (headroom not included): per device on
    /// [`Tier::Device`]; on [`Tier::Host`] this includes the device tier's objects when
    /// device memory is host memory.
    pub fn used(&self, tier: Tier) -> u64 {
        self.used[index(tier)]
    }

    /// Bytes of `tier` neither set aside as headroom nor used by objects, with the host
    /// tier's share of device headroom counted as for [`Plan::used`].
    pub fn free(&self, tier: Tier) -> u64 {
        let mut taken = self.headroom.get(tier).saturating_add(self.used(tier));
        if tier == Tier::Host && self.budget.device_memory_is_host() {
            let device_headroom = self
                .headroom
                .device
                .saturating_mul(self.budget.devices() as u64);
            taken = taken.saturating_add(device_headroom);
        }
        self.budget.capacity(tier).saturating_sub(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(budget: Budget, objects: &[ObjectSpec]) -> Result<Plan, PlanError> {
        Planner::new(budget).plan(objects)
    }

    fn budget(devices: usize, device: u64, host: u64, disk: u64) -> Budget {
        Budget::new(devices, device, host, disk).expect("budget")
    }

    /// Places `objects` and checks each one's tier and the use of each tier.
    fn check(budget: Budget, objects: &[ObjectSpec], tiers: &[Tier], used: [u64; 3]) {
        let plan = plan(budget, objects).expect("feasible");
        let got: Vec<Tier> = plan.placements().iter().map(|p| p.tier).collect();
        assert_eq!(got, tiers, "{plan}");
        assert_eq!(Tier::ALL.map(|t| plan.used(t)), used, "{plan}");
    }

    #[test]
    fn earliest_objects_get_the_fastest_tier() {
        use Tier::*;
        let a = ObjectSpec::per_device("a", 60, 1);
        let b = ObjectSpec::per_device("b", 50, 1);
        // One device, 100 B device, 1000 B host: a on the device, b on the host.
        check(
            budget(1, 100, 1000, 0),
            &[a.clone(), b.clone()],
            &[Device, Host],
            [60, 50, 0],
        );
        // Two devices: b has two instances on the host.
        check(
            budget(2, 100, 1000, 0),
            &[a.clone(), b.clone()],
            &[Device, Host],
            [60, 100, 0],
        );
        // b used first: b gets the device, a the host.
        check(
            budget(2, 100, 1000, 0),
            &[a.clone().first_used_at(1), b.clone()],
            &[Host, Device],
            [50, 120, 0],
        );
        // No host room: b spills to disk.
        check(
            budget(2, 100, 99, 1000),
            &[a.clone(), b.clone()],
            &[Device, Disk],
            [60, 0, 100],
        );
        // A later small object still takes the room a larger one left on the device.
        check(
            budget(1, 100, 1000, 0),
            &[a, b, ObjectSpec::shared("c", 10, 4)],
            &[Device, Host, Device],
            [100, 50, 0],
        );
    }

    #[test]
    fn shared_objects_are_replicated_on_devices_and_single_elsewhere() {
        use Tier::*;
        let input = ObjectSpec::shared("input", 25, 4);
        check(
            budget(3, 100, 1000, 0),
            std::slice::from_ref(&input),
            &[Device],
            [100, 0, 0],
        );
        check(budget(3, 99, 1000, 0), &[input], &[Host], [0, 100, 0]);
    }

    #[test]
    fn simulated_devices_charge_the_host_too() {
        use Tier::*;
        let shared_memory = |host| budget(2, 100, host, 1000).with_device_memory_is_host(true);
        let a = ObjectSpec::per_device("a", 60, 1);
        let b = ObjectSpec::per_device("b", 50, 1);
        // a takes 60 B on each of 2 devices, so 120 B of the host's 300 B.
        check(
            shared_memory(300),
            &[a.clone(), b.clone()],
            &[Device, Host],
            [60, 220, 0],
        );
        // Host 119 B: the two device copies of a (120 B) do not fit in it, so a goes to
        // disk, while the two copies of b (100 B) do.
        check(shared_memory(119), &[a, b], &[Disk, Device], [50, 100, 120]);
    }

    #[test]
    fn constraints_are_respected() {
        use Tier::*;
        let a = ObjectSpec::per_device("a", 60, 1);
        let b = ObjectSpec::per_device("b", 50, 1).no_slower_than(Host);
        check(
            budget(1, 100, 49, 1000),
            std::slice::from_ref(&a),
            &[Device],
            [60, 0, 0],
        );
        let err = plan(budget(1, 100, 49, 1000), &[a, b]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the plan does not fit: 'b' needs 50 B per device, 40 B free; \
             or 50 B of host memory, 49 B free"
        );
    }

    #[test]
    fn infeasible_plans_name_objects_and_numbers() {
        let gib = 1 << 30;
        let mpo = ObjectSpec::per_device("mpo", gib / 10, 412).no_slower_than(Tier::Device);
        let err = plan(budget(4, 12 * gib, 100 * gib, 0), &[mpo]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the plan does not fit: 'mpo' needs 41.2 GiB per device, 12.0 GiB free"
        );

        let a = ObjectSpec::per_device("a", 60, 1);
        let b = ObjectSpec::shared("b", 500, 1);
        let c = ObjectSpec::shared("c", 600, 1);
        let err = plan(budget(2, 50, 100, 200), &[a, b, c]).unwrap_err();
        match &err {
            PlanError::DoesNotFit { shortfalls } => {
                let names: Vec<&str> = shortfalls.iter().map(|s| s.object.as_str()).collect();
                assert_eq!(names, ["b", "c"]);
                assert_eq!(
                    shortfalls[0].tiers,
                    [
                        TierShortfall {
                            tier: Tier::Device,
                            needed: 500,
                            free: 50
                        },
                        TierShortfall {
                            tier: Tier::Host,
                            needed: 500,
                            free: 100
                        },
                        TierShortfall {
                            tier: Tier::Disk,
                            needed: 500,
                            free: 80
                        },
                    ]
                );
            }
            other => panic!("expected DoesNotFit, got {other}"),
        }
        assert!(
            err.to_string()
                .contains("'b' needs 500 B per device, 50 B free"),
            "{err}"
        );
        assert!(err.to_string().contains("; and 'c' needs 600 B"), "{err}");
    }

    #[test]
    fn headroom_is_set_aside_first() {
        let a = ObjectSpec::per_device("a", 60, 1);
        let headroom = Headroom {
            device: 50,
            host: 900,
            disk: 0,
        };
        let planned = Planner::new(budget(2, 100, 1000, 500))
            .with_headroom(headroom)
            .plan(std::slice::from_ref(&a))
            .expect("fits");
        // 50 B left per device; 100 B left on the host, 120 B needed there: disk.
        assert_eq!(planned.tier_of("a"), Some(Tier::Disk));
        assert_eq!(planned.free(Tier::Device), 50);
        assert_eq!(planned.free(Tier::Host), 100);
        assert_eq!(planned.free(Tier::Disk), 380);

        let err = Planner::new(budget(2, 100, 1000, 500))
            .with_headroom(Headroom {
                device: 101,
                ..Headroom::default()
            })
            .plan(&[a])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the working set needs 101 B per device, 100 B free"
        );

        // Simulated devices: each device's headroom comes out of host memory too.
        let err = Planner::new(budget(4, 100, 300, 0).with_device_memory_is_host(true))
            .with_headroom(Headroom {
                device: 80,
                ..Headroom::default()
            })
            .plan(&[])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the working set needs 320 B of host memory, 300 B free"
        );
    }

    #[test]
    fn bad_objects_are_errors() {
        let twice = [
            ObjectSpec::shared("x", 1, 1),
            ObjectSpec::per_device("x", 1, 1),
        ];
        let err = plan(budget(1, 10, 10, 10), &twice).unwrap_err();
        assert!(
            matches!(err, PlanError::DuplicateObject { ref name } if name == "x"),
            "{err}"
        );

        let huge = [ObjectSpec::per_device("huge", u64::MAX / 2, 1)];
        let err = plan(budget(3, u64::MAX, u64::MAX, u64::MAX), &huge).unwrap_err();
        assert!(
            matches!(err, PlanError::SizeOverflow { devices: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("object 'huge'"), "{err}");
    }

    #[test]
    fn empty_and_zero_sized_objects_plan_trivially() {
        let planned = plan(budget(1, 0, 0, 0), &[]).expect("empty plan");
        assert!(planned.placements().is_empty());
        let planned = plan(budget(1, 0, 0, 0), &[ObjectSpec::shared("none", 8, 0)])
            .expect("zero bytes fit anywhere");
        assert_eq!(planned.tier_of("none"), Some(Tier::Device));
        assert_eq!(planned.placement("none").map(|p| p.bytes), Some(0));
        assert_eq!(planned.tier_of("missing"), None);
    }
}
