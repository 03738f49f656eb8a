//! RHF energies from C: a molecule (XYZ text, or atomic numbers and bohr coordinates) in a
//! Gaussian basis set (a shipped name or an NWChem-format file).

use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr;
use std::time::Instant;

use tutti_adjoint::{
    rhf, rhf_on, AdjointError, AngularKind, Atom, Basis, BasisSet, EnergySummary, Molecule,
    ScfOptions,
};

use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_slice, input_str, positive_count, to_c_int,
    write_default, Out, Region,
};
use crate::memory::{array_to_c, free_c, string_to_c};
use crate::progress::TuttiProgressCallback;
use crate::resources::TuttiResources;
use crate::status::{Error, TuttiStatus};
use crate::world::{checked, TuttiWorld};

/// Options of `tutti_rhf_energy` and `tutti_rhf_energy_bohr`. Start from
/// `tutti_rhf_options_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiRhfOptions {
    /// Where the SCF runs (default `tutti_resources_default`: every GPU, else one simulated
    /// device using all cores): one rank per device, each J/K build split among them. A
    /// memory cap that cannot hold the run is `TUTTI_ERROR_OUT_OF_MEMORY` before any work.
    pub resources: TuttiResources,
    /// Total charge of the molecule (default 0); the electron count must come out even.
    pub charge: c_int,
    /// 1 for Cartesian functions, 0 (default) for spherical ones (PySCF's `cart=True`).
    pub cartesian: c_int,
    /// Most SCF iterations (default 128); beyond it the call fails with
    /// `TUTTI_ERROR_NOT_CONVERGED`.
    pub max_iterations: c_int,
    /// Converged when the energy changes by less than this between two iterations, hartree
    /// (default 1e-10) ...
    pub energy_tolerance: f64,
    /// ... and, when `gradient_tolerance` is 0, no density-matrix element by more than this
    /// (default 1e-8).
    pub density_tolerance: f64,
    /// NULL (the default), or where `tutti_rhf_energy` and `tutti_rhf_energy_bohr` write the
    /// converged orbitals and density (`TuttiRhfMatrices`, arrays allocated by tutti, released
    /// with `tutti_rhf_matrices_free`), on success only. Must be NULL for
    /// `tutti_rhf_gradient`.
    pub matrices_out: *mut TuttiRhfMatrices,
    /// Where progress is reported (default: nowhere; see `TuttiProgressCallback`). Each SCF
    /// iteration (stage "iteration", `total` the iteration limit), with the energy.
    pub progress: TuttiProgressCallback,
    /// Positive (default 1e-5, PySCF's `conv_tol_grad` at `conv_tol` 1e-10): converged when
    /// the energy changes by less than `energy_tolerance` and the orbital gradient
    /// `|X^T (F P S - S P F) X|_F / sqrt(2)` (the norm `conv_tol_grad` bounds) is below this.
    /// The energy is then that of the density criterion to about the square of this, the
    /// orbitals and density only to about this. 0: converge on the density change instead
    /// (`density_tolerance`). Negative, NaN or infinite: `TUTTI_ERROR_INVALID_ARGUMENT`.
    /// `tutti_rhf_gradient` refuses a non-zero value (its defaults hold 0): the basis-set
    /// gradient needs the density criterion.
    pub gradient_tolerance: f64,
}

/// The converged RHF's orbitals and density, in the AO order of PySCF for the same basis
/// (atoms in input order, shells in basis order, spherical components as PySCF's, p as x, y,
/// z), each AO normalized. The three arrays are allocated by tutti: release them with
/// `tutti_rhf_matrices_free` (not `tutti_free_c` one by one, which also works but leaves the
/// pointers dangling).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiRhfMatrices {
    /// AOs: the rows of `coefficients`, the order of `density`.
    pub nao: c_int,
    /// MOs: `nao`, or fewer when the basis is nearly linearly dependent and the SCF dropped
    /// the overlap's smallest eigenvectors.
    pub nmo: c_int,
    /// Doubly occupied MOs: the first `occupied` columns of `coefficients`.
    pub occupied: c_int,
    /// `nmo` orbital energies, ascending, hartree (PySCF's `mo_energy`).
    pub orbital_energies: *mut f64,
    /// `nao * nmo` MO coefficients, row-major: `coefficients[mu * nmo + i]` is AO `mu` of MO
    /// `i` (PySCF's `mo_coeff[mu, i]`); each column's sign is arbitrary.
    pub coefficients: *mut f64,
    /// `nao * nao` AO density matrix `P = 2 C_occ C_occ^T`, row-major and symmetric (PySCF's
    /// `make_rdm1()`); `tr(P S)` is the electron count.
    pub density: *mut f64,
}

impl Default for TuttiRhfMatrices {
    fn default() -> Self {
        Self {
            nao: 0,
            nmo: 0,
            occupied: 0,
            orbital_energies: ptr::null_mut(),
            coefficients: ptr::null_mut(),
            density: ptr::null_mut(),
        }
    }
}

/// What `tutti_rhf_energy` computed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiRhfResult {
    /// Total RHF energy (electronic + nuclear repulsion), hartree.
    pub energy: f64,
    /// Electronic energy, hartree.
    pub electronic_energy: f64,
    /// Nuclear repulsion, hartree.
    pub nuclear_repulsion: f64,
    /// Energy change of the last iteration, hartree.
    pub delta_energy: f64,
    /// Largest density-matrix change of the last iteration.
    pub delta_density: f64,
    /// Wall-clock time of the whole SCF, seconds.
    pub scf_seconds: f64,
    /// Number of atomic orbitals (basis functions).
    pub nao: c_int,
    /// Electrons.
    pub electrons: c_int,
    /// SCF iterations (Fock builds).
    pub iterations: c_int,
    /// 1: the SCF met its criterion (a run that does not fails with
    /// `TUTTI_ERROR_NOT_CONVERGED` instead of returning a result).
    pub converged: c_int,
    /// The orbital gradient of the converged iteration, `|X^T (F P S - S P F) X|_F /
    /// sqrt(2)` (PySCF's `conv_tol_grad` norm); below `options->gradient_tolerance` when that
    /// was set.
    pub orbital_gradient: f64,
}

impl Default for TuttiRhfOptions {
    fn default() -> Self {
        let defaults = ScfOptions::default();
        Self {
            resources: TuttiResources::default(),
            charge: 0,
            cartesian: 0,
            max_iterations: c_int::try_from(defaults.max_iterations).unwrap_or(c_int::MAX),
            energy_tolerance: defaults.energy_tolerance,
            density_tolerance: defaults.density_tolerance,
            matrices_out: ptr::null_mut(),
            progress: TuttiProgressCallback::default(),
            gradient_tolerance: defaults.gradient_tolerance.unwrap_or(0.0),
        }
    }
}

/// Writes the default RHF options to `*options`: the default resources, neutral,
/// spherical, 128 iterations, tolerances 1e-10 Eh and 1e-8, `gradient_tolerance` 1e-5
/// (PySCF's criterion; 0 selects the density criterion).
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiRhfOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_options_default(options: *mut TuttiRhfOptions) -> c_int {
    ffi_call("tutti_rhf_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// The status of each `tutti-adjoint` error.
pub(crate) fn adjoint_error(error: AdjointError) -> Error {
    let error = match error.into_backend() {
        Ok(device) => {
            // A device request the caller got wrong names the field at fault.
            let error = Error::from(device);
            return if error.status() == TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT {
                Error::invalid_argument(format!("options->resources: {}", error.message()))
            } else {
                error
            };
        }
        Err(error) => error,
    };
    let status = match &error {
        AdjointError::NotConverged { .. } | AdjointError::LinearAlgebra(_) => {
            TuttiStatus::TUTTI_ERROR_NOT_CONVERGED
        }
        AdjointError::Io { .. } => TuttiStatus::TUTTI_ERROR_IO,
        AdjointError::Plan(_) => TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY,
        AdjointError::RankPanicked { .. } => TuttiStatus::TUTTI_ERROR_PANIC,
        AdjointError::Comm(_)
        | AdjointError::RankStart { .. }
        | AdjointError::RankFailed { .. }
        | AdjointError::Group(_) => TuttiStatus::TUTTI_ERROR_DEVICE,
        // Bad molecules, basis sets, elements and options, and kinds added later (all input
        // errors so far).
        _ => TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT,
    };
    Error::new(status, error.to_string())
}

/// The caller's options (NULL: the defaults), checked and converted.
///
/// # Safety
/// `options` is NULL or valid for reading a `TuttiRhfOptions`, whose `resources` pointers
/// are NULL or valid (see `TuttiResources`).
pub(crate) unsafe fn read_options<'w>(
    options: *const TuttiRhfOptions,
) -> Result<(RhfSettings<'w>, i32), Error> {
    // SAFETY: NULL or valid for reading a TuttiRhfOptions (the caller's promise); the helper
    // checks alignment.
    let options = unsafe { input_options(options, "options")? };
    // SAFETY: the world is NULL or a live handle for the call (the caller's promise; checked).
    let world = unsafe { options.resources.world("options->resources") }?;
    // SAFETY: as above, for the resources' other pointers.
    checked(world, unsafe { settings(&options, world) })
}

/// The settings of `options`, naming `world`.
///
/// # Safety
/// As for [`read_options`].
unsafe fn settings<'w>(
    options: &TuttiRhfOptions,
    world: Option<&'w TuttiWorld>,
) -> Result<(RhfSettings<'w>, i32), Error> {
    // SAFETY: the resources' pointers are NULL or valid (the caller's promise).
    let resources = unsafe { options.resources.to_rust("options->resources")? };
    let kind = match options.cartesian {
        0 => AngularKind::Spherical,
        1 => AngularKind::Cartesian,
        other => {
            return Err(Error::invalid_argument(format!(
                "options->cartesian is {other}: expected 0 (spherical) or 1 (Cartesian)"
            )))
        }
    };
    let mut scf = ScfOptions::default()
        .with_resources(resources)
        .with_max_iterations(positive_count(
            options.max_iterations,
            "options->max_iterations",
        )?);
    scf.energy_tolerance = positive_tolerance(options.energy_tolerance, "energy_tolerance")?;
    scf.density_tolerance = positive_tolerance(options.density_tolerance, "density_tolerance")?;
    scf.gradient_tolerance = optional_tolerance(options.gradient_tolerance, "gradient_tolerance")?;
    scf.progress = options.progress.to_rust();
    Ok((
        RhfSettings {
            scf,
            kind,
            world,
            matrices_out: options.matrices_out,
        },
        options.charge,
    ))
}

/// The checked options of one call.
pub(crate) struct RhfSettings<'w> {
    /// The SCF's options, `resources` included.
    pub(crate) scf: ScfOptions,
    /// Spherical or Cartesian functions.
    pub(crate) kind: AngularKind,
    /// The MPI processes the call is split among (`options->resources.world`), if any.
    pub(crate) world: Option<&'w TuttiWorld>,
    /// `options->matrices_out`: NULL, or where the orbitals and density go.
    pub(crate) matrices_out: *mut TuttiRhfMatrices,
}

fn positive_tolerance(value: f64, name: &str) -> Result<f64, Error> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(Error::invalid_argument(format!(
            "options->{name} is {value}: expected a positive finite number"
        )))
    }
}

/// An optional tolerance: 0 is unset (`None`), a positive finite number is the tolerance.
fn optional_tolerance(value: f64, name: &str) -> Result<Option<f64>, Error> {
    if value == 0.0 {
        Ok(None)
    } else if value > 0.0 && value.is_finite() {
        Ok(Some(value))
    } else {
        Err(Error::invalid_argument(format!(
            "options->{name} is {value}: expected 0 (unset) or a positive finite number"
        )))
    }
}

/// A shipped basis set or an NWChem-format file. A name with a directory part cannot be a
/// shipped set: if no file is there, that is an I/O error naming the path.
pub(crate) fn load_basis(name_or_path: &str) -> Result<BasisSet, Error> {
    if name_or_path.trim().is_empty() {
        return Err(Error::invalid_argument(
            "argument `basis` is empty: expected a shipped basis set name or a file path",
        ));
    }
    let path = Path::new(name_or_path);
    if path.components().count() > 1 {
        if let Err(err) = std::fs::metadata(path) {
            return Err(Error::new(
                TuttiStatus::TUTTI_ERROR_IO,
                format!("cannot read basis file `{name_or_path}`: {err}"),
            ));
        }
        if !path.is_file() {
            return Err(Error::new(
                TuttiStatus::TUTTI_ERROR_IO,
                format!("basis file `{name_or_path}` is not a regular file"),
            ));
        }
    }
    BasisSet::load(name_or_path).map_err(adjoint_error)
}

/// Runs RHF on `molecule` and writes the outputs (only on success).
fn energy(
    molecule: Molecule,
    basis_name: &str,
    settings: &RhfSettings,
    started: Instant,
    result_out: Out<'_, TuttiRhfResult>,
    json_out: Option<Out<'_, *mut c_char>>,
) -> Result<(), Error> {
    let (basis_set, basis) = checked(
        settings.world,
        load_basis(basis_name).and_then(|set| {
            let basis = Basis::new(&molecule, &set, settings.kind).map_err(adjoint_error)?;
            Ok((set, basis))
        }),
    )?;
    let input_seconds = started.elapsed().as_secs_f64();
    let result = match settings.world {
        None => rhf(&molecule, &basis, &settings.scf),
        Some(world) => rhf_on(
            &world.group(&settings.scf.resources, tutti_adjoint::GPU_USE)?,
            &molecule,
            &basis,
            &settings.scf,
        ),
    }
    .map_err(adjoint_error)?;
    let summary = EnergySummary::new(&result, &basis, &molecule, basis_set.name(), input_seconds);
    let written = TuttiRhfResult {
        energy: result.energy,
        electronic_energy: result.electronic_energy,
        nuclear_repulsion: result.nuclear_repulsion,
        delta_energy: result.delta_energy,
        delta_density: result.delta_density,
        scf_seconds: result.timings.total,
        nao: to_c_int(result.nao, "the number of AOs")?,
        electrons: to_c_int(molecule.electron_count(), "the electron count")?,
        iterations: to_c_int(result.iterations, "the iteration count")?,
        converged: 1,
        orbital_gradient: result.orbital_gradient,
    };
    let matrices_out = if settings.matrices_out.is_null() {
        None
    } else {
        // SAFETY: not NULL, so valid for writing a TuttiRhfMatrices (the caller's promise
        // about `options->matrices_out`); the helper checks alignment; it overlaps no other
        // output (checked by the entry points).
        Some(unsafe { Out::new(settings.matrices_out, "options->matrices_out")? })
    };
    let matrices = match matrices_out {
        Some(out) => Some((out, matrices_to_c(&result)?)),
        None => None,
    };
    // The JSON buffer is the last thing that can fail; nothing is written before it exists.
    let json = match json_out {
        Some(out) => match string_to_c(&summary.to_json()) {
            Ok(text) => Some((out, text)),
            Err(error) => {
                if let Some((_, mut allocated)) = matrices {
                    // SAFETY: the arrays were just allocated by tutti and are released once.
                    unsafe { release_matrices(&mut allocated) }?;
                }
                return Err(error);
            }
        },
        None => None,
    };
    if let Some((out, allocated)) = matrices {
        out.write(allocated);
    }
    result_out.write(written);
    if let Some((out, text)) = json {
        out.write(text.as_ptr());
    }
    Ok(())
}

/// The orbitals and density of `result` in arrays allocated by tutti (row-major matrices).
fn matrices_to_c(result: &tutti_adjoint::RhfResult) -> Result<TuttiRhfMatrices, Error> {
    let (nao, nmo) = (result.nao, result.orbital_energies.len());
    let row_major = |columns: usize, entry: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
        (0..nao)
            .flat_map(|row| (0..columns).map(move |column| (row, column)))
            .map(|(row, column)| entry(row, column))
            .collect()
    };
    let mut allocated = TuttiRhfMatrices {
        nao: to_c_int(nao, "the number of AOs")?,
        nmo: to_c_int(nmo, "the number of MOs")?,
        occupied: to_c_int(result.occupied, "the occupied orbital count")?,
        ..TuttiRhfMatrices::default()
    };
    let arrays = [
        result.orbital_energies.clone(),
        row_major(nmo, &|row, column| result.coefficients[(row, column)]),
        row_major(nao, &|row, column| result.density[(row, column)]),
    ];
    for (index, values) in arrays.iter().enumerate() {
        let pointer = match array_to_c(values) {
            Ok(pointer) => pointer.as_ptr(),
            Err(error) => {
                // SAFETY: the arrays allocated so far are tutti's, released once here.
                unsafe { release_matrices(&mut allocated) }?;
                return Err(error);
            }
        };
        match index {
            0 => allocated.orbital_energies = pointer,
            1 => allocated.coefficients = pointer,
            _ => allocated.density = pointer,
        }
    }
    Ok(allocated)
}

/// Releases the arrays of `matrices` and resets it (pointers NULL, counts 0).
///
/// # Safety
/// Each pointer is NULL or a live buffer tutti allocated, not released before.
unsafe fn release_matrices(matrices: &mut TuttiRhfMatrices) -> Result<(), Error> {
    let arrays: [*mut c_void; 3] = [
        matrices.orbital_energies.cast(),
        matrices.coefficients.cast(),
        matrices.density.cast(),
    ];
    *matrices = TuttiRhfMatrices::default();
    let mut first_error = None;
    for array in arrays {
        // SAFETY: NULL or a live tutti buffer (the caller's promise); free_c refuses most
        // other pointers without touching them.
        if let Err(error) = unsafe { free_c(array) } {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Releases the three arrays of a `TuttiRhfMatrices` and resets the struct (pointers NULL,
/// counts 0). NULL `matrices`, or one whose pointers are already NULL (released before, or
/// zero-initialised), is a no-op returning `TUTTI_OK`.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` when a pointer is recognisably not a live tutti
/// buffer (see `tutti_free_c`); the other arrays are released and every pointer is reset.
///
/// # Safety
/// `matrices` is NULL or valid for reading and writing a `TuttiRhfMatrices` written by a
/// successful `tutti_rhf_energy` or `tutti_rhf_energy_bohr`, or zero-initialised, whose
/// arrays were not released with `tutti_free_c`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_matrices_free(matrices: *mut TuttiRhfMatrices) -> c_int {
    ffi_call("tutti_rhf_matrices_free", || {
        if matrices.is_null() {
            return Ok(());
        }
        if !matrices.is_aligned() {
            return Err(Error::invalid_argument(
                "argument `matrices` is not aligned",
            ));
        }
        // SAFETY: not NULL, aligned (checked above), valid for reads and writes, and its
        // pointers NULL or live tutti buffers (the caller's promise).
        unsafe { release_matrices(&mut *matrices) }
    })
}

/// The memory of a string argument including its NUL, for [`check_disjoint`].
pub(crate) fn string_region<'n>(name: &'n str, text: &str) -> Region<'n> {
    Region::input(name, text.as_ptr(), text.len() + 1)
}

/// The optional output `char **json_out`.
///
/// # Safety
/// `json_out` is NULL or valid for writing a `char *`.
pub(crate) unsafe fn optional_json_out<'a>(
    json_out: *mut *mut c_char,
) -> Result<Option<Out<'a, *mut c_char>>, Error> {
    if json_out.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL, so valid for writes (the caller's promise).
    Ok(Some(unsafe { Out::new(json_out, "json_out")? }))
}

/// The closed-shell RHF energy of a molecule given as XYZ text (Angstrom), in the basis set
/// `basis`: a shipped name (sto-3g, 6-31g, 6-31g*, cc-pvdz, cc-pvtz, def2-svp, def2-tzvp; elements
/// H–Ar; case and `-`/`_` ignored) or a path to an NWChem-format file.
///
/// `xyz_text` is the text of an XYZ file: a count line, a comment line, then `symbol x y z`
/// per atom, in Angstrom (1 bohr = 0.52917721092 Angstrom, PySCF's value). `options` may be
/// NULL for the defaults (`tutti_rhf_options_default`).
///
/// Outputs, written only on success: `*result_out` (caller-owned); and, when `json_out` is
/// not NULL, `*json_out`, a NUL-terminated JSON object (`energy`, `electronic_energy`,
/// `nuclear_repulsion`, `nao`, `shells`, `atoms`, `electrons`, `basis`, `angular`, `devices`,
/// `iterations`, `delta_energy`, `delta_density`, `orbital_gradient`, `homo`, `lumo`,
/// `timings`) that the caller owns and releases with `tutti_free_c`.
///
/// Errors: NULL `xyz_text`, `basis` or `result_out` (`TUTTI_ERROR_NULL_POINTER`); malformed
/// XYZ text, an unknown element, an unknown basis set or one without functions for an element,
/// a malformed basis file, an odd electron count, bad options
/// (`TUTTI_ERROR_INVALID_ARGUMENT`); a basis path that cannot be read (`TUTTI_ERROR_IO`); an
/// SCF that misses its tolerances within `max_iterations` (`TUTTI_ERROR_NOT_CONVERGED`, the
/// message naming the criterion used and the last energy change, density change and orbital
/// gradient).
///
/// # Safety
/// `xyz_text` and `basis` are NULL or NUL-terminated strings; `options` is NULL or valid for
/// reading a `TuttiRhfOptions`; `result_out` is NULL or valid for writing a
/// `TuttiRhfResult`; `json_out` is NULL or valid for writing a `char *`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_energy(
    xyz_text: *const c_char,
    basis: *const c_char,
    options: *const TuttiRhfOptions,
    result_out: *mut TuttiRhfResult,
    json_out: *mut *mut c_char,
) -> c_int {
    ffi_call("tutti_rhf_energy", || {
        let started = Instant::now();
        // The options first: with a world, every later check's failure releases the other
        // processes (`checked`).
        // SAFETY: NULL or valid for reading a TuttiRhfOptions (the caller's promise).
        let (settings, charge) = unsafe { read_options(options)? };
        let (basis, molecule, result_out, json_out) = checked(
            settings.world,
            (|| {
                // SAFETY: the caller's promises above; the helper checks NULL and UTF-8.
                let (xyz_text, basis) =
                    unsafe { (input_str(xyz_text, "xyz_text")?, input_str(basis, "basis")?) };
                check_disjoint(&[
                    string_region("xyz_text", xyz_text),
                    string_region("basis", basis),
                    Region::input("options", options, 1),
                    Region::output("result_out", result_out, 1),
                    Region::output("json_out", json_out, 1),
                    Region::output("options->matrices_out", settings.matrices_out, 1),
                ])?;
                // SAFETY: the caller's promises above; the helpers check NULL and alignment; the
                // outputs overlap nothing (checked above).
                let (result_out, json_out) = unsafe {
                    (
                        Out::new(result_out, "result_out")?,
                        optional_json_out(json_out)?,
                    )
                };
                let molecule = Molecule::from_xyz(xyz_text)
                    .and_then(|molecule| molecule.with_charge(charge))
                    .map_err(adjoint_error)?;
                Ok((basis, molecule, result_out, json_out))
            })(),
        )?;
        energy(molecule, basis, &settings, started, result_out, json_out)
    })
}

/// `tutti_rhf_energy` for a molecule given as `n_atoms` atomic numbers
/// (`atomic_numbers[i]`, 1 = H) and coordinates in bohr (`coordinates_bohr[3 * i + k]`, k =
/// x, y, z). Everything else (basis, options, outputs, errors) is as for `tutti_rhf_energy`;
/// an atomic number outside 1..=36 or a non-finite coordinate is
/// `TUTTI_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `atomic_numbers` is NULL or holds `n_atoms` ints, `coordinates_bohr` NULL or
/// `3 * n_atoms` doubles; the other pointers as for `tutti_rhf_energy`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_energy_bohr(
    n_atoms: c_int,
    atomic_numbers: *const c_int,
    coordinates_bohr: *const f64,
    basis: *const c_char,
    options: *const TuttiRhfOptions,
    result_out: *mut TuttiRhfResult,
    json_out: *mut *mut c_char,
) -> c_int {
    ffi_call("tutti_rhf_energy_bohr", || {
        let started = Instant::now();
        // The options first: with a world, every later check's failure releases the other
        // processes (`checked`).
        // SAFETY: NULL or valid for reading a TuttiRhfOptions (the caller's promise).
        let (settings, charge) = unsafe { read_options(options)? };
        let (basis, molecule, result_out, json_out) = checked(
            settings.world,
            (|| {
                let atoms = positive_count(n_atoms, "n_atoms")?;
                let coordinates = atoms.checked_mul(3).ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "argument `n_atoms` is {atoms}: too many atoms"
                    ))
                })?;
                // SAFETY: the caller's promises above; the helpers check NULL, alignment, lengths
                // and UTF-8.
                let (numbers, positions, basis) = unsafe {
                    (
                        input_slice(atomic_numbers, atoms, "atomic_numbers")?,
                        input_slice(coordinates_bohr, coordinates, "coordinates_bohr")?,
                        input_str(basis, "basis")?,
                    )
                };
                check_disjoint(&[
                    Region::input("atomic_numbers", numbers.as_ptr(), numbers.len()),
                    Region::input("coordinates_bohr", positions.as_ptr(), positions.len()),
                    string_region("basis", basis),
                    Region::input("options", options, 1),
                    Region::output("result_out", result_out, 1),
                    Region::output("json_out", json_out, 1),
                    Region::output("options->matrices_out", settings.matrices_out, 1),
                ])?;
                // SAFETY: the caller's promises above; the helpers check NULL and alignment; the
                // outputs overlap nothing (checked above).
                let (result_out, json_out) = unsafe {
                    (
                        Out::new(result_out, "result_out")?,
                        optional_json_out(json_out)?,
                    )
                };
                let atoms: Result<Vec<Atom>, Error> = numbers
                    .iter()
                    .zip(positions.chunks_exact(3))
                    .enumerate()
                    .map(|(index, (&number, xyz))| {
                        let charge = u32::try_from(number).map_err(|_| {
                            Error::invalid_argument(format!(
                                "atomic_numbers[{index}] is {number}: expected 1 (H) to 36 (Kr)"
                            ))
                        })?;
                        Ok(Atom {
                            charge,
                            position: [xyz[0], xyz[1], xyz[2]],
                        })
                    })
                    .collect();
                let molecule = Molecule::new(atoms?, charge).map_err(adjoint_error)?;
                Ok((basis, molecule, result_out, json_out))
            })(),
        )?;
        energy(molecule, basis, &settings, started, result_out, json_out)
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};
    use std::ptr;

    use super::*;
    use crate::boundary::last_error;
    use crate::memory::tutti_free_c;

    /// H2O at the geometry of crates/tutti-adjoint/tests/data/h2o_*.json (r(OH) = 0.9572 A,
    /// angle 104.52 deg): the reference's bohr coordinates times 0.52917721092, in Angstrom.
    const WATER_XYZ: &CStr = c"3
water
O 0.0 0.0 0.0
H 0.0 0.7569503272636612 0.585882276618295
H 0.0 -0.7569503272636612 0.585882276618295
";

    /// The same nuclei in bohr, exactly as in the reference files.
    const WATER_NUMBERS: [c_int; 3] = [8, 1, 1];
    const WATER_BOHR: [f64; 9] = [
        0.0,
        0.0,
        0.0,
        0.0,
        1.4304288084282137,
        1.107157044045246,
        0.0,
        -1.4304288084282137,
        1.107157044045246,
    ];

    /// PySCF 2.14 RHF/def2-tzvp of that water, with the crate's shipped def2-tzvp file
    /// (crates/tutti-adjoint/tests/data/h2o_def2tzvp.json, `e_rhf`).
    const WATER_DEF2TZVP: f64 = -76.05904289524872;

    /// PySCF 2.14 RHF/sto-3g (PySCF's built-in sto-3g, whose digits differ from the shipped
    /// basis_set_exchange export) of that water (h2o_sto3g.json, `e_rhf`).
    const WATER_STO3G_PYSCF: f64 = -74.96292824643292;

    /// The defaults on `devices` simulated devices.
    fn options(devices: c_int) -> TuttiRhfOptions {
        let mut options = TuttiRhfOptions::default();
        options.resources.kind = crate::devices::TuttiKind::TUTTI_KIND_CPU as c_int;
        options.resources.devices = devices;
        options
    }

    fn xyz_energy(
        xyz: &CStr,
        basis: &CStr,
        options: &TuttiRhfOptions,
    ) -> Result<(TuttiRhfResult, String), (c_int, String)> {
        let mut result = TuttiRhfResult::default();
        let mut json: *mut c_char = ptr::null_mut();
        // SAFETY: valid strings, options, and output pointers to locals.
        let status = unsafe {
            tutti_rhf_energy(
                xyz.as_ptr(),
                basis.as_ptr(),
                options,
                &mut result,
                &mut json,
            )
        };
        if status != 0 {
            assert!(json.is_null(), "no JSON on failure");
            return Err((status, last_error()));
        }
        assert!(!json.is_null());
        // SAFETY: json is a NUL-terminated string from tutti, read before it is released.
        let text = unsafe { CStr::from_ptr(json) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: json came from tutti and is released once.
        assert_eq!(unsafe { tutti_free_c(json.cast()) }, 0);
        Ok((result, text))
    }

    #[test]
    fn adjoint_errors_map_to_their_status() {
        let zero = AdjointError::Group(tutti_backend::BackendError::ZeroDevices.into());
        let error = adjoint_error(zero);
        assert_eq!(error.status(), TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT);
        assert!(
            error.message().starts_with("options->resources: "),
            "{}",
            error.message()
        );
        let no_cuda = AdjointError::Group(tutti_backend::BackendError::CudaNotBuilt.into());
        assert_eq!(
            adjoint_error(no_cuda).status(),
            TuttiStatus::TUTTI_ERROR_UNSUPPORTED
        );
        let panicked = AdjointError::RankPanicked {
            rank: 1,
            message: "boom".into(),
        };
        assert_eq!(
            adjoint_error(panicked).status(),
            TuttiStatus::TUTTI_ERROR_PANIC
        );
    }

    #[test]
    fn devices_agree_and_bad_requests_and_small_caps_are_errors() {
        let (one, _) = xyz_energy(WATER_XYZ, c"6-31g", &options(1)).expect("1 device");
        for devices in 2..=4 {
            let (many, json) = xyz_energy(WATER_XYZ, c"6-31g", &options(devices)).expect("devices");
            assert!(((many.energy - one.energy) / one.energy).abs() <= 1e-12);
            assert!(json.contains(&format!("\"devices\":{devices}")), "{json}");
        }
        let (got, message) = xyz_energy(WATER_XYZ, c"6-31g", &options(0)).expect_err("zero");
        assert_eq!(got, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(message.contains("options->resources"), "{message}");
        let ordinals = [0, 100_000];
        let mut unknown = options(-1);
        unknown.resources.ordinals = ordinals.as_ptr();
        unknown.resources.ordinal_count = 2;
        let (got, message) = xyz_energy(WATER_XYZ, c"6-31g", &unknown).expect_err("ordinal");
        assert_eq!(got, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(message.contains("100000"), "{message}");
        let mut capped = options(2);
        capped.resources.device_memory_bytes = 1024;
        let (got, message) = xyz_energy(WATER_XYZ, c"6-31g", &capped).expect_err("cap");
        assert_eq!(got, TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY.code());
        assert!(message.contains("memory plan"), "{message}");
        if tutti_backend::gpu_count().unwrap_or(0) == 0 {
            let mut gpu = options(1);
            gpu.resources.kind = crate::devices::TuttiKind::TUTTI_KIND_GPU as c_int;
            let (got, message) = xyz_energy(WATER_XYZ, c"6-31g", &gpu).expect_err("no GPU");
            assert_ne!(got, 0, "{message}");
        }
    }

    #[test]
    fn water_def2tzvp_matches_pyscf_and_the_bohr_entry() {
        let (result, json) =
            xyz_energy(WATER_XYZ, c"def2-tzvp", &options(2)).expect("water/def2-tzvp");
        assert!(
            (result.energy - WATER_DEF2TZVP).abs() < 1e-8,
            "{} vs {WATER_DEF2TZVP}",
            result.energy
        );
        assert_eq!(
            (result.nao, result.electrons, result.converged),
            (43, 10, 1)
        );
        assert!(result.iterations > 1 && result.scf_seconds > 0.0);
        assert!(
            (result.electronic_energy + result.nuclear_repulsion - result.energy).abs() < 1e-10
        );
        assert!(
            json.starts_with('{') && json.contains("\"nao\":43"),
            "{json}"
        );
        assert!(json.contains("\"basis\":\"def2-tzvp\""), "{json}");

        let mut bohr = TuttiRhfResult::default();
        // SAFETY: arrays of 3 and 9 elements, valid strings and outputs; json_out NULL.
        let status = unsafe {
            tutti_rhf_energy_bohr(
                3,
                WATER_NUMBERS.as_ptr(),
                WATER_BOHR.as_ptr(),
                c"def2-tzvp".as_ptr(),
                &options(1),
                &mut bohr,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, 0, "{}", last_error());
        assert!((bohr.energy - WATER_DEF2TZVP).abs() < 1e-8);
        assert!((bohr.energy - result.energy).abs() < 1e-10);
    }

    #[test]
    fn matrices_out_gets_the_orbitals_and_density_and_frees_them() {
        let mut matrices = TuttiRhfMatrices::default();
        let mut with_matrices = options(2);
        with_matrices.matrices_out = &mut matrices;
        let (result, json) = xyz_energy(WATER_XYZ, c"sto-3g", &with_matrices).expect("2 devices");
        let (nao, nmo, occupied) = (
            matrices.nao as usize,
            matrices.nmo as usize,
            matrices.occupied as usize,
        );
        assert_eq!((nao, nmo, occupied), (7, 7, 5));
        assert_eq!(result.nao, 7);
        // SAFETY: tutti's arrays of the stated lengths, read before they are released.
        let (energies, c, p) = unsafe {
            (
                std::slice::from_raw_parts(matrices.orbital_energies, nmo),
                std::slice::from_raw_parts(matrices.coefficients, nao * nmo),
                std::slice::from_raw_parts(matrices.density, nao * nao),
            )
        };
        assert!(energies.windows(2).all(|pair| pair[0] <= pair[1]));
        // The summary's HOMO and LUMO are the orbital energies around the occupied count.
        let number = |key: &str| -> f64 {
            let start = json.find(&format!("\"{key}\":")).expect("the key") + key.len() + 3;
            let end = json[start..].find([',', '}']).expect("a value") + start;
            json[start..end].trim().parse().expect("a number")
        };
        assert_eq!(number("homo"), energies[occupied - 1]);
        assert_eq!(number("lumo"), energies[occupied]);
        // P = 2 C_occ C_occ^T, entry by entry (the same products in another order).
        for mu in 0..nao {
            for nu in 0..nao {
                let product: f64 = (0..occupied)
                    .map(|i| 2.0 * c[mu * nmo + i] * c[nu * nmo + i])
                    .sum();
                assert!((p[mu * nao + nu] - product).abs() < 1e-12, "P[{mu}][{nu}]");
                assert_eq!(p[mu * nao + nu], p[nu * nao + mu]);
            }
        }
        // SAFETY: written by the successful call above, released once.
        assert_eq!(unsafe { tutti_rhf_matrices_free(&mut matrices) }, 0);
        assert_eq!(matrices, TuttiRhfMatrices::default());
        // SAFETY: a reset struct and NULL are no-ops.
        assert_eq!(unsafe { tutti_rhf_matrices_free(&mut matrices) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { tutti_rhf_matrices_free(ptr::null_mut()) }, 0);
        // Overlapping another output is refused, and nothing is written.
        let mut result = TuttiRhfResult::default();
        let mut aliased = options(1);
        aliased.matrices_out = (&mut result as *mut TuttiRhfResult).cast();
        // SAFETY: valid strings and pointers; the overlap is refused before any write.
        let status = unsafe {
            tutti_rhf_energy(
                WATER_XYZ.as_ptr(),
                c"sto-3g".as_ptr(),
                &aliased,
                &mut result,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT as c_int);
        assert!(last_error().contains("matrices_out"), "{}", last_error());
    }

    #[test]
    fn the_progress_callback_gets_every_scf_iteration_with_its_energy() {
        let seen = crate::progress::recording::Seen::default();
        let mut with_progress = options(2);
        with_progress.progress = seen.callback();
        let (result, _) = xyz_energy(WATER_XYZ, c"sto-3g", &with_progress).expect("2 devices");
        let reports = seen.reports();
        let iterations = usize::try_from(result.iterations).expect("a count");
        assert_eq!(reports.len(), iterations);
        for (done, report) in (1..).zip(&reports) {
            let (task, stage, reported, total, energy) = report;
            assert_eq!((task.as_str(), stage.as_str()), ("scf", "iteration"));
            assert_eq!((*reported, *total), (done, 128));
            assert!(energy.is_some_and(f64::is_finite), "{report:?}");
        }
        // The last iteration's energy is the result's, to the SCF's energy tolerance.
        let last = reports.last().and_then(|r| r.4).expect("a report");
        assert!(
            (last - result.energy).abs() <= 1e-10,
            "{last} vs {}",
            result.energy
        );
    }

    #[test]
    fn water_sto3g_from_a_basis_file_matches_pyscf_and_devices_agree() {
        // PySCF's own sto-3g digits for O and H, as an NWChem file.
        let path = std::env::temp_dir().join(format!("tutti-capi-sto3g-{}.nw", std::process::id()));
        std::fs::write(
            &path,
            "BASIS \"ao basis\" SPHERICAL
H    S
      3.42525091             0.15432897
      0.62391373             0.53532814
      0.16885540             0.44463454
O    S
    130.70932                0.15432897
     23.808861               0.53532814
      6.4436083              0.44463454
O    SP
      5.0331513             -0.09996723             0.15591627
      1.1695961              0.39951283             0.60768372
      0.3803890              0.70011547             0.39195739
END
",
        )
        .expect("temporary file");
        let file = CString::new(path.to_string_lossy().into_owned()).expect("no NUL");
        let (one, _) = xyz_energy(WATER_XYZ, &file, &options(1)).expect("1 device");
        let (two, json) = xyz_energy(WATER_XYZ, &file, &options(2)).expect("2 devices");
        std::fs::remove_file(&path).expect("removed");
        assert!(
            (one.energy - WATER_STO3G_PYSCF).abs() < 1e-8,
            "{} vs {WATER_STO3G_PYSCF}",
            one.energy
        );
        assert!((one.energy - two.energy).abs() < 1e-12);
        assert_eq!(one.nao, 7);
        assert!(json.contains("\"devices\":2"), "{json}");
    }

    /// With `gradient_tolerance` (PySCF's criterion at its default, 1e-5, ours too)
    /// water/6-31g converges in no more iterations than by the density change (0), to the
    /// same energy within 1e-9 Eh, with the reported orbital gradient below the tolerance.
    #[test]
    fn the_orbital_gradient_criterion_converges_as_soon_to_the_same_energy() {
        let mut by_density_options = options(1);
        by_density_options.gradient_tolerance = 0.0;
        let (by_density, json) =
            xyz_energy(WATER_XYZ, c"6-31g", &by_density_options).expect("density criterion");
        let by_gradient_options = options(1);
        assert_eq!(by_gradient_options.gradient_tolerance, 1e-5);
        let (by_gradient, _) =
            xyz_energy(WATER_XYZ, c"6-31g", &by_gradient_options).expect("gradient criterion");
        assert!(
            by_gradient.iterations <= by_density.iterations,
            "{} vs {}",
            by_gradient.iterations,
            by_density.iterations
        );
        assert!(
            (by_gradient.energy - by_density.energy).abs() < 1e-9,
            "{} vs {}",
            by_gradient.energy,
            by_density.energy
        );
        assert_eq!(by_gradient.converged, 1);
        assert!(
            by_gradient.orbital_gradient > 0.0 && by_gradient.orbital_gradient < 1e-5,
            "{}",
            by_gradient.orbital_gradient
        );
        // The density criterion's result reports its orbital gradient too, as the JSON does.
        assert!(by_density.orbital_gradient < by_gradient.orbital_gradient);
        assert!(json.contains("\"orbital_gradient\":"), "{json}");
        let mut negative = by_gradient_options;
        negative.gradient_tolerance = -1e-5;
        let (status, message) =
            xyz_energy(WATER_XYZ, c"6-31g", &negative).expect_err("a negative tolerance");
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code());
        assert!(message.contains("options->gradient_tolerance"), "{message}");
    }

    #[test]
    fn null_arguments_are_errors_and_outputs_stay_untouched() {
        let mut result = TuttiRhfResult {
            energy: 42.0,
            ..TuttiRhfResult::default()
        };
        let mut json: *mut c_char = ptr::null_mut();
        for (xyz, basis, out, name) in [
            (
                ptr::null(),
                c"sto-3g".as_ptr(),
                &mut result as *mut _,
                "xyz_text",
            ),
            (
                WATER_XYZ.as_ptr(),
                ptr::null(),
                &mut result as *mut _,
                "basis",
            ),
            (
                WATER_XYZ.as_ptr(),
                c"sto-3g".as_ptr(),
                ptr::null_mut(),
                "result_out",
            ),
        ] {
            // SAFETY: NULL or valid pointers, as the contract allows.
            let status = unsafe { tutti_rhf_energy(xyz, basis, ptr::null(), out, &mut json) };
            assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
            assert!(
                last_error().contains(&format!("`{name}` is NULL")),
                "{}",
                last_error()
            );
        }
        // SAFETY: as above; NULL atomic numbers.
        let status = unsafe {
            tutti_rhf_energy_bohr(
                3,
                ptr::null(),
                WATER_BOHR.as_ptr(),
                c"sto-3g".as_ptr(),
                ptr::null(),
                &mut result,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("atomic_numbers"));
        assert_eq!(result.energy, 42.0);
        assert!(json.is_null());
        // SAFETY: NULL is rejected.
        let status = unsafe { tutti_rhf_options_default(ptr::null_mut()) };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
    }

    #[test]
    fn bad_inputs_have_their_status_and_a_message() {
        let invalid = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code();
        let check =
            |xyz: &CStr, basis: &CStr, options: &TuttiRhfOptions, status: c_int, words: &[&str]| {
                let (got, message) = xyz_energy(xyz, basis, options).expect_err("fails");
                assert_eq!(got, status, "{message}");
                assert!(message.starts_with("tutti_rhf_energy: "), "{message}");
                for word in words {
                    assert!(message.contains(word), "`{word}` not in: {message}");
                }
            };
        let defaults = TuttiRhfOptions::default();
        check(
            WATER_XYZ,
            c"no-such-basis",
            &defaults,
            invalid,
            &["unknown basis set `no-such-basis`", "sto-3g"],
        );
        check(
            c"1\n\nXx 0 0 0\n",
            c"sto-3g",
            &defaults,
            invalid,
            &["unknown element `Xx`"],
        );
        check(
            c"1\n\nKr 0 0 0\n",
            c"sto-3g",
            &defaults,
            invalid,
            &["no functions for element Kr"],
        );
        check(c"2\n\nH 0 0 0\n", c"sto-3g", &defaults, invalid, &["XYZ"]);
        check(c"1\n\nH 0 0 0\n", c"sto-3g", &defaults, invalid, &["even"]);
        check(
            WATER_XYZ,
            c"/nonexistent/tutti/basis.nw",
            &defaults,
            TuttiStatus::TUTTI_ERROR_IO.code(),
            &["/nonexistent/tutti/basis.nw"],
        );
        check(
            WATER_XYZ,
            c"sto-3g",
            &TuttiRhfOptions {
                max_iterations: 2,
                gradient_tolerance: 0.0,
                ..defaults
            },
            TuttiStatus::TUTTI_ERROR_NOT_CONVERGED.code(),
            &[
                "did not converge in 2 iterations",
                "criterion: energy and density changes",
                "orbital gradient",
            ],
        );
        check(
            WATER_XYZ,
            c"sto-3g",
            &TuttiRhfOptions {
                max_iterations: 2,
                ..defaults
            },
            TuttiStatus::TUTTI_ERROR_NOT_CONVERGED.code(),
            &[
                "did not converge in 2 iterations",
                "criterion: energy change and orbital gradient",
                "(target 1.0e-5)",
            ],
        );
        for (bad, word) in [
            (
                TuttiRhfOptions {
                    resources: TuttiResources {
                        devices: -2,
                        ..TuttiResources::default()
                    },
                    ..defaults
                },
                "options->resources.devices",
            ),
            (
                TuttiRhfOptions {
                    cartesian: 2,
                    ..defaults
                },
                "options->cartesian",
            ),
            (
                TuttiRhfOptions {
                    max_iterations: 0,
                    ..defaults
                },
                "options->max_iterations",
            ),
            (
                TuttiRhfOptions {
                    energy_tolerance: f64::NAN,
                    ..defaults
                },
                "energy_tolerance",
            ),
            (
                TuttiRhfOptions {
                    density_tolerance: 0.0,
                    ..defaults
                },
                "density_tolerance",
            ),
            (
                TuttiRhfOptions {
                    gradient_tolerance: -1e-5,
                    ..defaults
                },
                "options->gradient_tolerance is -0.00001",
            ),
            (
                TuttiRhfOptions {
                    gradient_tolerance: f64::NAN,
                    ..defaults
                },
                "options->gradient_tolerance is NaN",
            ),
            (
                TuttiRhfOptions {
                    gradient_tolerance: f64::INFINITY,
                    ..defaults
                },
                "options->gradient_tolerance is inf",
            ),
        ] {
            check(WATER_XYZ, c"sto-3g", &bad, invalid, &[word]);
        }

        let mut result = TuttiRhfResult::default();
        // SAFETY: arrays of 1 element; valid string and output.
        let status = unsafe {
            tutti_rhf_energy_bohr(
                1,
                [0].as_ptr(),
                [0.0; 3].as_ptr(),
                c"sto-3g".as_ptr(),
                ptr::null(),
                &mut result,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, invalid);
        assert!(
            last_error().contains("nuclear charge 0"),
            "{}",
            last_error()
        );
        // SAFETY: a zero count is rejected before any access.
        let status = unsafe {
            tutti_rhf_energy_bohr(
                0,
                [1].as_ptr(),
                [0.0; 3].as_ptr(),
                c"sto-3g".as_ptr(),
                ptr::null(),
                &mut result,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, invalid);
        assert!(last_error().contains("n_atoms"), "{}", last_error());
    }

    #[test]
    fn default_options_are_the_crate_defaults() {
        let mut options = TuttiRhfOptions {
            resources: TuttiResources {
                devices: 9,
                ..TuttiResources::default()
            },
            charge: 9,
            cartesian: 9,
            max_iterations: 9,
            energy_tolerance: 9.0,
            density_tolerance: 9.0,
            matrices_out: ptr::NonNull::dangling().as_ptr(),
            progress: crate::progress::recording::Seen::default().callback(),
            gradient_tolerance: 9.0,
        };
        // SAFETY: a valid pointer to a local.
        assert_eq!(unsafe { tutti_rhf_options_default(&mut options) }, 0);
        let scf = ScfOptions::default();
        assert_eq!(
            (options.resources, options.charge, options.cartesian),
            (TuttiResources::default(), 0, 0)
        );
        assert_eq!(options.max_iterations as usize, scf.max_iterations);
        assert_eq!(options.energy_tolerance, scf.energy_tolerance);
        assert_eq!(options.density_tolerance, scf.density_tolerance);
        assert_eq!(scf.gradient_tolerance, Some(1e-5));
        assert_eq!(options.gradient_tolerance, 1e-5);
        assert_eq!(options.progress, TuttiProgressCallback::default());
        assert!(options.matrices_out.is_null());
    }
}
