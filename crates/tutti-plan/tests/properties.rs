//! Property tests of the planner and the chunk helper, through the public API.

use proptest::prelude::*;
use tutti_plan::{
    largest_chunk, Budget, Headroom, ObjectSpec, Plan, PlanError, Planner, Scope, Tier,
};

fn tier() -> impl Strategy<Value = Tier> {
    prop_oneof![Just(Tier::Device), Just(Tier::Host), Just(Tier::Disk)]
}

fn objects() -> impl Strategy<Value = Vec<ObjectSpec>> {
    prop::collection::vec((0u64..200, 0u64..5, any::<bool>(), 0u64..4, tier()), 0..8).prop_map(
        |specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (bytes_each, count, shared, first_use, slowest))| {
                    let scope = if shared {
                        Scope::Shared
                    } else {
                        Scope::PerDevice
                    };
                    ObjectSpec::new(format!("object{i}"), bytes_each, count, scope)
                        .first_used_at(first_use)
                        .no_slower_than(slowest)
                })
                .collect()
        },
    )
}

fn planner() -> impl Strategy<Value = Planner> {
    (
        1usize..5,
        0u64..1500,
        0u64..3000,
        0u64..3000,
        any::<bool>(),
        (0u64..100, 0u64..300, 0u64..300),
    )
        .prop_map(|(devices, device, host, disk, simulated, (hd, hh, hk))| {
            let budget = Budget::new(devices, device, host, disk)
                .expect("at least one device")
                .with_device_memory_is_host(simulated);
            Planner::new(budget).with_headroom(Headroom {
                device: hd,
                host: hh,
                disk: hk,
            })
        })
}

/// Whether `object` fits on `tier` in what `plan` left free.
fn fits(object: &ObjectSpec, tier: Tier, plan: &Plan) -> bool {
    let devices = plan.budget().devices() as u64;
    let need = object
        .footprint(tier, plan.budget().devices())
        .expect("small sizes");
    let host_need = if tier == Tier::Device && plan.budget().device_memory_is_host() {
        need * devices
    } else {
        0
    };
    need <= plan.free(tier) && host_need <= plan.free(Tier::Host)
}

/// The objects placed before `objects[i]` under the rule: used earlier, or at the same
/// step and given earlier.
fn placed_before(objects: &[ObjectSpec], i: usize) -> Vec<ObjectSpec> {
    let key = |j: usize| (objects[j].first_use(), j);
    (0..objects.len())
        .filter(|&j| key(j) < key(i))
        .map(|j| objects[j].clone())
        .collect()
}

proptest! {
    #[test]
    fn a_plan_never_exceeds_a_tier(planner in planner(), objects in objects()) {
        let Ok(plan) = planner.plan(&objects) else { return Ok(()) };
        let budget = plan.budget();
        let devices = budget.devices() as u64;
        let headroom = plan.headroom();
        let mut used = [0u64; 3];
        prop_assert_eq!(plan.placements().len(), objects.len());
        for (placement, object) in plan.placements().iter().zip(&objects) {
            prop_assert_eq!(&placement.object, object);
            prop_assert!(placement.tier <= object.slowest_tier());
            let bytes = object.footprint(placement.tier, budget.devices()).expect("small");
            prop_assert_eq!(placement.bytes, bytes);
            match placement.tier {
                Tier::Device => {
                    used[0] += bytes;
                    if budget.device_memory_is_host() {
                        used[1] += bytes * devices;
                    }
                }
                Tier::Host => used[1] += bytes,
                Tier::Disk => used[2] += bytes,
            }
        }
        let device_headroom_on_host =
            if budget.device_memory_is_host() { headroom.device * devices } else { 0 };
        prop_assert!(used[0] + headroom.device <= budget.device_bytes());
        prop_assert!(used[1] + headroom.host + device_headroom_on_host <= budget.host_bytes());
        prop_assert!(used[2] + headroom.disk <= budget.disk_bytes());
        prop_assert_eq!(Tier::ALL.map(|t| plan.used(t)), used);
    }

    #[test]
    fn each_object_gets_the_fastest_tier_with_room_at_its_turn(
        planner in planner(),
        objects in objects(),
    ) {
        let Ok(plan) = planner.plan(&objects) else { return Ok(()) };
        for (i, placement) in plan.placements().iter().enumerate() {
            let before = planner.plan(&placed_before(&objects, i)).expect("a prefix fits");
            prop_assert!(fits(&objects[i], placement.tier, &before));
            for faster in Tier::ALL.into_iter().filter(|&t| t < placement.tier) {
                prop_assert!(!fits(&objects[i], faster, &before), "{} fits on {}", i, faster);
            }
        }
    }

    #[test]
    fn a_refusal_is_real_under_the_rule(planner in planner(), objects in objects()) {
        let shortfalls = match planner.plan(&objects) {
            Err(PlanError::DoesNotFit { shortfalls }) => shortfalls,
            Err(PlanError::HeadroomTooLarge { tier, needed, available }) => {
                prop_assert!(needed > available, "{} {} {}", tier, needed, available);
                return Ok(());
            }
            Err(other) => return Err(TestCaseError::fail(other.to_string())),
            Ok(_) => return Ok(()),
        };
        // The first object that fits nowhere, in order of use, really fits on no tier it
        // allows once the objects used before it are placed.
        let first = &shortfalls[0];
        let i = objects.iter().position(|o| o.name() == first.object).expect("named");
        let before = planner.plan(&placed_before(&objects, i)).expect("a prefix fits");
        let allowed: Vec<Tier> =
            Tier::ALL.into_iter().filter(|&t| t <= objects[i].slowest_tier()).collect();
        prop_assert_eq!(first.tiers.iter().map(|t| t.tier).collect::<Vec<_>>(), allowed.clone());
        for (tier, shortfall) in allowed.into_iter().zip(&first.tiers) {
            prop_assert!(!fits(&objects[i], tier, &before));
            let need = objects[i].footprint(tier, before.budget().devices()).expect("small");
            prop_assert_eq!(shortfall.needed, need);
        }
    }

    #[test]
    fn room_for_everything_on_disk_means_no_refusal(
        devices in 1usize..5,
        device in 0u64..1000,
        host in 0u64..1000,
        objects in objects(),
    ) {
        let objects: Vec<ObjectSpec> =
            objects.into_iter().map(|o| o.no_slower_than(Tier::Disk)).collect();
        let all_on_disk: u64 =
            objects.iter().map(|o| o.footprint(Tier::Disk, devices).expect("small")).sum();
        let budget = Budget::new(devices, device, host, all_on_disk).expect("budget");
        prop_assert!(Planner::new(budget).plan(&objects).is_ok());
    }

    #[test]
    fn planning_is_deterministic(planner in planner(), objects in objects()) {
        let first = planner.plan(&objects).map_err(|e| e.to_string());
        let again = planner.plan(&objects).map_err(|e| e.to_string());
        prop_assert_eq!(first, again);
    }

    #[test]
    fn largest_chunk_is_maximal(
        items in prop_oneof![0usize..1000, any::<usize>()],
        per_item in prop_oneof![0u64..100, any::<u64>()],
        fixed in prop_oneof![0u64..10_000, any::<u64>()],
        available in prop_oneof![0u64..100_000, any::<u64>()],
    ) {
        let need = |k: usize| u128::from(fixed) + k as u128 * u128::from(per_item);
        match largest_chunk(items, per_item, fixed, available) {
            Ok(chunking) if items == 0 => prop_assert_eq!((chunking.size, chunking.count), (0, 0)),
            Ok(chunking) => {
                let size = chunking.size;
                prop_assert!(size >= 1 && size <= items);
                prop_assert!(need(size) <= u128::from(available));
                prop_assert!(size == items || need(size + 1) > u128::from(available));
                prop_assert_eq!(chunking.count, items.div_ceil(size));
            }
            Err(err) => {
                prop_assert!(items > 0);
                prop_assert!(need(1) > u128::from(available), "{}", err);
            }
        }
    }
}
