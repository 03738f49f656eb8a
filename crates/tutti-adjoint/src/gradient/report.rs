//! Reporting a gradient: grouped per atom, summed per element, and as JSON.

use serde_json::json;

use super::{ElementGradient, RhfGradient, ShellGradient};
use crate::error::{invalid, Result};
use crate::molecule::Molecule;

impl RhfGradient {
    /// Sums the per-atom shell gradients over the atoms of each element, for elements whose
    /// atoms all carry the same shell parameters (as `Basis::new` places them); elements in
    /// order of first appearance, shells in the basis's order for that element (the basis
    /// file's shells after the split of general contractions into one shell per column and
    /// the stable sort by l). Errors when the atoms of one element carry different shells,
    /// or when `molecule` is not the molecule of this gradient.
    pub fn per_element(&self, molecule: &Molecule) -> Result<Vec<ElementGradient>> {
        let per_atom = self.per_atom(molecule)?;
        let mut elements: Vec<ElementGradient> = Vec::new();
        for (index, atom) in molecule.atoms().iter().enumerate() {
            let shells = &per_atom[index];
            match elements.iter_mut().find(|e| e.charge == atom.charge) {
                None => elements.push(ElementGradient {
                    symbol: atom.symbol().to_string(),
                    charge: atom.charge,
                    atoms: 1,
                    shells: shells.iter().map(|s| (*s).clone()).collect(),
                }),
                Some(element) => {
                    let same = element.shells.len() == shells.len()
                        && element.shells.iter().zip(shells).all(|(a, b)| {
                            a.l == b.l
                                && a.exponents == b.exponents
                                && a.coefficients == b.coefficients
                        });
                    if !same {
                        return Err(invalid(
                            "basis",
                            format!(
                                "atom {index} ({}) carries other shells than atom {} of the same element; per-element sums need one parameter set per element",
                                atom.symbol(),
                                element.shells.first().map_or(0, |s| s.atom)
                            ),
                        ));
                    }
                    element.atoms += 1;
                    for (total, shell) in element.shells.iter_mut().zip(shells) {
                        for (t, g) in total.grad_exponents.iter_mut().zip(&shell.grad_exponents) {
                            *t += g;
                        }
                        for (t, g) in total
                            .grad_coefficients
                            .iter_mut()
                            .zip(&shell.grad_coefficients)
                        {
                            *t += g;
                        }
                    }
                }
            }
        }
        Ok(elements)
    }

    /// The shells grouped by atom (molecule order); errors when an atom index is out of
    /// range for `molecule`.
    fn per_atom(&self, molecule: &Molecule) -> Result<Vec<Vec<&ShellGradient>>> {
        let mut per_atom: Vec<Vec<&ShellGradient>> = vec![Vec::new(); molecule.atoms().len()];
        for shell in &self.shells {
            per_atom
                .get_mut(shell.atom)
                .ok_or_else(|| {
                    invalid(
                        "molecule",
                        format!(
                            "{} atoms, but the gradient has a shell on atom {}",
                            molecule.atoms().len(),
                            shell.atom
                        ),
                    )
                })?
                .push(shell);
        }
        Ok(per_atom)
    }

    /// The JSON document of `tutti adjoint gradient`: `energy`, `iterations`, `devices`,
    /// `timings`, `basis` (the basis name given), `atoms` (a list over atoms of {`atom`,
    /// `symbol`, `shells`: [{`l`, `exponents`, `coefficients`, `grad_exponents`,
    /// `grad_coefficients`}]}, shells in the basis's order) and `elements` (the per-element
    /// sums of [`RhfGradient::per_element`], {`symbol`, `charge`, `atoms`, `shells`}; `null`
    /// when the atoms of an element carry different parameters), pretty-printed.
    pub fn to_json(&self, molecule: &Molecule, basis_name: &str) -> String {
        let shell_json = |shell: &ShellGradient| {
            json!({
                "l": shell.l,
                "exponents": shell.exponents,
                "coefficients": shell.coefficients,
                "grad_exponents": shell.grad_exponents,
                "grad_coefficients": shell.grad_coefficients,
            })
        };
        let atoms: Vec<serde_json::Value> = match self.per_atom(molecule) {
            Ok(per_atom) => per_atom
                .iter()
                .enumerate()
                .map(|(index, shells)| {
                    json!({
                        "atom": index,
                        "symbol": molecule.atoms()[index].symbol(),
                        "shells": shells.iter().map(|s| shell_json(s)).collect::<Vec<_>>(),
                    })
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let elements = self.per_element(molecule).ok().map(|elements| {
            elements
                .iter()
                .map(|element| {
                    json!({
                        "symbol": element.symbol,
                        "charge": element.charge,
                        "atoms": element.atoms,
                        "shells": element.shells.iter().map(shell_json).collect::<Vec<_>>(),
                    })
                })
                .collect::<Vec<_>>()
        });
        let document = json!({
            "energy": self.energy,
            "iterations": self.iterations,
            "devices": self.devices,
            "timings": self.timings,
            "basis_name": basis_name,
            "basis": atoms,
            "elements": elements,
        });
        serde_json::to_string_pretty(&document).unwrap_or_default()
    }
}
