//! Computes every Schwarz-surviving canonical shell quartet of a molecule's basis once, per
//! angular-momentum class, and prints the class counts and times: the ERI kernel alone, for
//! profiling (`valgrind --tool=callgrind`) and timing, and a hash of the blocks' bits.
//! `cargo run --release -p tutti-adjoint --example eri_profile -- FILE.xyz BASIS`.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use tutti_adjoint::integrals::{EriEngine, EriWorkspace};
use tutti_adjoint::{AngularKind, Basis, BasisSet, Molecule};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(xyz), Some(basis_name)) = (args.get(1), args.get(2)) else {
        return Err("usage: eri_profile FILE.xyz BASIS".into());
    };
    let molecule = Molecule::from_xyz(&std::fs::read_to_string(xyz)?)?;
    let basis = Basis::new(
        &molecule,
        &BasisSet::load(basis_name)?,
        AngularKind::Spherical,
    )?;
    let engine = EriEngine::new(&basis);
    let pairs = engine.pairs();
    let degree = |set: usize| engine.set(set).degree;
    let mut classes: BTreeMap<[usize; 4], (usize, f64)> = BTreeMap::new();
    let mut workspace = EriWorkspace::new();
    let mut checksum = 0.0;
    // A hash of every block's bits: a change of the kernel that keeps the arithmetic keeps it.
    let mut bits = 0u64;
    let start = Instant::now();
    for (bra, bra_pair) in pairs.iter().enumerate() {
        for ket_pair in &pairs[..=bra] {
            if bra_pair.schwarz * ket_pair.schwarz < 1e-14 {
                continue;
            }
            let ket = tutti_adjoint::integrals::eri::pair_index(ket_pair.a, ket_pair.b);
            let t = Instant::now();
            let block = engine.canonical_quartet(bra, ket, &mut workspace);
            checksum += block.iter().sum::<f64>();
            bits = bits.rotate_left(5)
                ^ block
                    .iter()
                    .fold(0u64, |hash, value| hash.rotate_left(7) ^ value.to_bits());
            let key = [
                degree(bra_pair.a),
                degree(bra_pair.b),
                degree(ket_pair.a),
                degree(ket_pair.b),
            ];
            let entry = classes.entry(key).or_default();
            entry.0 += 1;
            entry.1 += t.elapsed().as_secs_f64();
        }
    }
    let total = start.elapsed().as_secs_f64();
    // A reader that stops early (`| head`) ends the report quietly, not with a panic.
    match report(&basis, &engine, total, checksum, bits, classes) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result?),
    }
}

/// Prints the totals and the 20 dearest classes.
fn report(
    basis: &Basis,
    engine: &EriEngine,
    total: f64,
    checksum: f64,
    bits: u64,
    classes: BTreeMap<[usize; 4], (usize, f64)>,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "nao {} shells {} quartets {} total {total:.4} s checksum {checksum:.12e} bits {bits:016x}",
        basis.nao(),
        engine.shell_count(),
        classes.values().map(|(count, _)| count).sum::<usize>()
    )?;
    let letters = ['s', 'p', 'd', 'f', 'g'];
    let mut rows: Vec<_> = classes.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    for (key, (count, seconds)) in rows.iter().take(20) {
        let name: String = key
            .iter()
            .map(|&l| letters.get(l).copied().unwrap_or('?'))
            .collect();
        writeln!(
            out,
            "({}{}|{}{}) {count:>8} quartets {seconds:.4} s {:.1}%",
            &name[0..1],
            &name[1..2],
            &name[2..3],
            &name[3..4],
            100.0 * seconds / total
        )?;
    }
    Ok(())
}
