//! Deterministic shares of cost-sorted tasks among ranks: longest processing time first.
//!
//! The ranks of a group each work their share on their own pool, with no stealing between
//! ranks, so the shares must be balanced by estimate. Dealing round-robin gives rank 0 the
//! larger task of every round; here each task, largest first, goes to the rank whose share
//! is the smallest so far (ties to the lowest rank), which bounds the largest share by the
//! average plus one task. The shares depend only on the costs and the rank count, never on
//! timing, so a split run is the same bits run to run.

/// The positions (into `costs`, which the caller sorted largest first) of the tasks that
/// `rank` of `ranks` takes, in order. A `rank` at or beyond `ranks` takes nothing.
pub(crate) fn rank_share(costs: &[f64], rank: usize, ranks: usize) -> Vec<usize> {
    let ranks = ranks.max(1);
    if ranks == 1 {
        return if rank == 0 {
            (0..costs.len()).collect()
        } else {
            Vec::new()
        };
    }
    let mut loads = vec![0.0f64; ranks];
    let mut share = Vec::new();
    for (position, &cost) in costs.iter().enumerate() {
        let lightest = (0..ranks)
            .min_by(|&x, &y| loads[x].total_cmp(&loads[y]).then(x.cmp(&y)))
            .unwrap_or(0);
        loads[lightest] += cost;
        if lightest == rank {
            share.push(position);
        }
    }
    share
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every task is taken by exactly one rank, in order, and no share exceeds the
        /// average by more than the largest task.
        #[test]
        fn shares_partition_the_tasks_and_are_balanced(
            mut costs in prop::collection::vec(0.0f64..1e6, 0..300),
            ranks in 1usize..6,
        ) {
            costs.sort_by(|a, b| b.total_cmp(a));
            let shares: Vec<Vec<usize>> = (0..ranks).map(|r| rank_share(&costs, r, ranks)).collect();
            let mut all: Vec<usize> = shares.concat();
            all.sort_unstable();
            prop_assert_eq!(all, (0..costs.len()).collect::<Vec<_>>());
            let total: f64 = costs.iter().sum();
            let largest = costs.first().copied().unwrap_or(0.0);
            for share in &shares {
                prop_assert!(share.windows(2).all(|w| w[0] < w[1]));
                let load: f64 = share.iter().map(|&i| costs[i]).sum();
                prop_assert!(load <= total / ranks as f64 + largest + 1e-6 * total);
            }
            prop_assert!(rank_share(&costs, ranks, ranks).is_empty());
        }
    }

    #[test]
    fn equal_costs_alternate_like_round_robin() {
        let costs = [1.0; 5];
        assert_eq!(rank_share(&costs, 0, 2), vec![0, 2, 4]);
        assert_eq!(rank_share(&costs, 1, 2), vec![1, 3]);
    }
}
