"""Builds libtutti with cargo and bundles it inside the `tutti` package.

Why this and not maturin or setuptools-rust: the bindings are plain ctypes over the C ABI
(`include/tutti.h`), so the wheel needs one shared library beside the Python files and
nothing compiled against Python. maturin's cdylib mode generates cffi bindings of its own,
and setuptools-rust's no-binding mode names the library as a Python extension; this file is
the whole build (one `cargo build`, one copy), with no build dependency beyond setuptools.
The wheel is tagged `py3-none-<platform>`: the library does not depend on the Python version.

The library comes from, in order:
- ``TUTTI_PREBUILT_LIB``: a libtutti.so built beforehand (no cargo needed);
- ``cargo build -p tutti-capi`` in the repository holding this folder, in the profile that
  ``TUTTI_CARGO_PROFILE`` names (``release``, the default, or ``debug``), honouring
  ``CARGO_TARGET_DIR`` and ``CARGO``.

The version is the workspace's (``[workspace.package] version`` in the root Cargo.toml);
``tutti/_version.py`` must say the same, and the build stops when it does not.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 ships bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools: the wheel package's
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: Where the library lies inside the package: in a folder of its own, which no module
#: finder takes for an extension module.
LIBRARY = "lib/libtutti.so"


def workspace_version() -> str:
    """The version in [workspace.package] of the repository's Cargo.toml."""
    manifest = REPO / "Cargo.toml"
    if not manifest.is_file():
        sys.exit(
            f"tutti: {manifest} not found. Build the package from a checkout of the repository "
            "(`pip install ./python` from its root), or set TUTTI_PREBUILT_LIB."
        )
    section = re.search(r"^\[workspace\.package\]\s*$(.*?)(?=^\[|\Z)", manifest.read_text(),
                        flags=re.MULTILINE | re.DOTALL)
    version = section and re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.MULTILINE)
    if not version:
        sys.exit(f"tutti: no [workspace.package] version in {manifest}")
    return version.group(1)


def package_version() -> str:
    """`__version__` of tutti/_version.py, checked against the workspace's."""
    text = (HERE / "tutti" / "_version.py").read_text()
    found = re.search(r'^__version__\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if not found:
        sys.exit("tutti: tutti/_version.py has no __version__")
    if (REPO / "Cargo.toml").is_file() and found.group(1) != workspace_version():
        sys.exit(
            f"tutti: tutti/_version.py says {found.group(1)} but Cargo.toml says "
            f"{workspace_version()}: update _version.py"
        )
    return found.group(1)


def cargo_build() -> Path:
    """Builds tutti-capi and returns the path of the cdylib cargo reports."""
    profile = os.environ.get("TUTTI_CARGO_PROFILE", "release")
    if profile not in ("release", "debug"):
        sys.exit(f"tutti: TUTTI_CARGO_PROFILE={profile!r}: use release or debug")
    cargo = os.environ.get("CARGO", "cargo")
    if shutil.which(cargo) is None:
        sys.exit(
            f"tutti: `{cargo}` not found: building the package needs a Rust toolchain "
            "(https://rustup.rs), or a built library in TUTTI_PREBUILT_LIB"
        )
    command = [cargo, "build", "-p", "tutti-capi", "--lib",
               "--manifest-path", str(REPO / "Cargo.toml"),
               "--message-format=json-render-diagnostics"]
    if profile == "release":
        command.append("--release")
    print("tutti:", " ".join(command), file=sys.stderr)
    finished = subprocess.run(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    if finished.returncode != 0:
        sys.exit(f"tutti: cargo build failed (exit {finished.returncode})")
    libraries = []
    for line in finished.stdout.splitlines():
        message = json.loads(line) if line.startswith("{") else {}
        if message.get("reason") == "compiler-artifact" and "cdylib" in message["target"]["kind"]:
            libraries += [Path(f) for f in message["filenames"] if f.endswith(".so")]
    if len(libraries) != 1:
        sys.exit(f"tutti: cargo reported {len(libraries)} shared libraries, not 1: {libraries}")
    return libraries[0]


def library() -> Path:
    prebuilt = os.environ.get("TUTTI_PREBUILT_LIB")
    if prebuilt:
        path = Path(prebuilt)
        if not path.is_file():
            sys.exit(f"tutti: TUTTI_PREBUILT_LIB={prebuilt} is not a file")
        return path
    return cargo_build()


class BuildWithLibrary(build_py):
    """build_py, then the library copied into the built package."""

    def run(self) -> None:
        super().run()
        if not self.dry_run:
            target = Path(self.build_lib) / "tutti" / LIBRARY
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(library(), target)
            target.chmod(0o755)


class PlatformWheel(bdist_wheel):
    """A wheel for this platform that any Python 3 can use (ctypes, no extension module)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(
    version=package_version(),
    cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel},
    package_data={"tutti": [LIBRARY]},
    zip_safe=False,
)
