//! The QR's share of an SRC sweep on 2 simulated devices: each site's sketch factored by the
//! distributed CholeskyQR2 (`SrcOptions::with_distributed_qr(true)`) beside the Householder QR
//! at rank 0 (the default), in the same process, runs alternating between the two; and the
//! speed-up of 2 ranks over 1 with one core each (one device on one core beside two devices
//! on the machine's two cores), so the split is measured without the threads inside a rank.
//!
//! Heisenberg XXZ times a random MPS of bond D on 24 sites, chi = D: the sketches are up to
//! 2D x D. For each D it prints the fastest sweep of each path, its QR seconds and share of
//! the sweep, the ratio split / rank 0 of the QR step, and one-rank time over two-rank time;
//! the results must agree to 1e-12.

use std::error::Error;

use serde_json::json;
use tutti_backend::Resources;
use tutti_benches::{random_mps, write_results};
use tutti_sweep::{distance, heisenberg_xxz, norm, src, Layer, SrcOptions};

const SITES: usize = 24;
const RUNS: usize = 7;

fn main() -> Result<(), Box<dyn Error>> {
    let h = heisenberg_xxz(SITES, 1.0, 0.5, 0.0)?;
    let mut rows = Vec::new();
    println!("sweep_qr: XXZ x random MPS, n {SITES}, 2 simulated devices, best of {RUNS}");
    for bond in [64, 128, 256] {
        let psi = random_mps(SITES, bond, bond as u64)?;
        let layers: [&dyn Layer<f64>; 2] = [&h, &psi];
        let options = SrcOptions::new(bond)
            .with_seed(1)
            .with_resources(Resources::cpu(2));
        let one_rank = SrcOptions::new(bond)
            .with_seed(1)
            .with_resources(Resources::cpu(1).with_host_cores(1));
        let configurations = [
            options.clone(),
            options.clone().with_distributed_qr(true),
            one_rank,
        ];
        let mut best = [None, None, None];
        for _ in 0..RUNS {
            for (slot, configuration) in best.iter_mut().zip(&configurations) {
                let (train, info) = src(&layers, configuration)?;
                if slot
                    .as_ref()
                    .is_none_or(|(_, b): &(_, tutti_sweep::SrcInfo)| info.seconds < b.seconds)
                {
                    *slot = Some((train, info));
                }
            }
        }
        let [Some((rank_zero, before)), Some((split, after)), Some((alone, single))] = best else {
            return Err("no run".into());
        };
        let gap = distance(&split, &rank_zero)? / norm(&rank_zero);
        let gap_alone = distance(&alone, &rank_zero)? / norm(&rank_zero);
        if gap.max(gap_alone) > 1e-12 {
            return Err(format!("D {bond}: the paths differ by {gap:e}, {gap_alone:e}").into());
        }
        let ms = |s: f64| 1e3 * s;
        println!(
            "  D {bond}: rank 0 QR {:.1} ms of a {:.1} ms sweep; split QR {:.1} ms of {:.1} ms \
             ({:.2}x the rank-0 QR; {} sites split, {} shifted, {} Householder)",
            ms(before.qr.seconds),
            ms(before.seconds),
            ms(after.qr.seconds),
            ms(after.seconds),
            after.qr.seconds / before.qr.seconds,
            after.qr.distributed,
            after.qr.shifted,
            after.qr.householder,
        );
        let speedup = single.seconds / before.seconds.min(after.seconds);
        println!(
            "        QR share {:.0}% (rank 0) -> {:.0}% (split); 1 rank on 1 core {:.1} ms (QR \
             {:.0}%): 2 ranks {speedup:.2}x faster",
            100.0 * before.qr.seconds / before.seconds,
            100.0 * after.qr.seconds / after.seconds,
            ms(single.seconds),
            100.0 * single.qr.seconds / single.seconds,
        );
        rows.push(json!({
            "bond": bond,
            "rank_zero_qr_seconds": before.qr.seconds,
            "rank_zero_sweep_seconds": before.seconds,
            "split_qr_seconds": after.qr.seconds,
            "split_sweep_seconds": after.seconds,
            "relative_difference": gap,
            "one_rank_one_core_seconds": single.seconds,
            "one_rank_qr_seconds": single.qr.seconds,
            "two_ranks_over_one": speedup,
        }));
    }
    let path = write_results(
        "sweep_qr",
        json!({ "sites": SITES, "devices": 2, "runs": rows }),
    )?;
    println!("results: {}", path.display());
    Ok(())
}
