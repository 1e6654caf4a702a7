"""The flux-chroma version (kept in sync with pyproject.toml by a test)."""

__version__ = "0.1.0"
