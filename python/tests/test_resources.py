"""tutti.Resources: validation, and the C TuttiResources it becomes."""

from __future__ import annotations

import ctypes
import dataclasses
from pathlib import Path

import pytest

import tutti
from tutti.resources import _ALL_DEVICES, _c_resources, _CResources

MIB = 1 << 20


def fields(struct: _CResources) -> dict:
    """The struct's fields, pointers read back as what they point at."""
    values = {name: getattr(struct, name) for name, _ in _CResources._fields_}
    values["ordinals"] = (
        [struct.ordinals[i] for i in range(struct.ordinal_count)] if struct.ordinals else None
    )
    values["scratch_dir"] = ctypes.string_at(struct.scratch_dir) if struct.scratch_dir else None
    return values


def test_the_defaults_are_the_library_defaults() -> None:
    ours, keepalive = tutti.Resources()._to_c()
    theirs = _CResources(kind=7, devices=5, ordinal_count=3, device_memory_bytes=1, world=8)
    assert tutti._lib.tutti_resources_default(ctypes.byref(theirs)) == tutti.Status.OK
    assert fields(ours) == fields(theirs)  # not bytes: the padding after ordinal_count is not set
    assert keepalive == ()
    assert fields(ours) == {
        "kind": tutti.Kind.AUTO,
        "devices": _ALL_DEVICES,
        "ordinals": None,
        "ordinal_count": 0,
        "device_memory_bytes": 0,
        "host_memory_bytes": 0,
        "scratch_dir": None,
        "scratch_limit_bytes": 0,
        "world": None,
    }
    # resources=None in a workload call is the library's own default struct.
    none, keepalive = _c_resources(None)
    assert fields(none) == fields(theirs) and keepalive == ()


def test_every_field_reaches_the_struct(tmp_path: Path) -> None:
    resources = tutti.Resources(
        kind="GPU",
        ordinals=[1, 0, 1],
        device_memory_mib=512,
        host_memory_mib=0.5,
        scratch=tmp_path,
        scratch_limit_mib=3,
    )
    assert resources.kind == "gpu"
    assert resources.ordinals == (1, 0, 1)
    assert resources.scratch == str(tmp_path)
    struct, keepalive = _c_resources(resources)
    assert len(keepalive) == 2
    assert fields(struct) == {
        "kind": tutti.Kind.GPU,
        "devices": _ALL_DEVICES,
        "ordinals": [1, 0, 1],
        "ordinal_count": 3,
        "device_memory_bytes": 512 * MIB,
        "host_memory_bytes": MIB // 2,
        "scratch_dir": str(tmp_path).encode(),
        "scratch_limit_bytes": 3 * MIB,
        "world": None,
    }
    cpu, _ = tutti.Resources(kind=tutti.Kind.CPU, devices=4)._to_c()
    assert (cpu.kind, cpu.devices, cpu.ordinal_count) == (tutti.Kind.CPU, 4, 0)
    assert not cpu.ordinals and not cpu.scratch_dir


def test_a_copy_into_an_options_struct_keeps_the_pointers() -> None:
    # Workload options embed the struct by value; ctypes copies it, pointers and all.
    class Options(ctypes.Structure):
        _fields_ = [("order", ctypes.c_int), ("resources", _CResources)]

    options = Options()
    options.resources, keepalive = tutti.Resources(ordinals=(2, 3), scratch="/tmp/x")._to_c()
    assert fields(options.resources)["ordinals"] == [2, 3]
    assert fields(options.resources)["scratch_dir"] == b"/tmp/x"
    assert keepalive


def test_resources_are_frozen_and_compare_by_value() -> None:
    a = tutti.Resources(kind="cpu", devices=2)
    assert a == tutti.Resources(kind="CPU", devices=2)
    assert hash(a) == hash(tutti.Resources(kind=tutti.Kind.CPU, devices=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.devices = 3
    assert dataclasses.replace(a, devices=3).devices == 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"devices": 0}, "`devices` is 0: give at least 1, or None"),
        ({"devices": -1}, "`devices` is -1"),
        ({"devices": 2**31}, "`devices` is 2147483648"),
        ({"kind": "tpu"}, "unknown `kind` 'tpu'"),
        ({"kind": 3}, "unknown `kind` 3"),
        ({"ordinals": []}, "`ordinals` is empty"),
        ({"ordinals": [0, -1]}, "`ordinals[1]` is -1"),
        ({"ordinals": [0], "devices": 1}, "give `devices` (1) or `ordinals` ([0]), not both"),
        ({"device_memory_mib": 0}, "`device_memory_mib` is 0: expected a positive number"),
        ({"host_memory_mib": -5}, "`host_memory_mib` is -5"),
        ({"scratch_limit_mib": float("nan")}, "`scratch_limit_mib` is nan"),
        ({"device_memory_mib": 2.0**60}, "out of range"),
        ({"scratch": ""}, "is not a directory name"),
        ({"scratch": "a\0b"}, "is not a directory name"),
    ],
)
def test_bad_values_raise_value_error(arguments: dict, message: str) -> None:
    with pytest.raises(ValueError) as error:
        tutti.Resources(**arguments)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "arguments",
    [
        {"devices": "2"},
        {"devices": 2.0},
        {"devices": True},
        {"ordinals": "01"},
        {"ordinals": 3},
        {"ordinals": [0.0]},
        {"host_memory_mib": "1"},
        {"scratch": 5},
    ],
)
def test_wrong_types_raise_type_error(arguments: dict) -> None:
    with pytest.raises(TypeError):
        tutti.Resources(**arguments)


def test_a_workload_gets_resources_or_none() -> None:
    with pytest.raises(TypeError, match="must be a tutti.Resources or None, got int"):
        _c_resources(2)
