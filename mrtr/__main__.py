"""``python -m mrtr``: the same as the ``mrtr`` command."""

import sys

from .cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
