"""The package version, in one place: ``mrtr.__version__``, ``mrtr --version``, the client's ``clientInfo``
and the package metadata (``pyproject.toml`` reads it) all take it from here."""

__version__ = "0.1.0"
