"""An expense tool written for FastMCP: it asks with ``await ctx.elicit(...)``."""

from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

mcp = FastMCP("expenses")
reads: list[str] = []  # every read of the category table, so a test can count them


def load_categories() -> list[str]:
    reads.append("categories")
    return ["travel", "meals", "office"]


class Confirm(BaseModel):
    ok: bool = Field(title="File it?")


@mcp.tool
async def file_expense(description: str, amount: float, ctx: Context) -> str:
    """File an expense after asking its category and a confirmation."""
    categories = load_categories()
    category = await ctx.elicit(f"Category for {description!r}?", response_type=categories)
    if category.action != "accept":
        return "Not filed"
    confirm = await ctx.elicit(f"File {amount:.2f} EUR under {category.data}?", response_type=Confirm)
    if confirm.action != "accept" or not confirm.data.ok:
        return "Not filed"
    return f"Filed {description!r}: {amount:.2f} EUR under {category.data}"
