"""Shared paths for the tests of the ctypes bindings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# The tests import the installed package (`pip install ./python`; CI installs the wheel into
# a fresh virtualenv and runs them from outside the checkout), or the checkout's when
# PYTHONPATH names python/ and TUTTI_LIB a built library.
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def cargo_version(repo: Path) -> str:
    """The workspace version, from [workspace.package] in the root Cargo.toml."""
    import tomllib

    with open(repo / "Cargo.toml", "rb") as manifest:
        return tomllib.load(manifest)["workspace"]["package"]["version"]


@pytest.fixture(scope="session")
def header(repo: Path) -> str:
    return (repo / "include" / "tutti.h").read_text()


def header_defines(text: str) -> dict[str, str]:
    """`#define NAME value` lines of a header."""
    return dict(re.findall(r"^#define\s+(\w+)\s+(.+?)\s*$", text, flags=re.MULTILINE))


def header_enum(text: str, name: str) -> dict[str, int]:
    """The variants of `enum NAME { ... }` in a cbindgen header."""
    match = re.search(rf"enum {name}\b[^{{]*\{{(.*?)\}};", text, flags=re.DOTALL)
    assert match, f"enum {name} not found in the header"
    return {key: int(value) for key, value in re.findall(r"(\w+)\s*=\s*(-?\d+)", match.group(1))}


def header_struct_fields(text: str, name: str) -> list[str]:
    """Field names of `typedef struct NAME { ... }` in a cbindgen header, in order (a
    fixed-size array member `int grid_dims[3];` by its name, `grid_dims`)."""
    match = re.search(rf"typedef struct {name} \{{(.*?)\}} {name};", text, flags=re.DOTALL)
    assert match, f"struct {name} not found in the header"
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.DOTALL)
    return re.findall(r"(\w+)\s*(?:\[\s*\d+\s*\])?\s*;", body)
