//! Molecules: nuclei (charge, position in bohr), electron count, nuclear repulsion.

use crate::error::{invalid, AdjointError, Result};

/// Bohr radius in Angstrom, the value PySCF uses (`pyscf.lib.param.BOHR`, CODATA 2010), so that
/// XYZ geometries map to the same bohr coordinates as in PySCF.
pub const ANGSTROM_PER_BOHR: f64 = 0.52917721092;

/// Element symbols by nuclear charge (index 0 is unused).
const SYMBOLS: [&str; 37] = [
    "", "H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S",
    "Cl", "Ar", "K", "Ca", "Sc", "Ti", "V", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge",
    "As", "Se", "Br", "Kr",
];

/// The nuclear charge of an element symbol (case-insensitive, H to Kr).
pub fn charge_of(symbol: &str) -> Result<u32> {
    SYMBOLS
        .iter()
        .position(|s| !s.is_empty() && s.eq_ignore_ascii_case(symbol))
        .map(|z| z as u32)
        .ok_or_else(|| AdjointError::UnknownElement {
            symbol: symbol.to_string(),
        })
}

/// The symbol of a nuclear charge (`"H"` for 1), or `"?"` outside H to Kr.
pub fn symbol_of(charge: u32) -> &'static str {
    SYMBOLS
        .get(charge as usize)
        .copied()
        .filter(|s| !s.is_empty())
        .unwrap_or("?")
}

/// One nucleus: element and position.
#[derive(Clone, Debug, PartialEq)]
pub struct Atom {
    /// Nuclear charge Z (1 = H).
    pub charge: u32,
    /// Position in bohr.
    pub position: [f64; 3],
}

impl Atom {
    /// The element symbol.
    pub fn symbol(&self) -> &'static str {
        symbol_of(self.charge)
    }
}

/// A molecule: atoms (positions in bohr) and a total charge. Closed shell for RHF.
#[derive(Clone, Debug, PartialEq)]
pub struct Molecule {
    atoms: Vec<Atom>,
    charge: i32,
}

impl Molecule {
    /// A neutral molecule from (symbol, position in bohr) pairs.
    ///
    /// Errors: no atoms, an unknown symbol, a non-finite coordinate, two nuclei closer than
    /// 1e-6 bohr.
    pub fn from_bohr(atoms: &[(&str, [f64; 3])]) -> Result<Self> {
        let atoms = atoms
            .iter()
            .map(|(symbol, position)| {
                Ok(Atom {
                    charge: charge_of(symbol)?,
                    position: *position,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Self::new(atoms, 0)
    }

    /// A molecule from atoms (positions in bohr) and a total charge (electrons removed).
    ///
    /// Errors as [`Molecule::from_bohr`], plus a charge leaving a negative electron count.
    pub fn new(atoms: Vec<Atom>, charge: i32) -> Result<Self> {
        if atoms.is_empty() {
            return Err(invalid("atoms", "a molecule needs at least one atom"));
        }
        for (index, atom) in atoms.iter().enumerate() {
            if atom.charge == 0 || atom.charge as usize >= SYMBOLS.len() {
                return Err(invalid(
                    "atoms",
                    format!(
                        "atom {index}: nuclear charge {} outside 1..=36",
                        atom.charge
                    ),
                ));
            }
            if atom.position.iter().any(|x| !x.is_finite()) {
                return Err(invalid(
                    "atoms",
                    format!("atom {index}: non-finite coordinate {:?}", atom.position),
                ));
            }
        }
        for i in 0..atoms.len() {
            for j in 0..i {
                if distance(&atoms[i].position, &atoms[j].position) < 1e-6 {
                    return Err(invalid(
                        "atoms",
                        format!("atoms {j} and {i} coincide (closer than 1e-6 bohr)"),
                    ));
                }
            }
        }
        let molecule = Self { atoms, charge };
        let nuclear: i64 = molecule.atoms.iter().map(|a| i64::from(a.charge)).sum();
        if nuclear - i64::from(charge) < 0 {
            return Err(invalid(
                "charge",
                format!("charge {charge} exceeds the nuclear charge {nuclear}"),
            ));
        }
        Ok(molecule)
    }

    /// Parses an XYZ file's text: a count line, a comment line, then `symbol x y z` per atom in
    /// Angstrom (converted with [`ANGSTROM_PER_BOHR`]). Extra lines after the atoms must be
    /// blank. A symbol may carry a label suffix after digits or `_` (`O1`, `H_a`).
    ///
    /// Errors ([`AdjointError::Xyz`], naming the line): a count that is not a positive integer
    /// or that the lines do not match (fewer atom lines, or non-blank lines beyond them), a
    /// malformed atom line; then those of [`Molecule::new`].
    pub fn from_xyz(text: &str) -> Result<Self> {
        let mut lines = text.lines().enumerate();
        let count_line = lines.next().ok_or(AdjointError::Xyz {
            line: 1,
            message: "empty input; expected the atom count".into(),
        })?;
        let count: usize = count_line.1.trim().parse().map_err(|_| AdjointError::Xyz {
            line: 1,
            message: format!(
                "expected the atom count (a positive integer), found `{}`",
                count_line.1.trim()
            ),
        })?;
        if count == 0 {
            return Err(AdjointError::Xyz {
                line: 1,
                message: "atom count is 0; expected at least one atom".into(),
            });
        }
        if lines.next().is_none() {
            return Err(AdjointError::Xyz {
                line: 2,
                message: "missing the comment line".into(),
            });
        }
        // The count is untrusted: refuse one the text cannot hold before reserving anything,
        // so the reservation is bounded by the input's size.
        let remaining = lines.clone().count();
        if count > remaining {
            return Err(AdjointError::Xyz {
                line: 1,
                message: format!(
                    "truncated: {count} atoms announced, only {remaining} lines follow the \
                     comment line"
                ),
            });
        }
        let mut atoms = Vec::with_capacity(count);
        for _ in 0..count {
            let (index, line) = lines.next().ok_or(AdjointError::Xyz {
                line: atoms.len() + 3,
                message: format!("truncated: {count} atoms announced, {} found", atoms.len()),
            })?;
            atoms.push(parse_xyz_atom(line, index + 1)?);
        }
        for (index, line) in lines {
            if !line.trim().is_empty() {
                return Err(AdjointError::Xyz {
                    line: index + 1,
                    message: format!("more atoms than the {count} announced"),
                });
            }
        }
        Self::new(atoms, 0)
    }

    /// The atoms, positions in bohr.
    pub fn atoms(&self) -> &[Atom] {
        &self.atoms
    }

    /// The total charge.
    pub fn charge(&self) -> i32 {
        self.charge
    }

    /// The same molecule with another total charge.
    pub fn with_charge(self, charge: i32) -> Result<Self> {
        Self::new(self.atoms, charge)
    }

    /// The number of electrons: sum of Z minus the charge.
    pub fn electron_count(&self) -> usize {
        let nuclear: i64 = self.atoms.iter().map(|a| i64::from(a.charge)).sum();
        (nuclear - i64::from(self.charge)).max(0) as usize
    }

    /// Nuclear repulsion energy sum_{A<B} Z_A Z_B / R_AB, hartree.
    pub fn nuclear_repulsion(&self) -> f64 {
        let mut energy = 0.0;
        for (i, a) in self.atoms.iter().enumerate() {
            for b in &self.atoms[..i] {
                energy +=
                    f64::from(a.charge) * f64::from(b.charge) / distance(&a.position, &b.position);
            }
        }
        energy
    }
}

fn distance(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

fn parse_xyz_atom(line: &str, line_number: usize) -> Result<Atom> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 4 {
        return Err(AdjointError::Xyz {
            line: line_number,
            message: format!("expected `symbol x y z`, found `{}`", line.trim()),
        });
    }
    let symbol: String = fields[0]
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let charge = match fields[0].parse::<u32>() {
        Ok(z) => z,
        Err(_) => charge_of(&symbol).map_err(|_| AdjointError::Xyz {
            line: line_number,
            message: format!("unknown element `{}`", fields[0]),
        })?,
    };
    let mut position = [0.0; 3];
    for (axis, field) in fields[1..4].iter().enumerate() {
        let value: f64 = field.parse().map_err(|_| AdjointError::Xyz {
            line: line_number,
            message: format!("coordinate `{field}` is not a number"),
        })?;
        if !value.is_finite() {
            return Err(AdjointError::Xyz {
                line: line_number,
                message: format!("coordinate `{field}` is not finite"),
            });
        }
        position[axis] = value / ANGSTROM_PER_BOHR;
    }
    Ok(Atom { charge, position })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xyz_water_in_bohr_and_repulsion() {
        let text = "3\nwater\nO 0 0 0\nH 0 0.7569503 0.5858823\nH 0 -0.7569503 0.5858823\n";
        let molecule = Molecule::from_xyz(text).unwrap();
        assert_eq!(molecule.electron_count(), 10);
        let h = molecule.atoms()[1].position;
        assert!((h[1] - 0.7569503 / ANGSTROM_PER_BOHR).abs() < 1e-15);
        assert!(molecule.nuclear_repulsion() > 9.0);
    }

    #[test]
    fn bad_xyz_is_an_error_with_the_line() {
        for (text, needle) in [
            ("", "empty"),
            ("x\n", "atom count"),
            ("2\nc\nH 0 0 0\n", "truncated"),
            ("1\nc\nXx 0 0 0\n", "unknown element"),
            ("1\nc\nH 0 zero 0\n", "not a number"),
            ("1\nc\nH 0 0 0\nH 1 0 0\n", "more atoms"),
            ("2\nc\nH 0 0 0\nH 0 0 0\n", "coincide"),
        ] {
            let message = Molecule::from_xyz(text).unwrap_err().to_string();
            assert!(
                message.contains(needle),
                "{message:?} should mention {needle:?}"
            );
        }
    }

    #[test]
    fn charge_is_checked() {
        let h2 = Molecule::from_bohr(&[("H", [0.0; 3]), ("H", [0.0, 0.0, 1.4])]).unwrap();
        assert_eq!(h2.clone().with_charge(2).unwrap().electron_count(), 0);
        assert!(h2.with_charge(3).is_err());
    }
}
