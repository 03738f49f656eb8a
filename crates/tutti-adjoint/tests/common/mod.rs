//! Reading the reference JSON files of tests/data (PySCF results with their basis data).
#![allow(dead_code)]
// Test support: a malformed reference file should fail the test loudly.
#![allow(clippy::unwrap_used)]

use serde_json::Value;
use tutti_adjoint::{AngularKind, Atom, Basis, Molecule, ShellData};

/// A reference case: the parsed JSON.
pub struct Case {
    pub name: String,
    pub json: Value,
}

pub fn load(name: &str) -> Case {
    let path = format!("{}/tests/data/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Case {
        name: name.to_string(),
        json: serde_json::from_str(&text).unwrap(),
    }
}

impl Case {
    pub fn molecule(&self) -> Molecule {
        let molecule = &self.json["molecule"];
        let atoms = molecule["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .zip(molecule["coords_bohr"].as_array().unwrap())
            .map(|(symbol, xyz)| Atom {
                charge: tutti_adjoint::molecule::charge_of(symbol.as_str().unwrap()).unwrap(),
                position: [0, 1, 2].map(|k| xyz[k].as_f64().unwrap()),
            })
            .collect();
        let charge = molecule["charge"].as_i64().unwrap_or(0) as i32;
        Molecule::new(atoms, charge).unwrap()
    }

    /// The basis parameters stored with the reference, per atom.
    pub fn atom_shells(&self) -> Vec<Vec<ShellData>> {
        self.json["basis"]
            .as_array()
            .unwrap()
            .iter()
            .map(|atom| {
                atom["shells"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|shell| ShellData {
                        l: shell["l"].as_u64().unwrap() as usize,
                        exponents: floats(&shell["exponents"]),
                        coefficients: floats(&shell["coefficients"]),
                    })
                    .collect()
            })
            .collect()
    }

    pub fn basis(&self, kind: AngularKind) -> Basis {
        Basis::from_atom_shells(&self.molecule(), &self.atom_shells(), kind).unwrap()
    }

    pub fn matrix(&self, key: &str) -> Vec<Vec<f64>> {
        self.json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect()
    }

    pub fn f64(&self, key: &str) -> f64 {
        self.json[key].as_f64().unwrap()
    }
}

pub fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// Largest |a - b| between a faer matrix and a reference.
pub fn max_matrix_error(ours: &faer::Mat<f64>, reference: &[Vec<f64>]) -> f64 {
    assert_eq!(ours.nrows(), reference.len());
    let mut largest: f64 = 0.0;
    for (i, row) in reference.iter().enumerate() {
        assert_eq!(ours.ncols(), row.len());
        for (j, value) in row.iter().enumerate() {
            largest = largest.max((ours[(i, j)] - value).abs());
        }
    }
    largest
}
