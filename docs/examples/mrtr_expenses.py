"""The same expense tool for mrtr: a generator that yields its questions."""

from pydantic import BaseModel, Field

from mrtr import Elicit, Form, Server, Step

server = Server("expenses")
reads: list[str] = []  # every read of the category table, so a test can count them


def load_categories() -> list[str]:
    reads.append("categories")
    return ["travel", "meals", "office"]


class Confirm(BaseModel):
    ok: bool = Field(title="File it?")


@server.tool
def file_expense(description: str, amount: float) -> str:
    """File an expense after asking its category and a confirmation."""
    categories = yield Step(load_categories)  # read once per conversation, not once per round
    category = yield Elicit(f"Category for {description!r}?", Form().choice("category", categories))
    if not category.accepted:
        return "Not filed"
    chosen = category.content["category"]
    confirm = yield Elicit(f"File {amount:.2f} EUR under {chosen}?", Confirm)
    if not confirm.accepted or not confirm.value.ok:
        return "Not filed"
    return f"Filed {description!r}: {amount:.2f} EUR under {chosen}"
