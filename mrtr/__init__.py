"""mrtr: MCP handlers that ask the user mid-execution, written as plain generators."""

__version__ = "0.1.0"
