"""The ``mrtr`` command: ``mrtr serve``, ``mrtr call``, ``mrtr list``.

:func:`main` is the entry point (``python -m mrtr`` and the ``mrtr`` script).
"""

from .commands import main

__all__ = ["main"]
