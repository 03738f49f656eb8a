//! The basis sets shipped in the crate: NWChem text exported from basis_set_exchange by
//! `scripts/export_basis.py` (elements H to Ar), embedded with `include_str!`.

use super::BasisSet;
use crate::error::{AdjointError, Result};

/// The shipped basis sets' canonical names.
pub const BASIS_NAMES: [&str; 7] = [
    "sto-3g",
    "6-31g",
    "6-31g*",
    "cc-pvdz",
    "cc-pvtz",
    "def2-svp",
    "def2-tzvp",
];

const TEXTS: [&str; 7] = [
    include_str!("../../data/basis/sto-3g.nw"),
    include_str!("../../data/basis/6-31g.nw"),
    include_str!("../../data/basis/6-31g_star.nw"),
    include_str!("../../data/basis/cc-pvdz.nw"),
    include_str!("../../data/basis/cc-pvtz.nw"),
    include_str!("../../data/basis/def2-svp.nw"),
    include_str!("../../data/basis/def2-tzvp.nw"),
];

/// The shipped names, comma separated.
pub fn shipped_names() -> String {
    BASIS_NAMES.join(", ")
}

fn key(name: &str) -> String {
    name.to_ascii_lowercase()
        .replace("star", "*")
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .collect()
}

fn position(name: &str) -> Option<usize> {
    let wanted = key(name);
    BASIS_NAMES.iter().position(|known| key(known) == wanted)
}

pub(super) fn is_shipped(name: &str) -> bool {
    position(name).is_some()
}

pub(super) fn named(name: &str) -> Result<BasisSet> {
    let index = position(name).ok_or_else(|| AdjointError::UnknownBasis {
        name: name.to_string(),
        known: shipped_names(),
    })?;
    BasisSet::from_nwchem(TEXTS[index], BASIS_NAMES[index])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_set_parses_and_covers_h_to_ar() {
        for name in BASIS_NAMES {
            let set = named(name).unwrap();
            for z in 1..=18 {
                assert!(set.shells_for(z).is_some(), "{name} lacks Z = {z}");
            }
            assert!(set.shells_for(19).is_none());
        }
    }

    #[test]
    fn names_are_forgiving_and_unknown_names_are_errors() {
        assert!(is_shipped("STO-3G") && is_shipped("def2svp") && is_shipped("6-31G_star"));
        let message = named("6-311g").unwrap_err().to_string();
        assert!(
            message.contains("6-311g") && message.contains("def2-tzvp"),
            "{message}"
        );
    }

    #[test]
    fn cc_pvdz_oxygen_is_split_into_one_shell_per_column() {
        let set = named("cc-pvdz").unwrap();
        let oxygen = set.shells_for(8).unwrap();
        let ls: Vec<usize> = oxygen.iter().map(|s| s.l).collect();
        assert_eq!(ls, vec![0, 0, 0, 1, 1, 2]);
        assert_eq!(oxygen[2].exponents.len(), 9);
    }
}
