//! Assigning experiments to ranks so that the slowest rank finishes early.

/// The modelled makespan of an assignment: the largest sum of costs on one rank.
pub fn makespan(costs: &[f64], assignment: &[usize], ranks: usize) -> f64 {
    let mut load = vec![0.0; ranks];
    for (&cost, &rank) in costs.iter().zip(assignment) {
        load[rank] += cost;
    }
    load.into_iter().fold(0.0, f64::max)
}

/// Contiguous blocks of experiments, as equal in count as possible: the starting
/// assignment. `assignment[e]` is the rank of experiment `e`.
pub fn block_assignment(experiments: usize, ranks: usize) -> Vec<usize> {
    (0..experiments)
        .map(|e| e * ranks / experiments.max(1))
        .collect()
}

/// Longest-processing-time-first: experiments in decreasing cost (ties by index), each to
/// the least loaded rank (ties to the lowest rank). Deterministic for given costs.
pub fn lpt_assignment(costs: &[f64], ranks: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by(|&a, &b| costs[b].total_cmp(&costs[a]).then(a.cmp(&b)));
    let mut load = vec![0.0_f64; ranks];
    let mut assignment = vec![0; costs.len()];
    for e in order {
        let rank = (0..ranks)
            .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
            .unwrap_or(0);
        load[rank] += costs[e];
        assignment[e] = rank;
    }
    assignment
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lpt_fixes_a_skewed_block_assignment() {
        let costs = [5.0, 5.0, 1.0, 1.0, 1.0, 1.0];
        let blocks = block_assignment(6, 2);
        assert_eq!(blocks, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(makespan(&costs, &blocks, 2), 11.0);
        let balanced = lpt_assignment(&costs, 2);
        assert_eq!(makespan(&costs, &balanced, 2), 7.0);
    }

    proptest! {
        #[test]
        fn lpt_is_within_its_bound_of_the_lower_bound(
            costs in prop::collection::vec(0.01f64..100.0, 1..40),
            ranks in 1usize..6,
        ) {
            let assignment = lpt_assignment(&costs, ranks);
            prop_assert!(assignment.iter().all(|&r| r < ranks));
            let total: f64 = costs.iter().sum();
            let largest = costs.iter().cloned().fold(0.0, f64::max);
            // Graham's bound for greedy list scheduling: the last job on the busiest rank
            // started when that rank was the least loaded, so the makespan is at most the
            // mean load plus the largest job.
            let span = makespan(&costs, &assignment, ranks);
            prop_assert!(span <= total / ranks as f64 + largest * (1.0 - 1.0 / ranks as f64) + 1e-9);
            prop_assert!(span >= (total / ranks as f64).max(largest) - 1e-9);
            let blocks = block_assignment(costs.len(), ranks);
            prop_assert!(blocks.iter().all(|&r| r < ranks));
        }
    }
}
