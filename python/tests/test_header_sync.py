"""The hand-written bindings (Python, Fortran) agree with the generated include/tutti.h."""

from __future__ import annotations

import ctypes
import importlib
import pkgutil
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
    fields = [name for name, _ in tutti.devices._CDeviceInfo._fields_]
    assert header_struct_fields(header, "TuttiDeviceInfo") == fields


def test_python_src_options_layout_matches_the_header(header: str) -> None:
    fields = [name for name, _ in tutti.sweep._CSrcOptions._fields_]
    assert header_struct_fields(header, "TuttiSrcOptions") == fields



def test_python_resources_layout_matches_the_header(header: str) -> None:
    # Workload options embed it by value: its size and field order are the ABI.
    fields = [name for name, _ in tutti.resources._CResources._fields_]
    assert header_struct_fields(header, "TuttiResources") == fields
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        # kind, devices | ordinals | ordinal_count + padding | 2 x u64 | scratch_dir | u64 |
        # world
        assert ctypes.sizeof(tutti.resources._CResources) == 64


# The package's modules, each holding its own struct mirrors and signatures (by import:
# `tutti.fit` and `tutti.fmm` are the functions re-exported over their modules' names).
MODULES = [
    importlib.import_module(f"tutti.{info.name}") for info in pkgutil.iter_modules(tutti.__path__)
]

# C scalar types and the ctypes types that mirror them.
SCALARS = {
    "int": ctypes.c_int,
    "double": ctypes.c_double,
    "float": ctypes.c_float,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "size_t": ctypes.c_size_t,
}


def mirrors() -> dict[str, type]:
    """Every ctypes struct of the package, by the header name it mirrors (`_CFoo` mirrors
    `TuttiFoo`)."""
    found = {}
    for module in MODULES:
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, ctypes.Structure)
                and value.__module__ == module.__name__
            ):
                assert name.startswith("_C"), f"{module.__name__}.{name}: name it _C<Header name>"
                found["Tutti" + name[2:]] = value
    return found


def header_struct_members(text: str, name: str) -> list[tuple[str, str]]:
    """(C type, field name) of `typedef struct NAME { ... }`, in order."""
    match = re.search(rf"typedef struct {name} \{{(.*?)\}} {name};", text, flags=re.DOTALL)
    assert match, f"struct {name} not found in the header"
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.DOTALL)
    return [
        (" ".join(ctype.split()), field)
        for ctype, field in re.findall(r"([^;{}]*?)\b(\w+)\s*;", body)
    ]


def header_functions(text: str) -> dict[str, tuple[str, list[str]]]:
    """`tutti_*` prototypes of the header: name -> (return type, parameter types)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    found = {}
    for ret, name, params in re.findall(
        r"^([A-Za-z_][\w \*]*?)\s*\b(tutti_\w+)\(([^;]*?)\);", text, flags=re.MULTILINE
    ):
        params = " ".join(params.split())
        # Drop each parameter's name: "const double *positions" -> "const double *".
        types_ = [] if params in ("", "void") else [
            re.sub(r"\s*\b\w+$", "", param) for param in params.split(", ")
        ]
        found[name] = (" ".join(ret.split()), [" ".join(t.split()) for t in types_])
    return found


def mirrors_c_type(ctype: str, python_type, structs: dict[str, type]) -> bool:
    """Whether a ctypes type can stand for a C type of the header."""
    if "*" in ctype or ctype.endswith("Fn"):  # pointers, and function-pointer typedefs
        return (
            python_type in (ctypes.c_void_p, ctypes.c_char_p)
            or issubclass(python_type, ctypes._Pointer)
            or issubclass(python_type, ctypes._CFuncPtr)
        )
    bare = ctype.removeprefix("const ").removeprefix("struct ")
    if bare in structs:
        return python_type is structs[bare]
    return SCALARS.get(bare) is python_type


def test_every_python_struct_matches_the_header_field_by_field(header: str) -> None:
    structs = mirrors()
    assert structs, "no ctypes struct found in the package"
    for c_name, struct in structs.items():
        members = header_struct_members(header, c_name)
        assert [field for _, field in members] == [field for field, _ in struct._fields_], c_name
        for (ctype, field), (_, python_type) in zip(members, struct._fields_):
            assert mirrors_c_type(ctype, python_type, structs), (
                f"{c_name}.{field}: `{ctype}` mirrored by {python_type.__name__}"
            )


def test_every_declared_signature_matches_the_header(header: str) -> None:
    prototypes = header_functions(header)
    structs = mirrors()
    assert tutti._lib.DECLARED, "no signature declared"
    for name, (argtypes, restype) in tutti._lib.DECLARED.items():
        assert name in prototypes, f"{name} is declared in Python but not in the header"
        ret, params = prototypes[name]
        assert mirrors_c_type(ret, restype, structs), f"{name} returns `{ret}`, not {restype}"
        assert len(params) == len(argtypes), f"{name}: {params} vs {argtypes}"
        for index, (ctype, python_type) in enumerate(zip(params, argtypes)):
            assert mirrors_c_type(ctype, python_type, structs), (
                f"{name} parameter {index}: `{ctype}` mirrored by {python_type.__name__}"
            )


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
