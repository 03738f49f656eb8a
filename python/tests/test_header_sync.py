"""The hand-written bindings (Python, Fortran) agree with the generated include/tutti.h."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import header_defines, header_enum, header_struct_fields

import tutti


def test_header_version_is_the_cargo_version(header: str, cargo_version: str) -> None:
    defines = header_defines(header)
    major, minor, patch = cargo_version.split("-")[0].split("+")[0].split(".")
    assert defines["TUTTI_VERSION_MAJOR"] == major
    assert defines["TUTTI_VERSION_MINOR"] == minor
    assert defines["TUTTI_VERSION_PATCH"] == patch
    assert defines["TUTTI_VERSION"] == f'"{cargo_version}"'


def test_python_status_and_kinds_match_the_header(header: str) -> None:
    assert header_enum(header, "TuttiStatus") == {f"TUTTI_{s.name}": s.value for s in tutti.Status}
    assert header_enum(header, "TuttiKind") == {f"TUTTI_KIND_{k.name}": k.value for k in tutti.Kind}
    assert int(header_defines(header)["TUTTI_MAX_SIMULATED_DEVICES"]) == tutti.MAX_SIMULATED_DEVICES
    assert header_enum(header, "TuttiTrainKind") == {
        f"TUTTI_TRAIN_{k.name}": k.value for k in tutti.TrainKind
    }
    assert header_enum(header, "TuttiDtype") == {f"TUTTI_DTYPE_{d.name}": d.value for d in tutti.Dtype}


def test_python_device_info_layout_matches_the_header(header: str) -> None:
    fields = [name for name, _ in tutti._CDeviceInfo._fields_]
    assert header_struct_fields(header, "TuttiDeviceInfo") == fields


def test_python_src_options_layout_matches_the_header(header: str) -> None:
    fields = [name for name, _ in tutti._CSrcOptions._fields_]
    assert header_struct_fields(header, "TuttiSrcOptions") == fields


def fortran_parameters(path: Path) -> dict[str, int]:
    text = path.read_text()
    return {
        name: int(value)
        for name, value in re.findall(
            r"integer\(c_int\), parameter, public :: (\w+) = (-?\d+)", text
        )
    }


def test_fortran_module_matches_the_header(header: str, repo: Path) -> None:
    parameters = fortran_parameters(repo / "ffi-tests" / "fortran" / "tutti.f90")
    expected = {
        **header_enum(header, "TuttiStatus"),
        **header_enum(header, "TuttiKind"),
        **{
            name: int(value)
            for name, value in header_defines(header).items()
            if name != "TUTTI_VERSION" and name != "TUTTI_H" and value.lstrip("-").isdigit()
        },
    }
    assert parameters == expected


def test_fortran_device_info_layout_matches_the_header(header: str, repo: Path) -> None:
    text = (repo / "ffi-tests" / "fortran" / "tutti.f90").read_text()
    body = re.search(
        r"type, bind\(c\), public :: tutti_device_info_t(.*?)end type", text, flags=re.DOTALL
    )
    assert body
    fields = re.findall(r"::\s*(\w+)", body.group(1))
    assert fields == header_struct_fields(header, "TuttiDeviceInfo")
