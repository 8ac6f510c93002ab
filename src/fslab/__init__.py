"""fslab: a laboratory for filesystem performance on Linux."""

__version__ = "0.1.0"
