"""dlc's version (kept in step with pyproject.toml); a leaf module, importable from anywhere."""

__version__ = "0.1.0"
