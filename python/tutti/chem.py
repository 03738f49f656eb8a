"""Closed-shell RHF: the energy (``tutti_rhf_energy``) and its gradient with respect to the
basis parameters (``tutti_rhf_gradient``)."""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Optional

from . import molecule as _molecule
from ._lib import Status, TuttiError, _check, _int, declare, lib
from .progress import _CProgressCallback, _ProgressHook
from .resources import Resources, _c_resources, _CResources
from .world import _entering_library, spans_world

__all__ = ["RhfEnergy", "rhf_energy", "ShellGradient", "RhfGradient", "rhf_gradient"]


class _CRhfMatrices(ctypes.Structure):
    _fields_ = [
        ("nao", ctypes.c_int),
        ("nmo", ctypes.c_int),
        ("occupied", ctypes.c_int),
        ("orbital_energies", ctypes.POINTER(ctypes.c_double)),
        ("coefficients", ctypes.POINTER(ctypes.c_double)),
        ("density", ctypes.POINTER(ctypes.c_double)),
    ]


class _CRhfOptions(ctypes.Structure):
    _fields_ = [
        ("resources", _CResources),
        ("charge", ctypes.c_int),
        ("cartesian", ctypes.c_int),
        ("max_iterations", ctypes.c_int),
        ("energy_tolerance", ctypes.c_double),
        ("density_tolerance", ctypes.c_double),
        ("matrices_out", ctypes.POINTER(_CRhfMatrices)),
        ("progress", _CProgressCallback),
        ("gradient_tolerance", ctypes.c_double),
    ]


class _CRhfResult(ctypes.Structure):
    _fields_ = [
        ("energy", ctypes.c_double),
        ("electronic_energy", ctypes.c_double),
        ("nuclear_repulsion", ctypes.c_double),
        ("delta_energy", ctypes.c_double),
        ("delta_density", ctypes.c_double),
        ("scf_seconds", ctypes.c_double),
        ("nao", ctypes.c_int),
        ("electrons", ctypes.c_int),
        ("iterations", ctypes.c_int),
        ("converged", ctypes.c_int),
        ("orbital_gradient", ctypes.c_double),
    ]


@dataclass(frozen=True)
class RhfEnergy:
    """The outcome of :func:`rhf_energy`: energies in hartree, the converged iteration's
    orbital gradient (``orbital_gradient``: ``|X^T (F P S - S P F) X|_F / sqrt(2)``, the norm
    PySCF's ``conv_tol_grad`` bounds), and the library's JSON summary (``summary``: energy,
    nao, shells, atoms, electrons, basis, angular, devices, iterations, delta_energy,
    delta_density, orbital_gradient, homo, lumo, timings in seconds)."""

    energy: float
    electronic_energy: float
    nuclear_repulsion: float
    nao: int
    electrons: int
    iterations: int
    converged: bool
    orbital_gradient: float
    summary: dict
    #: With ``matrices=True``: the ``nmo`` orbital energies, ascending (PySCF's ``mo_energy``).
    orbital_energies: Optional["numpy.ndarray"] = None
    #: With ``matrices=True``: the (nao, nmo) MO coefficients (PySCF's ``mo_coeff``).
    coefficients: Optional["numpy.ndarray"] = None
    #: With ``matrices=True``: the (nao, nao) density ``2 C_occ C_occ^T`` (``make_rdm1()``).
    density: Optional["numpy.ndarray"] = None
    #: With ``matrices=True``: the doubly occupied MOs (the first columns of ``coefficients``).
    occupied: Optional[int] = None


class _CGradientOptions(ctypes.Structure):
    _fields_ = [("rhf", _CRhfOptions), ("serial", ctypes.c_int)]


class _CGradientShell(ctypes.Structure):
    _fields_ = [
        ("atom", ctypes.c_int),
        ("l", ctypes.c_int),
        ("primitives", ctypes.c_int),
        ("offset", ctypes.c_int),
    ]


class _CGradientTimings(ctypes.Structure):
    _fields_ = [
        ("scf", ctypes.c_double),
        ("overlap", ctypes.c_double),
        ("core_hamiltonian", ctypes.c_double),
        ("two_electron", ctypes.c_double),
        ("fock", ctypes.c_double),
        ("total", ctypes.c_double),
    ]


class _CRhfGradient(ctypes.Structure):
    _fields_ = [
        ("energy", ctypes.c_double),
        ("iterations", ctypes.c_int),
        ("devices", ctypes.c_int),
        ("n_shells", ctypes.c_int),
        ("n_primitives", ctypes.c_int),
        ("shells", ctypes.POINTER(_CGradientShell)),
        ("exponents", ctypes.POINTER(ctypes.c_double)),
        ("coefficients", ctypes.POINTER(ctypes.c_double)),
        ("grad_exponents", ctypes.POINTER(ctypes.c_double)),
        ("grad_coefficients", ctypes.POINTER(ctypes.c_double)),
        ("timings", _CGradientTimings),
    ]


@dataclass(frozen=True)
class ShellGradient:
    """One shell of the basis placed on an atom (:func:`rhf_gradient`): its parameters as in
    the basis set and dE/dparameter, numpy arrays over the shell's primitives. ``atom`` is
    the atom's index in the XYZ order, ``l`` the angular momentum."""

    atom: int
    l: int
    exponents: "numpy.ndarray"
    coefficients: "numpy.ndarray"
    grad_exponents: "numpy.ndarray"
    grad_coefficients: "numpy.ndarray"


@dataclass(frozen=True)
class RhfGradient:
    """The outcome of :func:`rhf_gradient`: the RHF energy (hartree), one
    :class:`ShellGradient` per shell in basis order (atoms in XYZ order, each atom's shells
    sorted by l, an SP shell split into s and p), SCF iterations, the number of devices
    (ranks) the run was split among, ``timings`` in seconds (scf, overlap, core_hamiltonian, two_electron, fock, total)
    and ``summary``, the library's JSON document parsed (energy, basis: per atom its shells
    with grad_exponents and grad_coefficients, elements: the sums over the atoms of each
    element, timings)."""

    energy: float
    shells: list[ShellGradient]
    iterations: int
    devices: int
    timings: dict
    summary: dict

    def flat(self) -> "numpy.ndarray":
        """Every dE/dparameter in one array: per shell, its dE/dalpha_i then its dE/dc_i."""
        import numpy as np

        return np.concatenate(
            [np.concatenate([s.grad_exponents, s.grad_coefficients]) for s in self.shells]
        )


declare(
    {
        "tutti_rhf_options_default": ([ctypes.POINTER(_CRhfOptions)], ctypes.c_int),
        "tutti_rhf_matrices_free": ([ctypes.POINTER(_CRhfMatrices)], ctypes.c_int),
        "tutti_rhf_energy": (
            [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(_CRhfOptions),
                ctypes.POINTER(_CRhfResult),
                # c_void_p: the JSON pointer must reach tutti_free_c unchanged.
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_rhf_energy_bohr": (
            [
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_int),
                ctypes.POINTER(ctypes.c_double),
                ctypes.c_char_p,
                ctypes.POINTER(_CRhfOptions),
                ctypes.POINTER(_CRhfResult),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_gradient_options_default": ([ctypes.POINTER(_CGradientOptions)], ctypes.c_int),
        "tutti_rhf_gradient": (
            [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(_CGradientOptions),
                ctypes.POINTER(_CRhfGradient),
                ctypes.POINTER(ctypes.c_void_p),
            ],
            ctypes.c_int,
        ),
        "tutti_rhf_gradient_free": ([ctypes.POINTER(_CRhfGradient)], ctypes.c_int),
    }
)


@spans_world
def rhf_energy(
    molecule,
    basis: str,
    *,
    unit: str = "angstrom",
    resources: Resources | None = None,
    charge: int = 0,
    cartesian: bool = False,
    max_iterations: int | None = None,
    gradient_tolerance: float | None = 1e-5,
    progress=None,
    matrices: bool = False,
) -> RhfEnergy:
    """Closed-shell RHF energy of a molecule (``tutti_rhf_energy``).

    ``molecule`` is the text of an XYZ file (Angstrom), a path to one (a ``Path``, or a
    one-line string naming a file), a PySCF-style atom string (``"O 0 0 0; H 0 0.757 0.587;
    H 0 -0.757 0.587"``) or list (``[("O", (0, 0, 0)), ("H", (0, 0.757, 0.587)), ...]``, symbols
    or atomic numbers), the last two in ``unit`` (``"angstrom"`` or ``"bohr"``, as PySCF's
    ``Mole.unit``). ``basis`` is a shipped name (sto-3g, 6-31g, 6-31g*,
    cc-pvdz, cc-pvtz, def2-svp, def2-tzvp) or a path to an NWChem-format file. ``resources`` (a
    :class:`tutti.Resources`; ``None``: every GPU, else one simulated device using all cores)
    says where it runs: each Fock build is split among the devices, and any device count
    agrees with one to rounding (1e-12 relative). A basis or element the library does not
    know, or a bad device request, raises TuttiError with ``Status.ERROR_INVALID_ARGUMENT``;
    a memory cap too small for the run, ``Status.ERROR_OUT_OF_MEMORY`` (before any work); an
    SCF that does not converge, ``Status.ERROR_NOT_CONVERGED``. The SCF converges when the
    energy changes by less than 1e-10 Eh and the orbital gradient is below
    ``gradient_tolerance``: PySCF's criterion (``conv_tol_grad``, whose default at
    ``conv_tol`` 1e-10 is this default, 1e-5); the energy is that of a tightly converged SCF
    to about its square, the orbitals and density only to about it. ``None`` converges
    instead when no density element changes by more than 1e-8 (3-4 more iterations). It must
    be positive and finite, or ``None`` (``Status.ERROR_INVALID_ARGUMENT`` otherwise). ``progress``, a callable,
    receives a :class:`tutti.Progress` after each SCF iteration, with its energy as
    ``value`` (``tutti.progress`` says how an exception in it is raised).
    ``matrices=True`` also returns the converged orbital energies, MO coefficients and
    density as numpy arrays, in PySCF's AO order for the same basis (``options->matrices_out``).
    """
    import json

    import numpy as np

    form = _molecule.read(molecule, unit)
    options = _CRhfOptions()
    _check(lib.tutti_rhf_options_default(ctypes.byref(options)))
    options.resources, keepalive = _c_resources(resources)
    options.charge = _int(charge, "charge").value
    options.cartesian = 1 if cartesian else 0
    if max_iterations is not None:
        options.max_iterations = _int(max_iterations, "max_iterations").value
    if gradient_tolerance is None:
        # 0 selects the density criterion in C.
        options.gradient_tolerance = 0.0
    else:
        # ... so it is refused here: only None selects it.
        if float(gradient_tolerance) == 0.0:
            raise TuttiError(
                Status.ERROR_INVALID_ARGUMENT,
                "rhf_energy: `gradient_tolerance` is 0: expected a positive finite number, "
                "or None for the density criterion",
            )
        options.gradient_tolerance = float(gradient_tolerance)
    hook = _ProgressHook(progress, "rhf_energy")
    options.progress = hook.c
    c_matrices = _CRhfMatrices()
    if matrices:
        options.matrices_out = ctypes.pointer(c_matrices)
    result = _CRhfResult()
    text = ctypes.c_void_p()
    basis_c = os.fsencode(basis)
    _entering_library()
    if form[0] == "xyz":
        status = lib.tutti_rhf_energy(
            form[1].encode("utf-8"),
            basis_c,
            ctypes.byref(options),
            ctypes.byref(result),
            ctypes.byref(text),
        )
    else:
        numbers, coordinates = form[1], form[2]
        status = lib.tutti_rhf_energy_bohr(
            _int(len(numbers), "atoms"),
            (ctypes.c_int * len(numbers))(*numbers),
            (ctypes.c_double * len(coordinates))(*coordinates),
            basis_c,
            ctypes.byref(options),
            ctypes.byref(result),
            ctypes.byref(text),
        )
    del keepalive  # the struct's pointers were read during the call
    if hook.raised:
        if status == 0:
            _check(lib.tutti_free_c(text))
            _check(lib.tutti_rhf_matrices_free(ctypes.byref(c_matrices)))
        hook.raise_pending()
    _check(status)
    arrays = {}
    try:
        summary = json.loads(ctypes.string_at(text.value).decode("utf-8"))
        if matrices:
            nao, nmo = c_matrices.nao, c_matrices.nmo
            arrays = dict(
                orbital_energies=np.ctypeslib.as_array(c_matrices.orbital_energies, (nmo,)).copy(),
                coefficients=np.ctypeslib.as_array(c_matrices.coefficients, (nao, nmo)).copy(),
                density=np.ctypeslib.as_array(c_matrices.density, (nao, nao)).copy(),
                occupied=c_matrices.occupied,
            )
    finally:
        _check(lib.tutti_free_c(text))
        _check(lib.tutti_rhf_matrices_free(ctypes.byref(c_matrices)))
    return RhfEnergy(
        energy=result.energy,
        electronic_energy=result.electronic_energy,
        nuclear_repulsion=result.nuclear_repulsion,
        nao=result.nao,
        electrons=result.electrons,
        iterations=result.iterations,
        converged=bool(result.converged),
        orbital_gradient=result.orbital_gradient,
        summary=summary,
        **arrays,
    )


@spans_world
def rhf_gradient(
    molecule,
    basis: str,
    *,
    unit: str = "angstrom",
    resources: Resources | None = None,
    serial: bool = False,
    charge: int = 0,
    cartesian: bool = False,
    max_iterations: int | None = None,
    progress=None,
) -> RhfGradient:
    """The RHF energy and its gradient with respect to every exponent and library
    contraction coefficient of every shell on every atom (``tutti_rhf_gradient``).

    ``molecule``, ``unit``, ``basis``, ``resources``, ``charge``, ``cartesian``,
    ``max_iterations`` and ``progress`` (the SCF's iterations) are as for :func:`rhf_energy`; the devices of ``resources`` run every loop, SCF and gradient
    (any device count agrees with one to 1e-10 relative).
    ``serial`` runs the serial reference implementation. The convention is PySCF's: each
    contracted function is renormalized, and the derivatives include that renormalization.
    Parameters are per atom; ``summary["elements"]`` holds the sums per element. Errors raise
    TuttiError with the C status (``Status.ERROR_INVALID_ARGUMENT`` for an unknown basis or
    element or an odd electron count, ``Status.ERROR_IO`` for an unreadable basis file,
    ``Status.ERROR_NOT_CONVERGED`` for an SCF that does not converge).
    """
    import json

    import numpy as np

    form = _molecule.read(molecule, unit)
    xyz = form[1] if form[0] == "xyz" else form[3]
    options = _CGradientOptions()
    _check(lib.tutti_gradient_options_default(ctypes.byref(options)))
    options.rhf.resources, keepalive = _c_resources(resources)
    options.rhf.charge = _int(charge, "charge").value
    options.rhf.cartesian = 1 if cartesian else 0
    options.serial = 1 if serial else 0
    if max_iterations is not None:
        options.rhf.max_iterations = _int(max_iterations, "max_iterations").value
    hook = _ProgressHook(progress, "rhf_gradient")
    options.rhf.progress = hook.c
    result = _CRhfGradient()
    text = ctypes.c_void_p()
    xyz_c, basis_c = str(xyz).encode("utf-8"), os.fsencode(basis)
    _entering_library()
    status = lib.tutti_rhf_gradient(
        xyz_c,
        basis_c,
        ctypes.byref(options),
        ctypes.byref(result),
        ctypes.byref(text),
    )
    del keepalive  # the struct's pointers were read during the call
    if hook.raised:
        if status == 0:
            _check(lib.tutti_free_c(text))
            _check(lib.tutti_rhf_gradient_free(ctypes.byref(result)))
        hook.raise_pending()
    _check(status)
    try:
        n = result.n_primitives
        arrays = {
            name: np.ctypeslib.as_array(getattr(result, name), shape=(n,)).copy()
            for name in ("exponents", "coefficients", "grad_exponents", "grad_coefficients")
        }
        shells = []
        for index in range(result.n_shells):
            shell = result.shells[index]
            part = slice(shell.offset, shell.offset + shell.primitives)
            shells.append(
                ShellGradient(
                    atom=shell.atom,
                    l=shell.l,
                    **{name: values[part] for name, values in arrays.items()},
                )
            )
        summary = json.loads(ctypes.string_at(text.value).decode("utf-8"))
    finally:
        _check(lib.tutti_free_c(text))
        _check(lib.tutti_rhf_gradient_free(ctypes.byref(result)))
    return RhfGradient(
        energy=result.energy,
        shells=shells,
        iterations=result.iterations,
        devices=result.devices,
        timings={name: getattr(result.timings, name) for name, _ in _CGradientTimings._fields_},
        summary=summary,
    )

