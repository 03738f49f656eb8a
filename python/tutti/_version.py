"""The package's version: the workspace's (Cargo.toml), checked by setup.py and the tests."""

__version__ = "0.1.0"
