"""Part 5: tasks, creation to completion with two ``tasks/update`` rounds (SQLite, Redis).

Not measured yet: this needs the tasks carrier (``@server.tool(task=...)``, the task
stores) on the main line, and the suite measures the code as it is there. When
``mrtr.tasks`` can be imported, this part still reports itself as not measured until
the flow is written against that API; it never reports a number it did not take.
"""

from __future__ import annotations

import importlib.util
from typing import Any


def run(*, quick: bool) -> dict[str, Any]:
    """Part 5's result: why it is not measured."""
    present = importlib.util.find_spec("mrtr.tasks") is not None
    reason = ("the tasks carrier (mrtr.tasks) is present, but the task flow (create, two tasks/update rounds, "
              "complete) is not written into the suite yet" if present else
              "the tasks carrier is not on the main line yet (no mrtr.tasks to measure)")
    return {"measured": False, "reason": reason}
