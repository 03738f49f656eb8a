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
    assert header_enum(header, "TuttiKernels") == {
        f"TUTTI_KERNELS_{k.name}": k.value for k in tutti.Kernels
    }
    assert int(header_defines(header)["TUTTI_MAX_SIMULATED_DEVICES"]) == tutti.MAX_SIMULATED_DEVICES
    assert header_enum(header, "TuttiTrainKind") == {
        f"TUTTI_TRAIN_{k.name}": k.value for k in tutti.TrainKind
    }
    assert header_enum(header, "TuttiDtype") == {f"TUTTI_DTYPE_{d.name}": d.value for d in tutti.Dtype}
    terminations = {
        name: int(value)
        for name, value in header_defines(header).items()
        if name.startswith("TUTTI_TERMINATION_")
    }
    assert terminations == {f"TUTTI_TERMINATION_{t.name}": t.value for t in tutti.Termination}


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
    """(C type, field name) of `typedef struct NAME { ... }`, in order. A fixed-size array
    member `int grid_dims[3];` is (`int[3]`, `grid_dims`)."""
    match = re.search(rf"typedef struct {name} \{{(.*?)\}} {name};", text, flags=re.DOTALL)
    assert match, f"struct {name} not found in the header"
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.DOTALL)
    return [
        (" ".join(ctype.split()) + (f"[{length}]" if length else ""), field)
        for ctype, field, length in re.findall(
            r"([^;{}]*?)\b(\w+)\s*(?:\[\s*(\d+)\s*\])?\s*;", body
        )
    ]


def c_array(ctype: str) -> tuple[str, int] | None:
    """(element type, length) of a fixed-size array type `int[3]`, else None."""
    match = re.fullmatch(r"(.+?)\[(\d+)\]", ctype)
    return (match.group(1), int(match.group(2))) if match else None


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
    if array := c_array(ctype):  # `int[3]`: `ctypes.c_int * 3`
        element, length = array
        return (
            isinstance(python_type, type)
            and issubclass(python_type, ctypes.Array)
            and python_type._length_ == length
            and mirrors_c_type(element, python_type._type_, structs)
        )
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


FORTRAN_MODULE = Path("fortran") / "tutti.f90"


def fortran_source(repo: Path) -> str:
    """The Fortran module's text, comments removed and continuation lines joined."""
    text = (repo / FORTRAN_MODULE).read_text()
    text = re.sub(r"!.*", "", text)
    return re.sub(r"&\s*\n\s*(&)?", "", text)


def fortran_parameters(text: str) -> dict[str, int]:
    return {
        name: int(value)
        for name, value in re.findall(
            r"integer\(c_int\), parameter, public :: (\w+) = (-?\d+)", text
        )
    }


def test_fortran_module_is_ascii(repo: Path) -> None:
    (repo / FORTRAN_MODULE).read_bytes().decode("ascii")


def test_fortran_module_matches_the_header(header: str, repo: Path) -> None:
    parameters = fortran_parameters(fortran_source(repo))
    expected = {
        **header_enum(header, "TuttiStatus"),
        **header_enum(header, "TuttiKind"),
        **header_enum(header, "TuttiKernels"),
        **header_enum(header, "TuttiSparseLayout"),
        **header_enum(header, "TuttiTrainKind"),
        **header_enum(header, "TuttiDtype"),
        **{
            name: int(value)
            for name, value in header_defines(header).items()
            if name != "TUTTI_VERSION" and name != "TUTTI_H" and value.lstrip("-").isdigit()
        },
    }
    assert parameters == expected


def fortran_interfaces(text: str) -> dict[str, list[str]]:
    """The module's bind(C) interfaces: C name -> the Fortran dummy arguments."""
    found = {}
    for args, c_name in re.findall(
        r"function\s+\w+\s*\(([^)]*)\)\s*bind\(c,\s*name=\"(\w+)\"\)", text, flags=re.IGNORECASE
    ):
        found[c_name] = [arg.strip() for arg in args.split(",") if arg.strip()]
    return found


def test_every_header_function_has_a_fortran_interface(header: str, repo: Path) -> None:
    text = fortran_source(repo)
    interfaces = fortran_interfaces(text)
    prototypes = header_functions(header)
    missing = sorted(set(prototypes) - set(interfaces))
    assert not missing, f"no bind(C, name=...) interface in {FORTRAN_MODULE}: {missing}"
    unknown = sorted(set(interfaces) - set(prototypes) - {"strlen"})
    assert not unknown, f"interfaces for functions the header lacks: {unknown}"
    for name, (_, params) in prototypes.items():
        assert len(interfaces[name]) == len(params), (
            f"{name}: the header has {len(params)} parameters, the Fortran interface "
            f"{interfaces[name]}"
        )
        # The naming rule of the wrappers: tutti_X has tutti_X_f (a procedure or a generic).
        assert re.search(
            rf"^\s*(?:(?:recursive\s+)?(?:subroutine|function)|interface)\s+{name}_f\b",
            text,
            flags=re.MULTILINE | re.IGNORECASE,
        ), f"{name} has no wrapper {name}_f"
        assert re.search(rf"public\s*::.*\b{name}_f\b", text), f"{name}_f is not public"


def test_fortran_callback_matches_the_header(header: str, repo: Path) -> None:
    text = fortran_source(repo)
    match = re.search(r"typedef int \(\*TuttiResidualFn\)\(([^;]*)\);", header)
    assert match, "TuttiResidualFn not found in the header"
    c_params = " ".join(match.group(1).split()).split(", ")
    fortran = re.search(
        r"function\s+tutti_residual_fn\s*\(([^)]*)\)\s*bind\(c\)", text, flags=re.IGNORECASE
    )
    assert fortran, "no bind(C) abstract interface tutti_residual_fn"
    assert len(fortran.group(1).split(",")) == len(c_params)


def test_fortran_progress_callback_matches_the_header(header: str, repo: Path) -> None:
    text = fortran_source(repo)
    match = re.search(r"typedef void \(\*TuttiProgressFn\)\(([^;]*)\);", header)
    assert match, "TuttiProgressFn not found in the header"
    assert " ".join(match.group(1).split()) == (
        "void *user_data, const struct TuttiProgress *progress"
    )
    fortran = re.search(
        r"subroutine\s+tutti_progress_fn\s*\(\s*user_data\s*,\s*progress\s*\)\s*bind\(c\)"
        r"(.*?)end subroutine",
        text,
        flags=re.IGNORECASE | re.DOTALL,
    )
    assert fortran, "no bind(C) abstract interface tutti_progress_fn(user_data, progress)"
    body = " ".join(fortran.group(1).split()).lower()
    assert "type(c_ptr), value :: user_data" in body
    assert "type(tutti_progress_t), intent(in) :: progress" in body


# C member types and the Fortran declarations that mirror them in a bind(C) type.
FORTRAN_SCALARS = {
    "int": "integer(c_int)",
    "double": "real(c_double)",
    "int64_t": "integer(c_int64_t)",
    "uint64_t": "integer(c_int64_t)",  # Fortran has no unsigned integers
}


def fortran_bind_c_types(text: str) -> dict[str, list[tuple[str, str]]]:
    """Every `type, bind(c), public :: tutti_foo_t` by the header struct it mirrors
    (`TuttiFoo`): its (declaration, component) pairs in order. An array component
    `integer(c_int) :: grid_dims(3)` is (`integer(c_int), dimension(3)`, `grid_dims`)."""
    found = {}
    for name, body in re.findall(
        r"type, bind\(c\), public :: tutti_(\w+)_t\s*\n(.*?)end type", text, flags=re.DOTALL
    ):
        c_name = "Tutti" + "".join(part.capitalize() for part in name.split("_"))
        found[c_name] = [
            (" ".join(decl.split()).lower() + (f", dimension({length})" if length else ""), field)
            for decl, field, length in re.findall(
                r"^\s*(.+?)\s*::\s*(\w+)(?:\s*\(\s*(\d+)\s*\))?", body, flags=re.MULTILINE
            )
        ]
    return found


def fortran_mirrors(ctype: str, declaration: str) -> bool:
    """Whether a bind(C) component declaration can stand for a member of C type `ctype`."""
    if array := c_array(ctype):  # `int[3]`: `integer(c_int), dimension(3)`
        element, length = array
        suffix = f", dimension({length})"
        return declaration.endswith(suffix) and fortran_mirrors(
            element, declaration.removesuffix(suffix)
        )
    if "*" in ctype:
        return declaration == "type(c_ptr)"
    if ctype.endswith("Fn"):  # function-pointer typedefs
        return declaration == "type(c_funptr)"
    bare = ctype.removeprefix("const ").removeprefix("struct ")
    if bare.startswith("Tutti"):
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", bare.removeprefix("Tutti")).lower()
        return declaration == f"type(tutti_{snake}_t)"
    return FORTRAN_SCALARS.get(bare) == declaration


def test_every_fortran_bind_c_type_matches_the_header(header: str, repo: Path) -> None:
    types = fortran_bind_c_types(fortran_source(repo))
    structs = re.findall(r"typedef struct (\w+) \{", header)
    missing = sorted(set(structs) - set(types))
    assert not missing, f"no bind(C) type in {FORTRAN_MODULE} for {missing}"
    for c_name, components in types.items():
        members = header_struct_members(header, c_name)
        assert [field for _, field in components] == header_struct_fields(header, c_name), c_name
        for (ctype, field), (declaration, _) in zip(members, components):
            assert fortran_mirrors(ctype, declaration), (
                f"{c_name}.{field}: `{ctype}` mirrored by `{declaration}`"
            )


def test_array_members_are_read_and_mirrored() -> None:
    # The parsers above on a fixed-size array member, and what does and does not mirror it.
    header = (
        "typedef struct TuttiGrid {\n    /** x, y, z */\n    int dims[3];\n    double h;\n"
        "} TuttiGrid;"
    )
    assert header_struct_fields(header, "TuttiGrid") == ["dims", "h"]
    assert header_struct_members(header, "TuttiGrid") == [("int[3]", "dims"), ("double", "h")]
    for python_type, mirrors in [
        (ctypes.c_int * 3, True),
        (ctypes.c_int * 2, False),
        (ctypes.c_double * 3, False),
        (ctypes.c_int, False),
    ]:
        assert mirrors_c_type("int[3]", python_type, {}) is mirrors, python_type
    fortran = (
        "type, bind(c), public :: tutti_grid_t\n    integer(c_int) :: dims(3)\n"
        "    real(c_double) :: h = 0\nend type"
    )
    assert fortran_bind_c_types(fortran) == {
        "TuttiGrid": [("integer(c_int), dimension(3)", "dims"), ("real(c_double)", "h")]
    }
    for declaration, mirrors in [
        ("integer(c_int), dimension(3)", True),
        ("integer(c_int), dimension(2)", False),
        ("real(c_double), dimension(3)", False),
        ("integer(c_int)", False),
    ]:
        assert fortran_mirrors("int[3]", declaration) is mirrors, declaration
    assert not fortran_mirrors("int", "integer(c_int), dimension(3)")
