//! The gradient of the RHF energy with respect to every basis-set parameter, from C: the
//! energy, and dE/dalpha and dE/dc for every primitive of every shell placed on an atom, as
//! flat arrays in basis order with per-shell metadata to map them.
//!
//! Parameter convention (PySCF's): a shell with angular momentum l, exponents alpha_i and
//! library (un-normalized) coefficients c_i has the radial function
//! K * sum_i c_i N_l(alpha_i) r^l exp(-alpha_i r^2), N_l the primitive normalization and K
//! normalizing the contracted function; the parameters are the alpha_i and c_i as written in
//! the basis file, and each derivative includes that of the renormalization.

use std::ffi::{c_char, c_int, c_void};
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use tutti_adjoint::{rhf_gradient, rhf_gradient_on, Basis, GradientOptions, Molecule, RhfGradient};

use crate::adjoint::{
    adjoint_error, load_basis, optional_json_out, read_options, string_region, TuttiRhfOptions,
};
use crate::boundary::{
    check_disjoint, ffi_call, input_options, input_str, to_c_int, write_default, Out, Region,
};
use crate::memory::{array_to_c, free_c, string_to_c};
use crate::status::Error;
use crate::world::checked;

/// Options of `tutti_rhf_gradient`. Start from `tutti_gradient_options_default`.
///
/// The defaults are `tutti_rhf_options_default`'s with the density tolerance tightened to
/// 1e-9, as in Rust's `GradientOptions::default()` (the gradient is first order in the
/// density's error). The SCF always converges on the density change: a non-zero
/// `rhf.gradient_tolerance` is `TUTTI_ERROR_INVALID_ARGUMENT` (the orbital-gradient
/// criterion converges the density only to about its tolerance, too loose for the gradient).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TuttiGradientOptions {
    /// The SCF's options (see `TuttiRhfOptions`); `rhf.resources` also run every loop of
    /// the gradient (the same ranks, each loop split among them). `rhf.matrices_out` must be
    /// NULL and `rhf.gradient_tolerance` 0.
    pub rhf: TuttiRhfOptions,
    /// 1 to run the serial reference implementation, 0 (default) for the one split among the
    /// devices and threaded over shell pairs; both give the same gradient to round-off.
    pub serial: c_int,
}

impl Default for TuttiGradientOptions {
    fn default() -> Self {
        let rhf = TuttiRhfOptions {
            density_tolerance: GradientOptions::DENSITY_TOLERANCE,
            gradient_tolerance: 0.0,
            ..TuttiRhfOptions::default()
        };
        Self { rhf, serial: 0 }
    }
}

/// One shell of the basis placed on an atom: where its primitives sit in the flat arrays of
/// `TuttiRhfGradient`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TuttiGradientShell {
    /// Index of the atom in the molecule (0-based, in the order of the XYZ text).
    pub atom: c_int,
    /// Angular momentum (0 = s, 1 = p, ...).
    pub l: c_int,
    /// Number of primitives of the shell.
    pub primitives: c_int,
    /// Index of the shell's first primitive in the flat arrays: primitive i of the shell is
    /// element `offset + i` of `exponents`, `coefficients`, `grad_exponents` and
    /// `grad_coefficients`.
    pub offset: c_int,
}

/// Wall-clock times of a gradient run, seconds.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TuttiGradientTimings {
    /// The SCF (energy) that precedes the gradient.
    pub scf: f64,
    /// Overlap derivatives (the -tr(W dS) term).
    pub overlap: f64,
    /// Kinetic and nuclear-attraction derivatives (the tr(P dH) term).
    pub core_hamiltonian: f64,
    /// Derivative two-electron integrals contracted with the densities.
    pub two_electron: f64,
    /// Fock-like assembly and the final reduction.
    pub fock: f64,
    /// The whole run, the SCF included.
    pub total: f64,
}

/// What `tutti_rhf_gradient` computed: the energy and, for every primitive of every shell
/// on every atom, its parameters and dE/dparameter.
///
/// The arrays are in basis order: atoms in the order of the XYZ text, within an atom its
/// shells in the basis set's order sorted by l (an `SP` shell gives an s and a p shell),
/// within a shell its primitives. `shells[s]` says which atom and l shell `s` is and which
/// slice of the flat arrays is its own.
///
/// Ownership: the five arrays (`shells`, `exponents`, `coefficients`, `grad_exponents`,
/// `grad_coefficients`) are allocated by tutti and owned by the caller, who releases them
/// all at once with `tutti_rhf_gradient_free`, or each with `tutti_free_c` (never both).
///
/// Declare it zero-initialised, `TuttiRhfGradient g = {0};`, so that
/// `tutti_rhf_gradient_free(&g)` is a harmless no-op on every path, also when
/// `tutti_rhf_gradient` failed (it writes nothing then). Release the struct itself, not a
/// by-value copy: `tutti_rhf_gradient_free` resets the pointers of the struct it is given,
/// and a copy freed later still holds the old ones (a stale double free, refused unless the
/// addresses were reused meanwhile; see `tutti_free_c`).
#[repr(C)]
#[derive(Debug, PartialEq)]
pub struct TuttiRhfGradient {
    /// Total RHF energy (electronic + nuclear repulsion), hartree.
    pub energy: f64,
    /// SCF iterations (Fock builds).
    pub iterations: c_int,
    /// Devices (ranks) the run was split among.
    pub devices: c_int,
    /// Number of shells, the length of `shells`.
    pub n_shells: c_int,
    /// Number of primitives over all shells, the length of each flat array. There are
    /// `2 * n_primitives` parameters: one exponent and one coefficient per primitive.
    pub n_primitives: c_int,
    /// `n_shells` shells, in basis order.
    pub shells: *mut TuttiGradientShell,
    /// `n_primitives` exponents alpha_i as in the basis set, 1/bohr^2.
    pub exponents: *mut f64,
    /// `n_primitives` library (un-normalized) contraction coefficients c_i as in the basis
    /// set.
    pub coefficients: *mut f64,
    /// `n_primitives` derivatives dE/dalpha_i, hartree * bohr^2.
    pub grad_exponents: *mut f64,
    /// `n_primitives` derivatives dE/dc_i (the contracted function renormalized), hartree.
    pub grad_coefficients: *mut f64,
    /// Where the time went.
    pub timings: TuttiGradientTimings,
}

impl Default for TuttiRhfGradient {
    fn default() -> Self {
        Self {
            energy: 0.0,
            iterations: 0,
            devices: 0,
            n_shells: 0,
            n_primitives: 0,
            shells: ptr::null_mut(),
            exponents: ptr::null_mut(),
            coefficients: ptr::null_mut(),
            grad_exponents: ptr::null_mut(),
            grad_coefficients: ptr::null_mut(),
            timings: TuttiGradientTimings::default(),
        }
    }
}

/// Writes the default gradient options to `*options`: the RHF defaults
/// (`tutti_rhf_options_default`: the default resources, neutral, spherical, 128
/// iterations, energy tolerance 1e-10 Eh) with the density tolerance tightened to 1e-9 (as
/// Rust's `GradientOptions::default()`), and the split, threaded implementation.
///
/// # Safety
/// `options` is NULL or valid for writing a `TuttiGradientOptions`.
#[no_mangle]
pub unsafe extern "C" fn tutti_gradient_options_default(
    options: *mut TuttiGradientOptions,
) -> c_int {
    ffi_call("tutti_gradient_options_default", || {
        // SAFETY: NULL or valid for writes (the caller's promise).
        unsafe { write_default(options, "options") }
    })
}

/// A buffer handed to C, released with `free_c` when dropped unless [`CArray::release`]d:
/// nothing leaks when a later allocation of the same call fails.
struct CArray<T> {
    ptr: NonNull<T>,
    owns: PhantomData<T>,
}

impl<T> CArray<T> {
    /// Takes ownership of a buffer from [`crate::memory`].
    fn new(ptr: NonNull<T>) -> Self {
        Self {
            ptr,
            owns: PhantomData,
        }
    }

    /// Hands the buffer over to the caller.
    fn release(self) -> *mut T {
        let ptr = self.ptr.as_ptr();
        std::mem::forget(self);
        ptr
    }
}

impl<T> Drop for CArray<T> {
    fn drop(&mut self) {
        // SAFETY: ptr came from crate::memory and was not handed out (release forgets self).
        let _ = unsafe { free_c(self.ptr.as_ptr().cast()) };
    }
}

/// A gradient's C result with its arrays allocated but still owned here.
struct StagedGradient {
    /// The result with NULL pointers.
    scalars: TuttiRhfGradient,
    shells: CArray<TuttiGradientShell>,
    exponents: CArray<f64>,
    coefficients: CArray<f64>,
    grad_exponents: CArray<f64>,
    grad_coefficients: CArray<f64>,
}

impl StagedGradient {
    /// Flattens `gradient` in basis order and copies it into C buffers.
    fn new(gradient: &RhfGradient) -> Result<Self, Error> {
        let mut shells = Vec::with_capacity(gradient.shells.len());
        let mut exponents = Vec::new();
        let mut coefficients = Vec::new();
        let mut grad_exponents = Vec::new();
        let mut grad_coefficients = Vec::new();
        for shell in &gradient.shells {
            let primitives = shell.exponents.len();
            // The C arrays share one length: a mismatch is a bug, caught at the boundary.
            assert!(
                shell.coefficients.len() == primitives
                    && shell.grad_exponents.len() == primitives
                    && shell.grad_coefficients.len() == primitives,
                "a shell's per-primitive arrays differ in length"
            );
            shells.push(TuttiGradientShell {
                atom: to_c_int(shell.atom, "an atom index")?,
                l: to_c_int(shell.l, "an angular momentum")?,
                primitives: to_c_int(primitives, "a primitive count")?,
                offset: to_c_int(exponents.len(), "a primitive offset")?,
            });
            exponents.extend_from_slice(&shell.exponents);
            coefficients.extend_from_slice(&shell.coefficients);
            grad_exponents.extend_from_slice(&shell.grad_exponents);
            grad_coefficients.extend_from_slice(&shell.grad_coefficients);
        }
        let timings = &gradient.timings;
        let scalars = TuttiRhfGradient {
            energy: gradient.energy,
            iterations: to_c_int(gradient.iterations, "the iteration count")?,
            devices: to_c_int(gradient.devices, "the device count")?,
            n_shells: to_c_int(shells.len(), "the number of shells")?,
            n_primitives: to_c_int(exponents.len(), "the number of primitives")?,
            timings: TuttiGradientTimings {
                scf: timings.scf,
                overlap: timings.overlap,
                core_hamiltonian: timings.core_hamiltonian,
                two_electron: timings.two_electron,
                fock: timings.fock,
                total: timings.total,
            },
            ..TuttiRhfGradient::default()
        };
        Ok(Self {
            scalars,
            shells: CArray::new(array_to_c(&shells)?),
            exponents: CArray::new(array_to_c(&exponents)?),
            coefficients: CArray::new(array_to_c(&coefficients)?),
            grad_exponents: CArray::new(array_to_c(&grad_exponents)?),
            grad_coefficients: CArray::new(array_to_c(&grad_coefficients)?),
        })
    }

    /// The result, its arrays handed over to the caller.
    fn release(self) -> TuttiRhfGradient {
        TuttiRhfGradient {
            shells: self.shells.release(),
            exponents: self.exponents.release(),
            coefficients: self.coefficients.release(),
            grad_exponents: self.grad_exponents.release(),
            grad_coefficients: self.grad_coefficients.release(),
            ..self.scalars
        }
    }
}

/// The RHF energy of a molecule given as XYZ text (Angstrom) in the basis set `basis`, and
/// its analytic gradient with respect to every primitive exponent and library contraction
/// coefficient of every shell on every atom.
///
/// `xyz_text` and `basis` are as for `tutti_rhf_energy`: the text of an XYZ file, and a
/// shipped basis name (sto-3g, 6-31g, 6-31g*, cc-pvdz, cc-pvtz, def2-svp, def2-tzvp) or a path to an
/// NWChem-format file. `options` may be NULL for the defaults
/// (`tutti_gradient_options_default`). Parameters are per atom: the derivative with respect
/// to a parameter an element's atoms share is the sum over those atoms (the JSON's
/// `elements` holds it).
///
/// Outputs, written only on success: `*result_out`, whose arrays the caller owns and
/// releases with `tutti_rhf_gradient_free` (see `TuttiRhfGradient`); and, when `json_out`
/// is not NULL, `*json_out`, a NUL-terminated JSON document (`energy`, `iterations`,
/// `devices`, `timings`, `basis`: per atom {`atom`, `symbol`, `shells`: [{`l`, `exponents`,
/// `coefficients`, `grad_exponents`, `grad_coefficients`}]}, `elements`: the per-element
/// sums) that the caller owns and releases with `tutti_free_c`.
///
/// Errors: NULL `xyz_text`, `basis` or `result_out` (`TUTTI_ERROR_NULL_POINTER`); malformed
/// XYZ text, an unknown element, an unknown basis set or one without functions for an
/// element, a malformed basis file, an odd electron count, bad options, among them a
/// non-zero `rhf.gradient_tolerance` (`TUTTI_ERROR_INVALID_ARGUMENT`); a basis path that
/// cannot be read (`TUTTI_ERROR_IO`); an SCF that misses its tolerances within
/// `max_iterations` (`TUTTI_ERROR_NOT_CONVERGED`); no memory for the results
/// (`TUTTI_ERROR_OUT_OF_MEMORY`).
///
/// # Safety
/// `xyz_text` and `basis` are NULL or NUL-terminated strings; `options` is NULL or valid for
/// reading a `TuttiGradientOptions`; `result_out` is NULL or valid for writing a
/// `TuttiRhfGradient`; `json_out` is NULL or valid for writing a `char *`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_gradient(
    xyz_text: *const c_char,
    basis: *const c_char,
    options: *const TuttiGradientOptions,
    result_out: *mut TuttiRhfGradient,
    json_out: *mut *mut c_char,
) -> c_int {
    ffi_call("tutti_rhf_gradient", || {
        // SAFETY: NULL or valid for reading a TuttiGradientOptions (the caller's promise);
        // the helper checks alignment.
        let options = unsafe { input_options(options, "options")? };
        // The options' world first: with one, every later check's failure releases the
        // other processes (`checked`).
        // SAFETY: `options.rhf` is a local copy; its resources' pointers are the caller's.
        let (settings, charge) = unsafe { read_options(&options.rhf)? };
        let (xyz_text, basis_name, result_out, json_out, serial) = checked(
            settings.world,
            (|| {
                if !settings.matrices_out.is_null() {
                    return Err(Error::invalid_argument(
                        "options->rhf.matrices_out is not NULL: the gradient returns no \
                         matrices (use tutti_rhf_energy for them)",
                    ));
                }
                if settings.scf.gradient_tolerance.is_some() {
                    return Err(Error::invalid_argument(format!(
                        "options->rhf.gradient_tolerance is {}: the gradient's SCF converges \
                         on the density change (the orbital-gradient criterion leaves the \
                         density too loose for it); leave it 0",
                        options.rhf.gradient_tolerance
                    )));
                }
                let serial = match options.serial {
                    0 => false,
                    1 => true,
                    other => {
                        return Err(Error::invalid_argument(format!(
                            "options->serial is {other}: expected 0 (threaded) or 1 (serial)"
                        )))
                    }
                };
                // SAFETY: the caller's promises above; the helper checks NULL and UTF-8.
                let (xyz_text, basis_name) =
                    unsafe { (input_str(xyz_text, "xyz_text")?, input_str(basis, "basis")?) };
                check_disjoint(&[
                    string_region("xyz_text", xyz_text),
                    string_region("basis", basis_name),
                    Region::output("result_out", result_out, 1),
                    Region::output("json_out", json_out, 1),
                ])?;
                // SAFETY: the caller's promises above; the helpers check NULL and alignment; the
                // outputs overlap nothing (checked above).
                let (result_out, json_out) = unsafe {
                    (
                        Out::new(result_out, "result_out")?,
                        optional_json_out(json_out)?,
                    )
                };
                Ok((xyz_text, basis_name, result_out, json_out, serial))
            })(),
        )?;
        // With a world, a failure of these checks releases the other processes.
        let (molecule, basis_set, basis) = checked(
            settings.world,
            Molecule::from_xyz(xyz_text)
                .and_then(|molecule| molecule.with_charge(charge))
                .map_err(adjoint_error)
                .and_then(|molecule| {
                    let set = load_basis(basis_name)?;
                    let basis =
                        Basis::new(&molecule, &set, settings.kind).map_err(adjoint_error)?;
                    Ok((molecule, set, basis))
                }),
        )?;
        let mut gradient_options = GradientOptions::default().with_serial(serial);
        gradient_options.scf = settings.scf.clone();
        let gradient = match settings.world {
            None => rhf_gradient(&molecule, &basis, &gradient_options),
            Some(world) => rhf_gradient_on(
                &world.group(&gradient_options.scf.resources, tutti_adjoint::GPU_USE)?,
                &molecule,
                &basis,
                &gradient_options,
            ),
        }
        .map_err(adjoint_error)?;
        // Every buffer is owned here until both outputs are written: a failure releases them.
        let staged = StagedGradient::new(&gradient)?;
        let json = match json_out {
            Some(out) => Some((
                out,
                CArray::new(string_to_c(&gradient.to_json(&molecule, basis_set.name()))?),
            )),
            None => None,
        };
        result_out.write(staged.release());
        if let Some((out, text)) = json {
            out.write(text.release());
        }
        Ok(())
    })
}
/// Releases the five arrays of a `TuttiRhfGradient` (with `tutti_free_c`) and resets the
/// struct: pointers NULL, counts 0. NULL `result`, or a result whose pointers are already
/// NULL (released before, or zero-initialised), is a no-op returning `TUTTI_OK`.
///
/// Errors: `TUTTI_ERROR_INVALID_ARGUMENT` when a pointer is recognisably not a live tutti
/// buffer (see `tutti_free_c`); the other arrays are released and every pointer is reset.
///
/// # Safety
/// `result` is NULL or valid for reading and writing a `TuttiRhfGradient` that was written
/// by a successful `tutti_rhf_gradient`, or zero-initialised, and whose arrays were not
/// released with `tutti_free_c`.
#[no_mangle]
pub unsafe extern "C" fn tutti_rhf_gradient_free(result: *mut TuttiRhfGradient) -> c_int {
    ffi_call("tutti_rhf_gradient_free", || {
        if result.is_null() {
            return Ok(());
        }
        if !result.is_aligned() {
            return Err(Error::invalid_argument("argument `result` is not aligned"));
        }
        // SAFETY: not NULL, aligned (checked above), and valid for reads and writes (the
        // caller's promise).
        let result = unsafe { &mut *result };
        let arrays: [*mut c_void; 5] = [
            result.shells.cast(),
            result.exponents.cast(),
            result.coefficients.cast(),
            result.grad_exponents.cast(),
            result.grad_coefficients.cast(),
        ];
        result.shells = ptr::null_mut();
        result.exponents = ptr::null_mut();
        result.coefficients = ptr::null_mut();
        result.grad_exponents = ptr::null_mut();
        result.grad_coefficients = ptr::null_mut();
        result.n_shells = 0;
        result.n_primitives = 0;
        let mut first_error = None;
        for array in arrays {
            // SAFETY: NULL or a live buffer from tutti_rhf_gradient (the caller's promise);
            // free_c refuses most other pointers without touching them.
            if let Err(error) = unsafe { free_c(array) } {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};

    use super::*;
    use crate::boundary::last_error;
    use crate::memory::tutti_free_c;
    use crate::status::TuttiStatus;

    /// H2O at the geometry of /work/shared/reference/adjoint/h2o_sto3g.json (r(OH) =
    /// 0.9572 A, angle 104.52 deg): the reference's bohr coordinates times 0.52917721092.
    const WATER_XYZ: &CStr = c"3
water
O 0.0 0.0 0.0
H 0.0 0.7569503272636612 0.585882276618295
H 0.0 -0.7569503272636612 0.585882276618295
";

    /// PySCF 2.14's built-in sto-3g digits for H and O, as an NWChem file.
    const PYSCF_STO3G: &str = "BASIS \"ao basis\" SPHERICAL
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
";

    /// PySCF 2.14 RHF/sto-3g of that water (h2o_sto3g.json, `e_rhf`).
    const WATER_STO3G_PYSCF: f64 = -74.96292824643292;

    /// h2o_sto3g.json, `gradient.flat_richardson`: PySCF central finite differences with
    /// Richardson extrapolation, per atom, per shell: the 3 dE/dalpha then the 3 dE/dc.
    const WATER_STO3G_FD: [f64; 30] = [
        -0.00454578252269413,
        0.009360970764342292,
        0.016171199121206816,
        1.171628446764809,
        0.25308802271695185,
        -0.7113737924650345,
        -0.006927601369552419,
        -0.03787756122893911,
        0.02833851474853007,
        -0.06869106930669962,
        -0.033246210999019844,
        0.009163384599257066,
        -0.09035962881441541,
        0.0892641506233285,
        1.1930220281643462,
        -1.771296897364512,
        0.7778341914862114,
        -0.5013380977914039,
        0.0001222605181735594,
        -0.006504721318924833,
        -0.050006811009561676,
        0.01670402625109091,
        -0.005959731671130914,
        0.0013775325176842062,
        0.00012226035567690613,
        -0.0065047212430016516,
        -0.050006811009561676,
        0.016704025303700593,
        -0.005959733092216386,
        0.0013775296755132631,
    ];

    /// The test's tolerance: relative 1e-6, absolute 1e-8 for tiny gradients.
    fn close(got: f64, reference: f64) -> bool {
        (got - reference).abs() <= (1e-6 * reference.abs()).max(1e-8)
    }

    /// The defaults on `devices` simulated devices (-1: the default device set).
    fn options(devices: c_int, serial: c_int) -> TuttiGradientOptions {
        let mut options = TuttiGradientOptions::default();
        options.rhf.resources.kind = crate::devices::TuttiKind::TUTTI_KIND_CPU as c_int;
        options.rhf.resources.devices = devices;
        options.serial = serial;
        options
    }

    /// What one successful call returned, copied out before its buffers were released.
    #[derive(Debug)]
    struct Computed {
        energy: f64,
        shells: Vec<TuttiGradientShell>,
        /// Per shell: dE/dalpha_i then dE/dc_i, the reference's order.
        flat: Vec<f64>,
        json: String,
    }

    /// Runs the entry point; on success its outputs copied, everything released; on
    /// failure the status and message.
    fn gradient(
        xyz: &CStr,
        basis: &CStr,
        options: &TuttiGradientOptions,
    ) -> Result<Computed, (c_int, String)> {
        let mut result = TuttiRhfGradient::default();
        let mut json: *mut c_char = ptr::null_mut();
        // SAFETY: valid strings, options, and output pointers to locals.
        let status = unsafe {
            tutti_rhf_gradient(
                xyz.as_ptr(),
                basis.as_ptr(),
                options,
                &mut result,
                &mut json,
            )
        };
        if status != 0 {
            assert!(
                json.is_null() && result.shells.is_null(),
                "nothing on failure"
            );
            return Err((status, last_error()));
        }
        let n_shells = usize::try_from(result.n_shells).expect("a count");
        let n = usize::try_from(result.n_primitives).expect("a count");
        // SAFETY: tutti wrote arrays of these lengths.
        let (shells, grad_exponents, grad_coefficients) = unsafe {
            (
                std::slice::from_raw_parts(result.shells, n_shells).to_vec(),
                std::slice::from_raw_parts(result.grad_exponents, n).to_vec(),
                std::slice::from_raw_parts(result.grad_coefficients, n).to_vec(),
            )
        };
        let mut flat = Vec::with_capacity(2 * n);
        for shell in &shells {
            let range = shell.offset as usize..(shell.offset + shell.primitives) as usize;
            flat.extend_from_slice(&grad_exponents[range.clone()]);
            flat.extend_from_slice(&grad_coefficients[range]);
        }
        // SAFETY: json is a NUL-terminated string from tutti, read before it is released.
        let text = unsafe { CStr::from_ptr(json) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: both came from tutti and are released once.
        unsafe {
            assert_eq!(tutti_free_c(json.cast()), 0);
            assert_eq!(tutti_rhf_gradient_free(&mut result), 0);
        }
        assert!(result.shells.is_null() && result.n_primitives == 0);
        Ok(Computed {
            energy: result.energy,
            shells,
            flat,
            json: text,
        })
    }

    fn pyscf_sto3g_file(tag: &str) -> (std::path::PathBuf, CString) {
        let path = std::env::temp_dir().join(format!(
            "tutti-capi-gradient-{tag}-{}.nw",
            std::process::id()
        ));
        std::fs::write(&path, PYSCF_STO3G).expect("temporary file");
        let name = CString::new(path.to_string_lossy().into_owned()).expect("no NUL");
        (path, name)
    }

    #[test]
    fn water_sto3g_matches_pyscf_finite_differences_and_devices_agree() {
        let (path, file) = pyscf_sto3g_file("water");
        let one = gradient(WATER_XYZ, &file, &options(1, 0));
        let two = gradient(WATER_XYZ, &file, &options(2, 0));
        let three = gradient(WATER_XYZ, &file, &options(3, 0));
        let serial = gradient(WATER_XYZ, &file, &options(2, 1));
        std::fs::remove_file(&path).expect("removed");
        let Computed {
            energy,
            shells,
            flat,
            json,
        } = one.expect("1 device");
        assert!((energy - WATER_STO3G_PYSCF).abs() < 1e-8, "{energy}");
        let layout: Vec<_> = shells
            .iter()
            .map(|s| (s.atom, s.l, s.primitives, s.offset))
            .collect();
        assert_eq!(
            layout,
            [
                (0, 0, 3, 0),
                (0, 0, 3, 3),
                (0, 1, 3, 6),
                (1, 0, 3, 9),
                (2, 0, 3, 12)
            ]
        );
        for (k, (&got, &reference)) in flat.iter().zip(&WATER_STO3G_FD).enumerate() {
            assert!(close(got, reference), "parameter {k}: {got} vs {reference}");
        }
        assert!(json.contains("\"grad_exponents\""), "{json}");
        for (other, name) in [(two, "2 devices"), (three, "3 devices"), (serial, "serial")] {
            let other = other.expect(name);
            assert!(((other.energy - energy) / energy).abs() <= 1e-12, "{name}");
            // The agreement: 1e-10 relative to max(|g|, 1e-2).
            for (a, b) in flat.iter().zip(&other.flat) {
                assert!(
                    (a - b).abs() <= 1e-10 * a.abs().max(1e-2),
                    "{name}: {a} vs {b}"
                );
            }
        }
        assert!(json.contains("\"devices\": 1"), "{json}");
    }

    #[test]
    fn the_default_density_tolerance_is_the_gradients() {
        let mut options = TuttiGradientOptions::default();
        options.rhf.density_tolerance = 0.5;
        // SAFETY: a valid pointer to a local.
        assert_eq!(unsafe { tutti_gradient_options_default(&mut options) }, 0);
        assert_eq!(
            options.rhf.density_tolerance,
            GradientOptions::DENSITY_TOLERANCE
        );
        assert_eq!(
            GradientOptions::default().scf.density_tolerance,
            GradientOptions::DENSITY_TOLERANCE
        );
    }

    #[test]
    fn errors_have_their_status_and_leave_outputs_untouched() {
        let invalid = TuttiStatus::TUTTI_ERROR_INVALID_ARGUMENT.code();
        let defaults = TuttiGradientOptions::default();
        for (xyz, basis, options, status, word) in [
            (
                WATER_XYZ,
                c"no-such-basis",
                defaults,
                invalid,
                "no-such-basis",
            ),
            (c"1\n\nH 0 0 0\n", c"sto-3g", defaults, invalid, "even"),
            (c"1\n\nXx 0 0 0\n", c"sto-3g", defaults, invalid, "`Xx`"),
            (
                WATER_XYZ,
                c"/nonexistent/tutti/basis.nw",
                defaults,
                TuttiStatus::TUTTI_ERROR_IO.code(),
                "/nonexistent/tutti/basis.nw",
            ),
            (
                WATER_XYZ,
                c"sto-3g",
                TuttiGradientOptions {
                    serial: 2,
                    ..defaults
                },
                invalid,
                "options->serial",
            ),
            (
                WATER_XYZ,
                c"sto-3g",
                options(0, 0),
                invalid,
                "options->resources",
            ),
            (
                WATER_XYZ,
                c"sto-3g",
                {
                    let mut asking = defaults;
                    asking.rhf.matrices_out = ptr::NonNull::dangling().as_ptr();
                    asking
                },
                invalid,
                "options->rhf.matrices_out",
            ),
            (
                WATER_XYZ,
                c"sto-3g",
                {
                    let mut by_gradient = defaults;
                    by_gradient.rhf.gradient_tolerance = 1e-5;
                    by_gradient
                },
                invalid,
                "options->rhf.gradient_tolerance is 0.00001: the gradient's SCF converges on \
                 the density change",
            ),
            (
                WATER_XYZ,
                c"sto-3g",
                {
                    let mut capped = options(2, 0);
                    capped.rhf.resources.device_memory_bytes = 1024;
                    capped
                },
                TuttiStatus::TUTTI_ERROR_OUT_OF_MEMORY.code(),
                "memory plan",
            ),
        ] {
            let (got, message) = gradient(xyz, basis, &options).expect_err("fails");
            assert_eq!(got, status, "{message}");
            assert!(message.starts_with("tutti_rhf_gradient: "), "{message}");
            assert!(message.contains(word), "`{word}` not in: {message}");
        }

        let mut result = TuttiRhfGradient {
            energy: 42.0,
            ..TuttiRhfGradient::default()
        };
        // SAFETY: NULL pointers are rejected before any access.
        let status = unsafe {
            tutti_rhf_gradient(
                ptr::null(),
                c"sto-3g".as_ptr(),
                ptr::null(),
                &mut result,
                ptr::null_mut(),
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("xyz_text"), "{}", last_error());
        // SAFETY: as above.
        let status = unsafe {
            tutti_rhf_gradient(
                WATER_XYZ.as_ptr(),
                c"sto-3g".as_ptr(),
                ptr::null(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        assert_eq!(status, TuttiStatus::TUTTI_ERROR_NULL_POINTER.code());
        assert!(last_error().contains("result_out"), "{}", last_error());
        assert_eq!(result.energy, 42.0);
        // SAFETY: NULL is a no-op; a zeroed result has only NULL pointers.
        unsafe {
            assert_eq!(tutti_rhf_gradient_free(ptr::null_mut()), 0);
            assert_eq!(tutti_rhf_gradient_free(&mut result), 0);
            assert_eq!(
                tutti_gradient_options_default(ptr::null_mut()),
                TuttiStatus::TUTTI_ERROR_NULL_POINTER.code()
            );
        }
    }

    #[test]
    fn default_options_are_the_rhf_defaults_threaded_with_the_gradients_tolerance() {
        let mut options = options(9, 9);
        // SAFETY: a valid pointer to a local.
        assert_eq!(unsafe { tutti_gradient_options_default(&mut options) }, 0);
        let rhf = TuttiRhfOptions {
            density_tolerance: GradientOptions::DENSITY_TOLERANCE,
            gradient_tolerance: 0.0,
            ..TuttiRhfOptions::default()
        };
        assert_eq!(options.rhf, rhf);
        assert_eq!(options.rhf.gradient_tolerance, 0.0);
        assert_eq!(options.serial, 0);
    }
}
