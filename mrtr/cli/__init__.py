"""The ``mrtr`` command: ``mrtr serve``, ``mrtr call``, ``mrtr list``.

:func:`main` is the entry point (``python -m mrtr`` and the ``mrtr`` script), in
:mod:`~mrtr.cli.commands`; each command lives in its own module (:mod:`~mrtr.cli.serve`,
:mod:`~mrtr.cli.call` for ``call`` and ``list``).
"""

from .commands import main

__all__ = ["main"]
