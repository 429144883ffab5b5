"""The package version, importable from inside the package without importing ``charter``."""

__version__ = "0.1.0"
