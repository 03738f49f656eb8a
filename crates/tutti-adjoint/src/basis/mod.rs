//! Basis sets: per-element shell data ([`BasisSet`]), parsed from NWChem-format text or taken
//! from the sets shipped in the crate, and a basis placed on a molecule ([`Basis`]).
//!
//! Conventions (PySCF's, so that results compare one to one):
//! - A shell of angular momentum l with library exponents alpha_i and library (un-normalized)
//!   coefficients c_i has the radial function R(r) = K sum_i c_i N_l(alpha_i) r^l
//!   exp(-alpha_i r^2), with N_l(a) = sqrt(2^(2l+3) (l+1)! (2a)^(l+3/2) / ((2l+2)! sqrt(pi)))
//!   and K such that integral R^2 r^2 dr = 1; [`Shell::contraction`] holds
//!   d_i = K c_i N_l(alpha_i).
//! - General contractions (several coefficient columns sharing one set of exponents, as in
//!   cc-pVXZ, and NWChem `SP` shells) are split into one shell per column, each with its own
//!   copy of the exponents; primitives whose coefficient is exactly zero are kept as
//!   parameters (and skipped by the integral kernels).
//! - Within an element the shells are sorted by l, stably (the file's order within one l), as
//!   PySCF does.
//! - AO order: atoms in molecule order, shells in that order, then the components of a shell
//!   (see [`crate::integrals::cartesian`]).

mod library;
mod nwchem;

use std::collections::BTreeMap;

pub use library::{shipped_names, BASIS_NAMES};

use crate::error::{invalid, AdjointError, Result};
use crate::molecule::{symbol_of, Molecule};

/// The largest angular momentum accepted in a basis (g functions).
pub const MAX_L: usize = 4;

/// One contracted shell as a basis file writes it: angular momentum, exponents, raw
/// coefficients (one column).
#[derive(Clone, Debug, PartialEq)]
pub struct ShellData {
    /// Angular momentum l (0 = s, ..., 4 = g).
    pub l: usize,
    /// Primitive exponents alpha_i, 1/bohr^2, all > 0.
    pub exponents: Vec<f64>,
    /// Library contraction coefficients c_i (before normalization), same length.
    pub coefficients: Vec<f64>,
}

impl ShellData {
    /// Checks l <= [`MAX_L`], equal non-zero lengths, finite positive exponents, finite
    /// coefficients, not all zero.
    pub fn validate(&self) -> Result<()> {
        if self.l > MAX_L {
            return Err(AdjointError::AngularMomentum {
                l: self.l,
                max: MAX_L,
            });
        }
        if self.exponents.is_empty() || self.exponents.len() != self.coefficients.len() {
            return Err(invalid(
                "shell",
                format!(
                    "{} exponents and {} coefficients; expected the same non-zero count",
                    self.exponents.len(),
                    self.coefficients.len()
                ),
            ));
        }
        if let Some(bad) = self
            .exponents
            .iter()
            .find(|a| !(a.is_finite() && **a > 0.0))
        {
            return Err(invalid(
                "shell",
                format!("exponent {bad}; expected finite and > 0"),
            ));
        }
        if let Some(bad) = self.coefficients.iter().find(|c| !c.is_finite()) {
            return Err(invalid(
                "shell",
                format!("coefficient {bad}; expected finite"),
            ));
        }
        if self.coefficients.iter().all(|c| *c == 0.0) {
            return Err(invalid("shell", "all coefficients are zero"));
        }
        Ok(())
    }
}

/// A basis set: a name and the shells of each element it covers.
#[derive(Clone, Debug, PartialEq)]
pub struct BasisSet {
    name: String,
    elements: BTreeMap<u32, Vec<ShellData>>,
}

impl BasisSet {
    /// A basis set from shells per nuclear charge; shells of each element are sorted by l
    /// (stably) and validated.
    pub fn from_elements(
        name: impl Into<String>,
        elements: BTreeMap<u32, Vec<ShellData>>,
    ) -> Result<Self> {
        let mut elements = elements;
        for shells in elements.values_mut() {
            for shell in shells.iter() {
                shell.validate()?;
            }
            shells.sort_by_key(|shell| shell.l);
        }
        Ok(Self {
            name: name.into(),
            elements,
        })
    }

    /// A shipped basis set by name (case-insensitive; `-` and `_` ignored, `*` or `star`):
    /// sto-3g, 6-31g, 6-31g*, cc-pvdz, cc-pvtz, def2-svp, def2-tzvp, for H to Ar.
    pub fn named(name: &str) -> Result<Self> {
        library::named(name)
    }

    /// A shipped name, or else a path to an NWChem-format file.
    pub fn load(name_or_path: &str) -> Result<Self> {
        if library::is_shipped(name_or_path) {
            return library::named(name_or_path);
        }
        let path = std::path::Path::new(name_or_path);
        if path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|err| AdjointError::Io {
                path: name_or_path.to_string(),
                message: err.to_string(),
            })?;
            return Self::from_nwchem(&text, name_or_path);
        }
        library::named(name_or_path)
    }

    /// Parses NWChem-format text (`BASIS ... END` blocks, or bare `Symbol  L` headers followed
    /// by `exponent coefficient...` rows; `SP`/`L` shells and general contractions split per
    /// column). `source_name` names the input in errors.
    pub fn from_nwchem(text: &str, source_name: &str) -> Result<Self> {
        let elements = nwchem::parse(text, source_name)?;
        Self::from_elements(source_name, elements)
    }

    /// The name (the shipped name or the file path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shells of an element, sorted by l, or `None` if the set does not cover it.
    pub fn shells_for(&self, charge: u32) -> Option<&[ShellData]> {
        self.elements.get(&charge).map(Vec::as_slice)
    }

    /// The covered elements' symbols, comma separated.
    pub fn covered(&self) -> String {
        self.elements
            .keys()
            .map(|z| symbol_of(*z))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Whether a shell's functions are real spherical harmonics (2l+1) or Cartesian monomials
/// ((l+1)(l+2)/2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AngularKind {
    /// Real solid harmonics, PySCF `cart=False` (the default).
    #[default]
    Spherical,
    /// Cartesian x^a y^b z^c, PySCF `cart=True`.
    Cartesian,
}

/// One contracted shell placed on an atom.
#[derive(Clone, Debug, PartialEq)]
pub struct Shell {
    /// Angular momentum.
    pub l: usize,
    /// Centre, bohr.
    pub center: [f64; 3],
    /// Index of the atom in the molecule.
    pub atom: usize,
    /// Exponents alpha_i, 1/bohr^2.
    pub exponents: Vec<f64>,
    /// Library coefficients c_i as given.
    pub coefficients: Vec<f64>,
    /// Normalized contraction d_i = K c_i N_l(alpha_i) multiplying the bare primitive
    /// r^l exp(-alpha_i r^2) (times the angular factor of [`crate::integrals::cartesian`]).
    pub contraction: Vec<f64>,
}

impl Shell {
    /// A shell from its data, centre and atom; computes the normalized contraction.
    pub fn new(data: &ShellData, center: [f64; 3], atom: usize) -> Result<Self> {
        data.validate()?;
        Ok(Self {
            l: data.l,
            center,
            atom,
            exponents: data.exponents.clone(),
            coefficients: data.coefficients.clone(),
            contraction: normalized_contraction(data.l, &data.exponents, &data.coefficients),
        })
    }
}

/// N_l(a) = sqrt(2^(2l+3) (l+1)! (2a)^(l+3/2) / ((2l+2)! sqrt(pi))): normalizes the radial
/// function r^l exp(-a r^2) (PySCF `gto_norm`).
pub fn primitive_norm(l: usize, exponent: f64) -> f64 {
    let mut factorial_ratio = 1.0; // (l+1)! / (2l+2)!
    for k in (l + 2)..=(2 * l + 2) {
        factorial_ratio /= k as f64;
    }
    let power = 2f64.powi(2 * l as i32 + 3);
    (power * factorial_ratio * (2.0 * exponent).powf(l as f64 + 1.5) / std::f64::consts::PI.sqrt())
        .sqrt()
}

/// d_i = K c_i N_l(alpha_i) with K normalizing the contracted radial function.
pub fn normalized_contraction(l: usize, exponents: &[f64], coefficients: &[f64]) -> Vec<f64> {
    let k = contraction_scale(l, exponents, coefficients);
    exponents
        .iter()
        .zip(coefficients)
        // (c N) K, in this order: the contraction stays bitwise what it always was.
        .map(|(a, c)| c * primitive_norm(l, *a) * k)
        .collect()
}

/// Gamma(l + 3/2): integral_0^inf r^(2l+2) exp(-s r^2) dr = Gamma(l+3/2) / (2 s^(l+3/2)).
pub fn radial_gamma(l: usize) -> f64 {
    let mut gamma = std::f64::consts::PI.sqrt() / 2.0; // Gamma(3/2)
    for k in 1..=l {
        gamma *= k as f64 + 0.5;
    }
    gamma
}

/// K = (sum_ij c_i N_i c_j N_j Gamma(l+3/2) / (2 (alpha_i + alpha_j)^(l+3/2)))^(-1/2), the
/// factor that normalizes the contracted radial function (PySCF `_nomalize_contracted_ao`).
pub fn contraction_scale(l: usize, exponents: &[f64], coefficients: &[f64]) -> f64 {
    let scaled: Vec<f64> = exponents
        .iter()
        .zip(coefficients)
        .map(|(a, c)| c * primitive_norm(l, *a))
        .collect();
    let gamma = radial_gamma(l);
    let mut norm2 = 0.0;
    for (i, ai) in exponents.iter().enumerate() {
        for (j, aj) in exponents.iter().enumerate() {
            norm2 += scaled[i] * scaled[j] * gamma / (2.0 * (ai + aj).powf(l as f64 + 1.5));
        }
    }
    1.0 / norm2.sqrt()
}

/// A basis placed on a molecule: shells in AO order and where each starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Basis {
    shells: Vec<Shell>,
    offsets: Vec<usize>,
    nao: usize,
    kind: AngularKind,
}

impl Basis {
    /// Places `basis_set` on every atom of `molecule`.
    ///
    /// Errors: [`AdjointError::MissingElement`] when the set does not cover an element.
    pub fn new(molecule: &Molecule, basis_set: &BasisSet, kind: AngularKind) -> Result<Self> {
        let mut per_atom = Vec::with_capacity(molecule.atoms().len());
        for atom in molecule.atoms() {
            let shells =
                basis_set
                    .shells_for(atom.charge)
                    .ok_or_else(|| AdjointError::MissingElement {
                        basis: basis_set.name().to_string(),
                        symbol: atom.symbol().to_string(),
                        charge: atom.charge,
                        covered: basis_set.covered(),
                    })?;
            per_atom.push(shells.to_vec());
        }
        Self::from_atom_shells(molecule, &per_atom, kind)
    }

    /// A basis from explicit shells per atom (in AO order; not re-sorted), e.g. the parameters
    /// stored with a reference calculation, or per-atom parameters being optimized.
    pub fn from_atom_shells(
        molecule: &Molecule,
        per_atom: &[Vec<ShellData>],
        kind: AngularKind,
    ) -> Result<Self> {
        if per_atom.len() != molecule.atoms().len() {
            return Err(invalid(
                "per_atom",
                format!(
                    "{} shell lists for {} atoms",
                    per_atom.len(),
                    molecule.atoms().len()
                ),
            ));
        }
        let mut shells = Vec::new();
        for (index, (atom, data)) in molecule.atoms().iter().zip(per_atom).enumerate() {
            for shell in data {
                shells.push(Shell::new(shell, atom.position, index)?);
            }
        }
        if shells.is_empty() {
            return Err(invalid("per_atom", "no shells"));
        }
        let mut offsets = Vec::with_capacity(shells.len());
        let mut nao = 0;
        for shell in &shells {
            offsets.push(nao);
            nao += function_count(shell.l, kind);
        }
        Ok(Self {
            shells,
            offsets,
            nao,
            kind,
        })
    }

    /// The shells in AO order.
    pub fn shells(&self) -> &[Shell] {
        &self.shells
    }

    /// The first AO index of each shell.
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// The number of atomic orbitals.
    pub fn nao(&self) -> usize {
        self.nao
    }

    /// Spherical or Cartesian.
    pub fn kind(&self) -> AngularKind {
        self.kind
    }

    /// The largest angular momentum of any shell.
    pub fn max_l(&self) -> usize {
        self.shells.iter().map(|s| s.l).max().unwrap_or(0)
    }
}

/// Functions per shell: 2l+1 (spherical) or (l+1)(l+2)/2 (Cartesian).
pub fn function_count(l: usize, kind: AngularKind) -> usize {
    match kind {
        AngularKind::Spherical => 2 * l + 1,
        AngularKind::Cartesian => (l + 1) * (l + 2) / 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_primitive_norm_matches_pyscf() {
        // pyscf.gto.gto_norm(0, 1.0)
        assert!((primitive_norm(0, 1.0) - 2.526_475_110_984_258_7).abs() < 1e-14);
        let d = normalized_contraction(2, &[0.8], &[1.0]);
        // A single primitive: d = 1 / sqrt(Gamma(l+3/2)/(2 (2a)^(l+3/2))).
        let gamma = 15.0 / 8.0 * std::f64::consts::PI.sqrt(); // Gamma(7/2)
        let expected = 1.0 / (gamma / (2.0 * 1.6f64.powf(3.5))).sqrt();
        assert!(
            (d[0] - expected).abs() < 1e-12 * expected,
            "{} {}",
            d[0],
            expected
        );
    }
}
