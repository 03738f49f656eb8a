#!/usr/bin/env python3
"""Export the basis sets shipped in tutti-adjoint from basis_set_exchange (BSE).

Writes one NWChem-format file per basis set, elements H-Ar (Z = 1..18), into
crates/tutti-adjoint/data/basis/<name>.nw. The crate embeds these files with include_str!
and parses them with its own NWChem parser, so a shipped basis and a user's basis file go
through the same code.

Usage (in a throwaway virtualenv):
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install basis_set_exchange
    /tmp/venv/bin/python crates/tutti-adjoint/scripts/export_basis.py
"""
import os

import basis_set_exchange as bse

NAMES = ["sto-3g", "6-31g", "6-31g*", "cc-pvdz", "cc-pvtz", "def2-svp", "def2-tzvp"]
ELEMENTS = list(range(1, 19))


def file_stem(name):
    return name.replace("*", "_star")


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "basis")
    os.makedirs(out_dir, exist_ok=True)
    for name in NAMES:
        text = bse.get_basis(name, elements=ELEMENTS, fmt="nwchem", header=False)
        header = (
            f"# {name}, elements H-Ar, exported from basis_set_exchange {bse.version()}\n"
            f"# by crates/tutti-adjoint/scripts/export_basis.py\n"
        )
        path = os.path.join(out_dir, file_stem(name) + ".nw")
        with open(path, "w") as handle:
            handle.write(header + text)
        print(path, len(text))


if __name__ == "__main__":
    main()
