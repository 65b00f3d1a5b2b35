"""The migration guide's FastMCP tool and its mrtr version, both run (docs/handlers.md, Coming from FastMCP)."""
