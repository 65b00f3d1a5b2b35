"""The ``mrtr`` command: ``mrtr serve``, ``mrtr call``, ``mrtr list``, ``mrtr install``, ``mrtr dev``, ...

:func:`main` is the entry point (``python -m mrtr`` and the ``mrtr`` script), in
:mod:`~mrtr.cli.commands`; each command lives in its own module (:mod:`~mrtr.cli.serve`,
:mod:`~mrtr.cli.call` for ``call`` and ``list``, :mod:`~mrtr.cli.install` for ``install`` and
``uninstall``, :mod:`~mrtr.cli.dev`).
"""

from .commands import main

__all__ = ["main"]
