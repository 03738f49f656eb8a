//! The sweep's large objects for `tutti-plan`, sized from the stack's shapes and the sketch
//! width as `distributed.rs` allocates them.
//!
//! Per rank (sizes for rank 0, which owns the largest block of `c = ceil(s / G)` sketch
//! columns of the `s` columns split among `G` devices, and does the QR):
//!
//! - sketched environments, one object per site k in 1..n (`environment k`), `c x (product
//!   of the layers' left bonds at k)`: each on the tier the plan gives it, device, host or
//!   disk (spill files), from the left-to-right pass that makes it to the right-to-left pass
//!   that reads it (environment 0 is dropped once environment 1 exists);
//! - layer cores: the rank's copy of one site's cores, every layer's;
//! - sketch vectors: one site's block, `c x (d_out d_in)`;
//! - work buffers: the contraction intermediates of one site (two of the largest alive at a
//!   time, `env x cores` left to right, `S x cores` and this rank's rows of Y right to left)
//!   and the spares the sweep keeps for the next site (up to four);
//! - collective buffers: every rank's columns of the site's environment (the allgather's
//!   blocks and their concatenation), the gathered sketched matrix (`s x d_out d_in chi`) and
//!   its QR at rank 0, and the projected environment `S` (this rank's partial sum, reduced in
//!   place, and the previous `S`);
//! - the result at rank 0: its cores, bonds at most `s`.
//!
//! Once per process, shared by its ranks ([`crate::shared_cores`]):
//!
//! - streamed cores: what the layers' one stream per pass holds
//!   ([`Layer::cores_in_memory`]: an in-memory train's stream copies one core at a time, a
//!   `.npy` train's loader holds three) and the sites read and waiting for the slower ranks
//!   ([`LEAD`] at most).
//!
//! Environments are what the out-of-core sweep moves to the host or disk tiers (core copies
//! may sit on the host tier); the per-site objects must stay on the device. When some
//! environment is off the device, [`staged_environments`] (two of the largest) joins the
//! per-site objects and the plan is made again (`src.rs`).
//!
//! A 2-site stack is contracted exactly instead ([`exact_objects`]).

use tutti_plan::{ObjectSpec, Tier};

use crate::layer::Layer;
use crate::shared_cores::LEAD;
use crate::stack::Stack;
use crate::Scalar;

/// Spare buffers [`crate::tensor::Buffers`] keeps for the next site.
const SPARES: u64 = 4;

/// The objects of one sweep of `stack` with sketch width `width` on `devices` devices.
pub(crate) fn objects<T: Scalar>(
    stack: &Stack,
    layers: &[&dyn Layer<T>],
    width: usize,
    devices: usize,
) -> Vec<ObjectSpec> {
    let element = std::mem::size_of::<T>() as u64;
    let u = |x: usize| x as u64;
    let c = u(width.div_ceil(devices.max(1)));
    let s = u(width);
    let n = stack.sites;
    let depth = stack.depth();
    let bottom = depth - 1;

    // The result's bonds: at most s, and at most what either side of the bond can carry.
    let mut bonds = vec![1u64; n + 1];
    let phys: Vec<u64> = (0..n).map(|k| u(stack.phys(k))).collect();
    let mut left_product = 1u64;
    for k in 1..n {
        left_product = left_product.saturating_mul(phys[k - 1]);
        let right_product = phys[k..].iter().fold(1u64, |a, &p| a.saturating_mul(p));
        bonds[k] = s
            .min(left_product)
            .min(right_product)
            .min(u(stack.fused_left(k)));
    }

    // Per layer: its largest core, and what the process's one stream of it holds.
    let (cores, streamed) =
        layers
            .iter()
            .enumerate()
            .fold((0u64, 0u64), |(in_use, streamed), (l, layer)| {
                let sizes: Vec<u64> = stack.shapes[l]
                    .iter()
                    .map(|shape| {
                        u(shape.left)
                            .saturating_mul(u(shape.d_out))
                            .saturating_mul(u(shape.d_in))
                            .saturating_mul(u(shape.right))
                    })
                    .collect();
                let largest = sizes.iter().copied().max().unwrap_or(0);
                let held = match layer.cores_in_memory() {
                    None => sizes.iter().fold(0u64, |a, &b| a.saturating_add(b)),
                    Some(count) => u(count).saturating_mul(largest),
                };
                let waiting = u(LEAD).saturating_mul(largest);
                (
                    in_use.saturating_add(largest),
                    streamed.saturating_add(held).saturating_add(waiting),
                )
            });
    let sketch = phys.iter().map(|&p| c.saturating_mul(p)).max().unwrap_or(0);

    let mut intermediate = 0u64;
    let mut collective = 0u64;
    for k in 0..n {
        let shapes: Vec<_> = stack.shapes.iter().map(|layer| layer[k]).collect();
        let d_in = u(shapes[bottom].d_in);
        let chi = bonds[k + 1];
        let product = |range: std::ops::Range<usize>, f: &dyn Fn(usize) -> usize| {
            range.fold(1u64, |a, l| a.saturating_mul(u(f(l))))
        };
        for j in 0..depth {
            let d_out = u(shapes[j].d_out);
            // Left to right, after the layers j..=bottom: env x cores.
            let sketched = c
                .saturating_mul(product(0..j, &|l| shapes[l].left))
                .saturating_mul(d_out)
                .saturating_mul(product(j..depth, &|l| shapes[l].right))
                .saturating_mul(d_in);
            // Right to left, after the layers j..=bottom: S x cores.
            let projected = product(0..j, &|l| shapes[l].right)
                .saturating_mul(d_out)
                .saturating_mul(product(j..depth, &|l| shapes[l].left))
                .saturating_mul(d_in)
                .saturating_mul(chi);
            intermediate = intermediate.max(sketched).max(projected);
        }
        let row_width = phys[k].saturating_mul(chi);
        // This rank's block of Y (every row, its block of the bond), and its permuted copy.
        let bond_block = chi.div_ceil(u(devices.max(1)));
        let y_block = s.saturating_mul(phys[k]).saturating_mul(bond_block);
        intermediate = intermediate.max(y_block.saturating_mul(2));
        let rank_k = bonds[k];
        let gathered = s.saturating_mul(row_width);
        let qr = rank_k.saturating_mul(row_width);
        let s_env = rank_k.saturating_mul(u(stack.fused_left(k)));
        // Every rank's columns of the environment, received and concatenated, beside this
        // rank's S rows; the gathered blocks of Y and their concatenation, the QR's copy, Q^T
        // and the scattered blocks; this rank's S partial sum, reduced in place, and the
        // previous S.
        let env_gathered = s.saturating_mul(u(stack.fused_left(k)));
        let at_site = gathered
            .saturating_mul(2)
            .saturating_add(qr.saturating_mul(3))
            .max(s_env.saturating_mul(4))
            .max(env_gathered.saturating_mul(2).saturating_add(s_env));
        collective = collective.max(at_site);
    }
    let work = intermediate.saturating_mul(2 + SPARES);
    let result = (0..n).fold(0u64, |acc, k| {
        acc.saturating_add(
            bonds[k]
                .saturating_mul(phys[k])
                .saturating_mul(bonds[k + 1]),
        )
    });

    // The per-site objects first, so that they get the device tier and the environments are
    // the ones that move to slower tiers; the environment the right-to-left pass reads first
    // (site n-1) is placed first.
    let mut objects = vec![
        ObjectSpec::per_device("work buffers", element, work)
            .first_used_at(0)
            .no_slower_than(Tier::Device),
        ObjectSpec::per_device("sketch vectors", element, sketch)
            .first_used_at(0)
            .no_slower_than(Tier::Device),
        ObjectSpec::per_device("collective buffers", element, collective)
            .first_used_at(0)
            .no_slower_than(Tier::Device),
        ObjectSpec::per_device("layer cores", element, cores)
            .first_used_at(1)
            .no_slower_than(Tier::Host),
        ObjectSpec::shared("streamed cores", element, streamed)
            .first_used_at(1)
            .no_slower_than(Tier::Host),
    ];
    for k in (1..n).rev() {
        let bytes = c.saturating_mul(u(stack.fused_left(k)));
        objects.push(
            ObjectSpec::per_device(environment_name(k), element, bytes)
                .first_used_at(2)
                .no_slower_than(Tier::Disk),
        );
    }
    // The result is made during the right-to-left pass, while environments are still held,
    // and cannot spill: placed before them.
    objects.push(
        ObjectSpec::shared("result", element, result)
            .first_used_at(1)
            .no_slower_than(Tier::Host),
    );
    objects
}

/// The plan's name of the sketched environment left of site `k` (`1 <= k < n`).
pub(crate) fn environment_name(k: usize) -> String {
    format!("environment {k}")
}

/// The working set an out-of-core sweep adds when some environments are off the device:
/// two environments of the largest size (`element`s, per device), the one in use and the one
/// made or read back next.
pub(crate) fn staged_environments(element: u64, largest_environment: u64) -> ObjectSpec {
    ObjectSpec::per_device(STAGED, element, largest_environment.saturating_mul(2))
        .first_used_at(0)
        .no_slower_than(Tier::Device)
}

/// The name of [`staged_environments`] in plans.
pub(crate) const STAGED: &str = "staged environments";

/// The objects of the exact contraction of a 2-site stack (`compress_exact`, on the caller's
/// thread): every layer loaded, and the product's two cores `(1, p0, F)`, `(F, p1, 1)` with
/// `F` the product of the layers' middle bonds, four times (the product, its canonical form,
/// the factorisation's copy and its factors).
pub(crate) fn exact_objects<T: Scalar>(stack: &Stack) -> Vec<ObjectSpec> {
    let element = std::mem::size_of::<T>() as u64;
    let u = |x: usize| x as u64;
    let loaded = stack.shapes.iter().flatten().fold(0u64, |acc, shape| {
        acc.saturating_add(
            u(shape.left)
                .saturating_mul(u(shape.d_out))
                .saturating_mul(u(shape.d_in))
                .saturating_mul(u(shape.right)),
        )
    });
    let fused = u(stack.fused_left(stack.sites - 1));
    let product = (0..stack.sites)
        .map(|k| u(stack.phys(k)))
        .fold(0u64, u64::saturating_add)
        .saturating_mul(fused)
        .saturating_mul(4);
    vec![
        ObjectSpec::shared("layer cores", element, loaded)
            .first_used_at(0)
            .no_slower_than(Tier::Host),
        ObjectSpec::shared("exact product", element, product)
            .first_used_at(0)
            .no_slower_than(Tier::Device),
    ]
}
