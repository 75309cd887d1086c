"""The adapter's modules, and their ``from threading import Lock``-style names.

:mod:`.patches` routes the attributes of ``threading``, ``time`` and ``queue``,
which covers ``import threading`` / ``threading.Lock()`` anywhere. A module
that did ``from threading import Lock`` or ``from time import perf_counter``
holds the real object under its own name; :func:`rebound` points those names at
the routers for the duration of an exploration, in the *candidate modules*:

* the factory's module, and the modules of every class in the adapter's MRO
  (found by a discovery build, :mod:`.control`);
* every module of the factory's top-level package that is already imported
  (not for ``chunk_adapter`` itself, whose modules are the explorer's);
* the modules and packages the user names (``--substitute``, ``substitute=``):
  a module object or a dotted name; a package means all its submodules.

The same names are what the detection of uncontrolled threads looks for: a
thread the explorer does not run, seen running code of a candidate module.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from ..errors import InvalidValue
from .patches import REAL_ONLY, REPLACEMENTS

__all__ = ["candidate_modules", "named_modules", "rebound"]

_OWN = ("chunk_adapter",)  # the explorer's package: never expanded as "the factory's package"


def _is_stdlib(name: str) -> bool:
    top = name.partition(".")[0]
    names: Iterable[str] = getattr(sys, "stdlib_module_names", ())
    return top in names or top in ("builtins", "__main__")


def _usable(name: str) -> bool:
    return not _is_stdlib(name) and not any(
        name == p or name.startswith(p + ".") for p in REAL_ONLY
    )


def named_modules(names: Sequence[ModuleType | str]) -> list[ModuleType]:
    """The modules *names* stand for: a module, or a dotted name (a package: all of it)."""
    out: list[ModuleType] = []
    for item in names:
        if isinstance(item, ModuleType):
            module = item
        elif isinstance(item, str) and item:
            try:
                module = importlib.import_module(item)
            except ImportError as exc:
                raise InvalidValue(
                    f"cannot import the module {item!r} named to substitute: {exc}. Name an "
                    "importable module or package (e.g. --substitute mypkg.core)"
                ) from exc
        else:
            raise InvalidValue(
                f"substitute= takes modules or dotted module names, got {item!r}; "
                "e.g. substitute=['mypkg.core'] or --substitute mypkg"
            )
        out.append(module)
        out.extend(_submodules(module))
    return out


def _submodules(package: ModuleType) -> list[ModuleType]:
    path = getattr(package, "__path__", None)
    if path is None:
        return []
    found = []
    for info in pkgutil.walk_packages(path, package.__name__ + ".", onerror=lambda _: None):
        try:
            found.append(importlib.import_module(info.name))
        except Exception:  # a submodule that cannot be imported cannot start threads either
            continue
    return found


def candidate_modules(
    factory: Callable[..., Any],
    adapter_type: type | None,
    named: Sequence[ModuleType | str] = (),
) -> list[ModuleType]:
    """The modules whose threading names are rebound and whose threads must be ours."""
    chosen: dict[str, ModuleType] = {}

    def add(name: str | None) -> None:
        module = sys.modules.get(name or "")
        if module is not None and _usable(module.__name__):
            chosen.setdefault(module.__name__, module)

    home = getattr(factory, "__module__", None)
    add(home)
    for cls in getattr(adapter_type, "__mro__", ()):
        add(cls.__module__)
    top = (home or "").partition(".")[0]
    if top and top not in _OWN:
        for name in sorted(sys.modules):
            if name == top or name.startswith(top + "."):
                add(name)
    for module in named_modules(named):
        chosen.setdefault(module.__name__, module)
    return list(chosen.values())


@contextmanager
def rebound(modules: Sequence[ModuleType]) -> Iterator[None]:
    """Point names bound to real threading/time/queue objects in *modules* at the routers."""
    saved: list[tuple[ModuleType, str, Any]] = []
    try:
        for module in modules:
            for name, value in list(vars(module).items()):
                entry = REPLACEMENTS.get(id(value))
                if entry is not None and entry[0] is value:
                    saved.append((module, name, value))
                    setattr(module, name, entry[1])
        yield
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)
