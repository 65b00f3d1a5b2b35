"""Elicitation forms: the flat schema vocabulary of MCP 2026-07-28.

A form-mode elicitation asks the user to fill in one flat object. Each property is a
string (optionally with a format), an integer or number, a boolean, a single choice,
or a multi-select list of string choices. The 2026-07-28 ``PrimitiveSchemaDefinition``
allows nothing more: clients render these schemas as plain forms, so nested objects
and arrays of anything but string choices are refused here, at build time, instead
of failing later in a client. A handler that needs structure asks several questions.

A form is written with the chainable :class:`Form` builder or derived from a flat
``msgspec.Struct``. :func:`requested_schema` compiles either into a
:class:`RequestedSchema`: the exact ``requestedSchema`` JSON sent on the wire, its
canonical bytes and digest (what replay fingerprints compare), and validators that
check an accepted answer against exactly what was asked before the handler sees it.
Clients should validate answers too, but a server cannot rely on that.
"""

from __future__ import annotations

from .checks import INTEGER_MAX, INTEGER_MIN, STRING_FORMATS
from .derive import requested_schema
from .forms import Form, FormTypeError, RequestedSchema, schema_changes

# The vocabulary lives in three modules (ADR 16): the Form builder and its compiled form
# (forms), the rules an answer's values must meet (checks), a form derived from a type (derive).
__all__ = ["STRING_FORMATS", "INTEGER_MIN", "INTEGER_MAX", "Form", "FormTypeError", "RequestedSchema",
           "requested_schema", "schema_changes"]
