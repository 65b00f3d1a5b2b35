"""Every public name of the documented modules has a docstring: the site's build hook and a test.

The public names of a module are its ``__all__``. For each one this finds the object it
names (following re-exports to where it is defined) and requires a docstring there; for a
class it also requires one on each public method, property and nested class, where a method
that overrides a documented one of a base class counts as documented. The names are read
with griffe, the loader the API reference is rendered with, so what passes here is what the
reference shows. ``mkdocs build`` runs :func:`on_pre_build` (named in mkdocs.yml) and
tests/test_docs.py calls :func:`undocumented`, so a missing docstring fails both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The modules the API reference documents (docs/reference/), in the order of its pages.
PUBLIC_MODULES = ("mrtr", "mrtr.client", "mrtr.testing", "mrtr.http", "mrtr.stdio", "mrtr.tasks", "mrtr.middleware",
                  "mrtr.auth")


def _documented(obj: Any) -> bool:
    return obj.docstring is not None and bool(obj.docstring.value.strip())


def _target(obj: Any) -> Any:
    return obj.final_target if obj.is_alias else obj


def _inherits_a_docstring(cls: Any, name: str) -> bool:
    for base in cls.mro():
        member = base.members.get(name)
        if member is not None and _documented(_target(member)):
            return True
    return False


def _class_gaps(qualified: str, cls: Any) -> Iterable[str]:
    for name, member in cls.members.items():
        if name.startswith("_"):
            continue
        target = _target(member)
        if not (target.is_function or target.is_class or getattr(target, "is_property", False)):
            continue  # fields and class attributes: the class docstring describes them
        if not _documented(target) and not _inherits_a_docstring(cls, name):
            yield f"{qualified}.{name}"


def undocumented(modules: Iterable[str] = PUBLIC_MODULES, search_paths: list[str] | None = None) -> list[str]:
    """The public names of ``modules`` without a docstring, qualified (``mrtr.http.Responder.send``).

    A name in ``__all__`` that does not resolve to an object is reported too: the reference
    could not render it. ``search_paths`` is where to find the modules (default: ``sys.path``).
    """
    import griffe

    loader = griffe.GriffeLoader(search_paths=search_paths)
    gaps: list[str] = []
    for module_name in modules:
        module = loader.load(module_name)
        loader.resolve_aliases(implicit=False, external=None)
        if module.exports is None:
            gaps.append(f"{module_name}: no __all__")
            continue
        if not _documented(module):
            gaps.append(module_name)
        for name in module.exports:
            name = str(name)
            qualified = f"{module_name}.{name}"
            member = module.members.get(name)
            try:
                target = None if member is None else _target(member)
            except griffe.AliasResolutionError:
                target = None
            if target is None:
                gaps.append(f"{qualified} (named in __all__ but not found)")
                continue
            if not _documented(target):
                gaps.append(qualified)
            if target.is_class:
                gaps.extend(_class_gaps(qualified, target))
    return gaps


def on_pre_build(config: Any) -> None:
    """mkdocs hook: stop the build, naming each public name that has no docstring."""
    from mkdocs.exceptions import PluginError

    gaps = undocumented()
    if gaps:
        raise PluginError("public names without a docstring: " + ", ".join(gaps))
