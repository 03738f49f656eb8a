"""Molecules as users write them: XYZ text or files, PySCF-style atom strings and lists.

:func:`parse` turns any of them into atomic numbers and coordinates in bohr, the form
``tutti_rhf_energy_bohr`` takes, and :func:`xyz_text` back into the XYZ text (Angstrom) that
``tutti_rhf_gradient`` takes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ._lib import Status, TuttiError

#: Angstrom per bohr: the library's and PySCF's value (CODATA 2010).
BOHR_IN_ANGSTROM = 0.52917721092

#: Element symbols by atomic number, H to Kr: the elements the library's bases may cover.
SYMBOLS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar "
    "K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr"
).split()

_NUMBERS = {symbol.lower(): number for number, symbol in enumerate(SYMBOLS, start=1)}
_UNITS = {"angstrom": False, "ang": False, "a": False, "bohr": True, "b": True, "au": True}


def _invalid(message: str) -> TuttiError:
    return TuttiError(Status.ERROR_INVALID_ARGUMENT, message)


def _atomic_number(label) -> int:
    """1 for 1, "H", "h", "H1", "H@2" or "H:a" (PySCF's labelled atoms)."""
    if isinstance(label, int) and not isinstance(label, bool):
        number = label
    else:
        text = str(label).strip()
        if text.isdigit():
            number = int(text)
        else:
            symbol = re.split(r"[\d@:]", text, maxsplit=1)[0].lower()
            if symbol not in _NUMBERS:
                raise _invalid(f"molecule: unknown element {label!r} (tutti knows H to Kr)")
            number = _NUMBERS[symbol]
    if not 1 <= number <= len(SYMBOLS):
        raise _invalid(f"molecule: atomic number {number} is outside 1..{len(SYMBOLS)}")
    return number


def _is_xyz_text(text: str) -> bool:
    """Whether `text` is an XYZ file's text: its first non-blank line is the atom count."""
    for line in text.splitlines():
        if line.strip():
            return line.strip().isdigit()
    return False


def _coordinates(values, entry) -> tuple[float, float, float]:
    try:
        x, y, z = (float(v) for v in values)
    except (TypeError, ValueError):
        raise _invalid(f"molecule: {entry!r} does not hold three coordinates") from None
    return x, y, z


def _entries(spec) -> list[tuple[object, tuple[float, float, float]]]:
    """(label, (x, y, z)) per atom of a PySCF atom string or list, in the input's unit."""
    if isinstance(spec, str):
        atoms = []
        for entry in re.split(r"[;\n]", spec):
            fields = entry.replace(",", " ").split()
            if not fields:
                continue
            if len(fields) != 4:
                raise _invalid(f"molecule: {entry.strip()!r} is not `symbol x y z`")
            atoms.append((fields[0], _coordinates(fields[1:], entry.strip())))
        return atoms
    atoms = []
    for entry in spec:
        if isinstance(entry, str):
            atoms += _entries(entry)
        elif len(entry) == 2:
            atoms.append((entry[0], _coordinates(entry[1], entry)))
        elif len(entry) == 4:
            atoms.append((entry[0], _coordinates(entry[1:], entry)))
        else:
            raise _invalid(f"molecule: {entry!r} is not (symbol, (x, y, z)) or (symbol, x, y, z)")
    return atoms


def read(molecule, unit: str = "angstrom"):
    """A molecule in any accepted form, as ``("xyz", text)`` for XYZ text or an XYZ file, or
    ``("atoms", numbers, coordinates_bohr, text)`` for a PySCF-style atom string or list, with
    its XYZ text (Angstrom: the input's digits when the input was in Angstrom).

    Accepted: XYZ text (first line: the atom count); a path to an XYZ file (a ``Path``, or a
    one-line string naming a file); a PySCF atom string (``"O 0 0 0; H 0 0.76 0.59; ..."``,
    ``;`` or newlines between atoms); a list of ``(symbol, (x, y, z))`` or
    ``(symbol, x, y, z)``, symbols or atomic numbers. ``unit`` (``"angstrom"``, the default, or
    ``"bohr"``; PySCF's spellings ``A``, ``B``, ``AU`` too) applies to atom strings and lists;
    XYZ text is in Angstrom by its format.
    """
    try:
        in_bohr = _UNITS[str(unit).strip().lower()]
    except KeyError:
        raise _invalid(f"molecule: unit {unit!r} is not angstrom or bohr") from None
    if isinstance(molecule, os.PathLike) or (
        isinstance(molecule, str) and "\n" not in molecule and ";" not in molecule
        and Path(molecule).is_file()
    ):
        molecule = Path(molecule).read_text()
    if isinstance(molecule, str) and _is_xyz_text(molecule):
        if in_bohr:
            raise _invalid("molecule: XYZ text is in Angstrom by its format; drop unit='bohr'")
        return ("xyz", molecule)
    atoms = _entries(molecule)
    if not atoms:
        raise _invalid("molecule: no atoms")
    numbers = [_atomic_number(label) for label, _ in atoms]
    if in_bohr:
        coordinates = [c for _, xyz in atoms for c in xyz]
        text = xyz_text(numbers, coordinates)
    else:
        # Divided, as the library converts XYZ text, so both forms give the same bohr values.
        coordinates = [c / BOHR_IN_ANGSTROM for _, xyz in atoms for c in xyz]
        text = _xyz_lines(numbers, [c for _, xyz in atoms for c in xyz])
    return ("atoms", numbers, coordinates, text)


def xyz_text(numbers, coordinates_bohr) -> str:
    """XYZ text (Angstrom, 17 significant digits) of atoms given in bohr."""
    return _xyz_lines(numbers, [c * BOHR_IN_ANGSTROM for c in coordinates_bohr])


def _xyz_lines(numbers, coordinates_angstrom) -> str:
    lines = [str(len(numbers)), "written by tutti"]
    for index, number in enumerate(numbers):
        x, y, z = coordinates_angstrom[3 * index: 3 * index + 3]
        lines.append(f"{SYMBOLS[number - 1]} {x!r} {y!r} {z!r}")
    return "\n".join(lines) + "\n"
