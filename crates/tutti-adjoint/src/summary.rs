//! A JSON-ready summary of an energy calculation, shared by the CLI and (later) the C ABI.

use serde::Serialize;

use crate::scf::RhfResult;

/// Wall-clock times in seconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryTimings {
    /// Reading the inputs and placing the basis.
    pub input: f64,
    /// One-electron integrals, shell pairs and Schwarz bounds.
    pub setup: f64,
    /// All J/K builds together.
    pub fock: f64,
    /// Mean time of one J/K build.
    pub fock_per_build: f64,
    /// The whole SCF.
    pub scf: f64,
}

/// What `tutti adjoint energy --json` prints: one object with the energy (hartree), sizes,
/// iterations and timings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnergySummary {
    /// Total RHF energy, hartree.
    pub energy: f64,
    /// Electronic energy, hartree.
    pub electronic_energy: f64,
    /// Nuclear repulsion, hartree.
    pub nuclear_repulsion: f64,
    /// Number of AOs.
    pub nao: usize,
    /// Number of shells.
    pub shells: usize,
    /// Number of atoms.
    pub atoms: usize,
    /// Electrons.
    pub electrons: usize,
    /// The basis set's name or file.
    pub basis: String,
    /// `"spherical"` or `"cartesian"`.
    pub angular: String,
    /// Devices (ranks) the run was split among.
    pub devices: usize,
    /// SCF iterations.
    pub iterations: usize,
    /// Last energy change, hartree.
    pub delta_energy: f64,
    /// Last largest density change.
    pub delta_density: f64,
    /// The converged iteration's orbital gradient ([`crate::ScfOptions::gradient_tolerance`]).
    pub orbital_gradient: f64,
    /// HOMO energy, hartree (absent without occupied orbitals).
    pub homo: Option<f64>,
    /// LUMO energy, hartree (absent without virtual orbitals).
    pub lumo: Option<f64>,
    /// Timings.
    pub timings: SummaryTimings,
}

impl EnergySummary {
    /// Collects the summary of `result`; `input_seconds` is the time spent reading inputs.
    pub fn new(
        result: &RhfResult,
        basis: &crate::Basis,
        molecule: &crate::Molecule,
        basis_name: &str,
        input_seconds: f64,
    ) -> Self {
        let builds = result.timings.fock_builds.max(1) as f64;
        Self {
            energy: result.energy,
            electronic_energy: result.electronic_energy,
            nuclear_repulsion: result.nuclear_repulsion,
            nao: basis.nao(),
            shells: basis.shells().len(),
            atoms: molecule.atoms().len(),
            electrons: molecule.electron_count(),
            basis: basis_name.to_string(),
            angular: match basis.kind() {
                crate::AngularKind::Spherical => "spherical".into(),
                crate::AngularKind::Cartesian => "cartesian".into(),
            },
            devices: result.devices,
            iterations: result.iterations,
            delta_energy: result.delta_energy,
            delta_density: result.delta_density,
            orbital_gradient: result.orbital_gradient,
            homo: result
                .occupied
                .checked_sub(1)
                .and_then(|i| result.orbital_energies.get(i).copied()),
            lumo: result.orbital_energies.get(result.occupied).copied(),
            timings: SummaryTimings {
                input: input_seconds,
                setup: result.timings.setup,
                fock: result.timings.fock,
                fock_per_build: result.timings.fock / builds,
                scf: result.timings.total,
            },
        }
    }

    /// One line of JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain numbers and strings cannot fail.
        serde_json::to_string(self).unwrap_or_else(|err| format!("{{\"error\":\"{err}\"}}"))
    }
}
