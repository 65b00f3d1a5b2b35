"""Loading the application ``mrtr serve`` serves: ``module:attribute`` to a :class:`~mrtr.server.Server`."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

from .arguments import UsageError

__all__ = ["DEFAULT_APP", "AppImportError", "load_server"]

DEFAULT_APP = "mrtr.examples.server:server"
"""What ``mrtr serve`` serves when given no application: the bundled example server."""


class AppImportError(Exception):
    """The application module exists but raised while being imported (exit code 1)."""


def load_server(spec: str) -> Any:
    """Import ``module:attribute`` and return the :class:`~mrtr.server.Server` it names.

    Raises :class:`UsageError` for a malformed spec, a module that does not exist, a
    missing attribute, or an object that is not a Server; :class:`AppImportError` when
    the module raises while being imported, or a tool links to an interface no resource
    serves (MCP Apps).
    """
    from ..server.dispatch import Server

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f'application "{spec}" must be given as "<module>:<attribute>", e.g. "myapp.main:server"')
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise UsageError(
                f'could not import module "{module_name}" (no module named "{missing}"; '
                f"looked in the current directory {cwd} and on sys.path)"
            ) from None
        raise AppImportError(_import_failure(module_name)) from exc
    except Exception as exc:
        raise AppImportError(_import_failure(module_name)) from exc
    target: Any = module
    parts = attribute.split(".")
    for index, part in enumerate(parts):
        try:
            target = getattr(target, part)
        except AttributeError:
            owner = f'module "{module_name}"' if index == 0 else f'"{module_name}:{".".join(parts[:index])}"'
            raise UsageError(f'{owner} has no attribute "{part}"') from None
    if not isinstance(target, Server):
        raise UsageError(f"{spec} is a {type(target).__name__}, not a mrtr.server.Server")
    from ..server.apps import check_ui_links

    try:
        check_ui_links(target.catalog)  # MCP Apps: a tool may link to an interface registered after it; all are in now
    except ValueError as exc:
        raise AppImportError(f"{spec}: {exc}") from None
    return target


def _import_failure(module_name: str) -> str:
    return f'error while importing "{module_name}":\n{traceback.format_exc().rstrip()}'
