//! SCF iterations, J/K builds and time for several convergence settings on one molecule:
//! `cargo run --release -p tutti-adjoint --example scf_convergence -- FILE.xyz BASIS DEVICES
//! [SETTING ...]`, each SETTING a comma-separated list of `guess=core|atoms`, `rebuild=K`
//! (`ScfOptions::full_rebuild_every`), `diis=N` (vectors), `start=S` (`diis_start`),
//! `etol=E`, `dtol=D` (tolerances), `schwarz=T` (`ScfOptions::schwarz_threshold`), `cart`; no SETTING runs the defaults. Energies are printed against the first setting's.

use std::error::Error;

use tutti_adjoint::{rhf, AngularKind, Basis, BasisSet, InitialGuess, Molecule, ScfOptions};
use tutti_backend::Resources;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [xyz, basis_name, devices, settings @ ..] = args.as_slice() else {
        return Err("usage: scf_convergence FILE.xyz BASIS DEVICES [SETTING ...]".into());
    };
    let molecule = Molecule::from_xyz(&std::fs::read_to_string(xyz)?)?;
    let set = BasisSet::load(basis_name)?;
    let devices: usize = devices.parse()?;
    let defaults = ["".to_string()];
    let settings = if settings.is_empty() {
        &defaults[..]
    } else {
        settings
    };
    let mut first_energy = None;
    println!("setting | iterations | full builds / builds | E / Eh | E - E(first) | guess s | J/K s | total s");
    for setting in settings {
        let mut options = ScfOptions::default().with_resources(Resources::cpu(devices));
        let mut kind = AngularKind::Spherical;
        for item in setting.split(',').filter(|item| !item.is_empty()) {
            let (key, value) = item.split_once('=').unwrap_or((item, ""));
            match key {
                "guess" if value == "core" => options.guess = InitialGuess::Core,
                "guess" if value == "atoms" => options.guess = InitialGuess::Atoms,
                "rebuild" => options.full_rebuild_every = value.parse()?,
                "diis" => options.diis_vectors = value.parse()?,
                "start" => options.diis_start = value.parse()?,
                "cart" => kind = AngularKind::Cartesian,
                "dtol" => options.density_tolerance = value.parse()?,
                "etol" => options.energy_tolerance = value.parse()?,
                "schwarz" => options.schwarz_threshold = value.parse()?,
                _ => return Err(format!("unknown setting `{item}`").into()),
            }
        }
        if std::env::var_os("SCF_TRACE").is_some() {
            let last = std::sync::Mutex::new(f64::NAN);
            options = options.with_progress(tutti_backend::ProgressFn::new(move |p| {
                let energy = p.value.unwrap_or(f64::NAN);
                let mut last = last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                println!(
                    "  iteration {:3}  E = {energy:.12}  dE = {:.1e}",
                    p.done,
                    energy - *last
                );
                *last = energy;
            }));
        }
        let basis = Basis::new(&molecule, &set, kind)?;
        let result = rhf(&molecule, &basis, &options)?;
        let first = *first_energy.get_or_insert(result.energy);
        println!(
            "{setting:>28} | {:3} | {:2} / {:2} | {:.12} | {:9.1e} | {:.3} | {:.3} | {:.3}",
            result.iterations,
            result.timings.full_fock_builds,
            result.timings.fock_builds,
            result.energy,
            result.energy - first,
            result.timings.guess,
            result.timings.fock,
            result.timings.total
        );
    }
    Ok(())
}
