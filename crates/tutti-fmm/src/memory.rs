//! The memory plan of an evaluation: its large objects, placed by `tutti-plan` on the device
//! tier before any work, or a refusal with the numbers.
//!
//! The FMM keeps everything in device memory (it has no out-of-core path), so every object
//! is `no_slower_than(Tier::Device)`: a cap too small for the tree, the expansions and one
//! chunk of working memory is an error up front, never ignored.

use tutti_backend::Device;
use tutti_plan::{Budget, ObjectSpec, Plan, Planner, Tier};

use crate::basis::Basis;
use crate::options::FmmOptions;
use crate::partition::Partition;
use crate::traversal::InteractionLists;
use crate::tree::{Node, Octree};
use crate::FmmError;

/// Default working memory per rank when the options leave it to the planner.
const DEFAULT_WORKING_MEMORY: u64 = 256 << 20;

/// Bytes per body of the sorted copy: position, strength and input index.
const BODY_BYTES: u64 = 3 * 8 + 8 + 8;

/// Bytes per evaluated body: the potential and the acceleration.
const FIELD_BYTES: u64 = 4 * 8;

/// The placed objects and the working memory each rank's chunks may use.
pub(crate) struct MemoryPlan {
    /// Where every object lives (all on the device tier).
    pub plan: Plan,
    /// Bytes per rank for the chunked M2L and P2P phases.
    pub working_memory: u64,
}

/// What one evaluation holds, for the planner.
pub(crate) struct Footprint<'a> {
    /// The tree.
    pub tree: &'a Octree,
    /// The interaction lists.
    pub lists: &'a InteractionLists,
    /// The expansion basis.
    pub basis: &'a Basis,
    /// The split of the target leaves among ranks.
    pub partition: &'a Partition,
}

impl Footprint<'_> {
    fn objects(&self) -> Vec<ObjectSpec> {
        let nodes = self.tree.nodes.len() as u64;
        let terms = self.basis.len() as u64;
        let list_entries = (self.lists.m2l.len() + self.lists.p2p.len()) as u64;
        let largest_share = self
            .partition
            .leaf_ranges
            .iter()
            .map(|range| {
                self.tree.leaves[range.clone()]
                    .iter()
                    .map(|&leaf| self.tree.nodes[leaf as usize].bodies() as u64)
                    .sum::<u64>()
            })
            .max()
            .unwrap_or(0);
        let on_device = |spec: ObjectSpec| spec.no_slower_than(Tier::Device);
        vec![
            on_device(ObjectSpec::shared(
                "bodies (sorted)",
                BODY_BYTES,
                self.tree.positions.len() as u64,
            )),
            on_device(ObjectSpec::shared(
                "tree nodes",
                std::mem::size_of::<Node>() as u64,
                nodes,
            )),
            on_device(ObjectSpec::shared(
                "interaction lists",
                4,
                list_entries.saturating_add(4 * nodes),
            )),
            on_device(ObjectSpec::per_device("multipoles", 8 * terms, nodes)),
            on_device(ObjectSpec::per_device("local expansions", 8 * terms, nodes)),
            on_device(ObjectSpec::per_device(
                "fields of the rank's bodies",
                FIELD_BYTES,
                largest_share,
            )),
        ]
    }
}

/// Plans the objects of `footprint` on `devices`, then the working memory: the option's, or
/// half of what the objects leave free on a device, at most 256 MiB.
///
/// Errors: [`FmmError::Plan`] when the objects and working memory do not fit the caps or the
/// devices.
pub(crate) fn plan_memory(
    footprint: &Footprint<'_>,
    devices: &[Device],
    options: &FmmOptions,
) -> Result<MemoryPlan, FmmError> {
    let planner = Planner::new(Budget::from_devices(devices, &options.resources)?);
    let mut objects = footprint.objects();
    let working_memory = match options.working_memory {
        Some(bytes) => bytes,
        None => {
            let free = planner.plan(&objects)?.free(Tier::Device);
            (free / 2).clamp(1, DEFAULT_WORKING_MEMORY)
        }
    };
    objects.push(
        ObjectSpec::per_device("M2L and P2P working memory", working_memory, 1)
            .no_slower_than(Tier::Device),
    );
    let plan = planner.plan(&objects)?;
    Ok(MemoryPlan {
        plan,
        working_memory,
    })
}
