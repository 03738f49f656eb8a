"""The ctypes bindings against the built libtutti: real values, real errors."""

from __future__ import annotations

import os
import threading

import pytest

import tutti
from tutti import Kind, Status, TuttiError


def last_error() -> str:
    return tutti._lib.tutti_last_error().decode()


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def test_version_is_the_cargo_version(cargo_version: str) -> None:
    major, minor, patch = tutti.version()
    assert f"{major}.{minor}.{patch}" == cargo_version.split("-")[0].split("+")[0]
    assert last_error() == ""


def test_cpu_count_is_the_host_core_count() -> None:
    count = tutti.device_count(Kind.CPU)
    # Rust also honours cgroup CPU quotas, so it may report fewer than the affinity mask.
    assert 1 <= count <= usable_cores()


def test_auto_count_falls_back_to_cpu_without_gpus() -> None:
    cpu = tutti.device_count(Kind.CPU)
    try:
        gpus = tutti.device_count(Kind.GPU)
    except TuttiError as error:
        assert error.status in (Status.ERROR_UNSUPPORTED, Status.ERROR_DEVICE)
        assert error.message.startswith("tutti_device_count: ")
        if error.status == Status.ERROR_UNSUPPORTED:
            assert "cuda" in error.message
        gpus = 0
    assert tutti.device_count(Kind.AUTO) == (gpus if gpus > 0 else cpu)


@pytest.mark.parametrize("count", [1, 2, 3])
def test_device_info_describes_each_requested_device(count: int) -> None:
    cores = tutti.device_count(Kind.CPU)
    infos = [tutti.device_info(Kind.CPU, count, index) for index in range(count)]
    for index, info in enumerate(infos):
        assert info.index == index
        assert info.ordinal == index
        assert info.kind is Kind.CPU
        assert info.name == "host (simulated)"
        assert 0 < info.free_bytes <= info.total_bytes
        assert info.threads >= 1
    # The devices split the cores: together they use all of them, one each at least.
    assert sum(info.threads for info in infos) == max(cores, count)
    # ... and the host memory: each gets its share of the total.
    single = tutti.device_info(Kind.CPU, 1, 0)
    assert all(info.total_bytes == single.total_bytes // count for info in infos)


@pytest.mark.parametrize(
    ("kind", "count", "index", "status", "says"),
    [
        (Kind.CPU, 2, 2, Status.ERROR_INVALID_ARGUMENT, "argument `index` is 2, out of range"),
        (Kind.CPU, 2, -1, Status.ERROR_INVALID_ARGUMENT, "argument `index` is -1"),
        (Kind.CPU, 0, 0, Status.ERROR_INVALID_ARGUMENT, "argument `count` must be at least 1"),
        (9, 1, 0, Status.ERROR_INVALID_ARGUMENT, "argument `kind` is 9"),
        (
            Kind.CPU,
            tutti.MAX_SIMULATED_DEVICES + 1,
            0,
            Status.ERROR_INVALID_ARGUMENT,
            f"argument `count` is {tutti.MAX_SIMULATED_DEVICES + 1}",
        ),
    ],
)
def test_bad_arguments_raise_with_the_message(kind, count, index, status, says) -> None:
    with pytest.raises(TuttiError) as raised:
        tutti.device_info(kind, count, index)
    error = raised.value
    assert error.status == status
    assert error.message.startswith("tutti_device_info: ")
    assert says in error.message
    assert says in str(error) and "TUTTI_ERROR_INVALID_ARGUMENT" in str(error)


def test_unknown_kind_for_count_raises() -> None:
    with pytest.raises(TuttiError, match=r"argument `kind` is 5") as raised:
        tutti.device_count(5)
    assert raised.value.status == Status.ERROR_INVALID_ARGUMENT


def test_a_success_clears_the_last_error() -> None:
    with pytest.raises(TuttiError):
        tutti.device_count(5)
    assert "kind" in last_error()
    tutti.version()
    assert last_error() == ""


def test_the_last_error_belongs_to_its_thread() -> None:
    with pytest.raises(TuttiError):
        tutti.device_info(Kind.CPU, 1, 3)
    seen = {}

    def other() -> None:
        seen["before"] = last_error()
        try:
            tutti.device_count(7)
        except TuttiError as error:
            seen["error"] = error.message

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen["before"] == "", "a new thread starts with an empty message"
    assert seen["error"].startswith("tutti_device_count: argument `kind` is 7")
    assert "argument `index` is 3" in last_error()


def test_free_c_of_null_is_a_no_op() -> None:
    assert tutti._lib.tutti_free_c(None) == Status.OK


def test_free_c_refuses_a_foreign_pointer() -> None:
    import ctypes

    foreign = ctypes.create_string_buffer(64)
    # An aligned address inside a buffer tutti never allocated, with zeros before it.
    address = (ctypes.addressof(foreign) + 31) // 16 * 16
    assert tutti._lib.tutti_free_c(address) == Status.ERROR_INVALID_ARGUMENT
    assert "not returned by tutti" in last_error()


def test_status_names() -> None:
    for status in Status:
        assert tutti._lib.tutti_status_name(status).decode() == f"TUTTI_{status.name}"
    assert tutti._lib.tutti_status_name(1234).decode() == "TUTTI_ERROR_UNKNOWN"


def test_int_arguments_out_of_c_range_are_refused() -> None:
    with pytest.raises(TuttiError, match="too large for an int"):
        tutti.device_info(Kind.CPU, 2**40, 0)
