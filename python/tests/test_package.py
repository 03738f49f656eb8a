"""The package as users install it: its version, where it loads the library from, one
Python function per header function, and one exception class per error status."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import header_enum
from test_header_sync import header_functions

import tutti


def test_version_is_the_cargo_version(cargo_version: str) -> None:
    assert tutti.__version__ == cargo_version
    assert ".".join(map(str, tutti.version())) == cargo_version.split("-")[0].split("+")[0]


@pytest.mark.skipif(
    os.environ.get("TUTTI_EXPECT_INSTALLED") != "1",
    reason="run from the checkout: set TUTTI_EXPECT_INSTALLED=1 to test an installed package",
)
def test_the_installed_package_carries_its_library(repo: Path) -> None:
    package = Path(tutti.__file__).resolve().parent
    assert repo not in package.parents, f"tutti was imported from the checkout: {package}"
    assert "TUTTI_LIB" not in os.environ
    assert tutti.library_path() == package / "lib" / "libtutti.so"
    # Importable from any directory, with nothing but the installed package.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TUTTI_LIB")}
    out = subprocess.run(
        [sys.executable, "-c", "import tutti; print(tutti.__version__, tutti.device_count(0))"],
        cwd="/", env=env, capture_output=True, text=True, check=True,
    )
    assert out.stdout.split()[0] == tutti.__version__
    assert int(out.stdout.split()[1]) >= 1


def test_every_header_function_has_a_python_binding(header: str) -> None:
    missing = sorted(set(header_functions(header)) - set(tutti._lib.DECLARED))
    assert not missing, f"header functions without a Python binding: {missing}"


def test_each_error_status_has_its_own_exception_class(header: str) -> None:
    statuses = {value for value in header_enum(header, "TuttiStatus").values() if value < 0}
    classes = {}
    for status in statuses:
        error = tutti.TuttiError(status, "message")
        assert type(error) is not tutti.TuttiError, f"status {status} has no subclass"
        assert type(error).STATUS == status and error.status == status
        assert isinstance(error, tutti.TuttiError)
        assert type(error).__module__ == "tutti" and hasattr(tutti, type(error).__name__)
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        classes[status] = type(error)
    assert len(set(classes.values())) == len(statuses)
    # The built-in families users already catch.
    assert issubclass(tutti.InvalidArgumentError, ValueError)
    assert issubclass(tutti.OutOfMemoryError, MemoryError)
    assert issubclass(tutti.InputOutputError, OSError)
    assert issubclass(tutti.UnsupportedError, NotImplementedError)
    # A status this version does not know stays a plain TuttiError with the raw int.
    unknown = tutti.TuttiError(-999, "from a newer library")
    assert type(unknown) is tutti.TuttiError and unknown.status == -999


def test_a_failing_call_raises_the_subclass_of_its_status() -> None:
    with pytest.raises(tutti.InvalidArgumentError, match="index") as caught:
        tutti.device_info(tutti.Kind.CPU, count=2, index=2)
    assert caught.value.status == tutti.Status.ERROR_INVALID_ARGUMENT
    with pytest.raises(ValueError):
        tutti.device_info(tutti.Kind.CPU, count=2, index=2)
