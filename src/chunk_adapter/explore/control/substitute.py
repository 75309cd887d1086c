"""The adapter's modules, and their ``from threading import Lock``-style names.

:mod:`.patches` routes the attributes of ``threading``, ``time`` and ``queue``,
which covers ``import threading`` / ``threading.Lock()`` anywhere. A module
that did ``from threading import Lock`` or ``from time import perf_counter``
holds the real object under its own name; :func:`rebound` points those names at
the routers for the duration of an exploration, in the *candidate modules*:

* the factory's module, and the modules of every class in the adapter's MRO
  (found by a discovery build, :mod:`.control.plan`);
* what the discovery build saw the adapter use (:func:`reached_modules`): the
  modules whose code its threads run (their targets, a ``Thread`` subclass's
  class), and the modules of the classes of the objects it holds, two
  attributes deep (an adapter that delegates to an engine in another package);
* every module of the factory's top-level package that is already imported,
  and of the top-level packages its threads' code lives in (not for
  ``chunk_adapter`` itself, whose modules are the explorer's);
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

from ...errors import InvalidValue
from .patches import REAL_ONLY, REPLACEMENTS, routed_lock

__all__ = ["candidate_modules", "named_modules", "reached_modules", "rebound"]

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


_REACH_DEPTH = 2  # attributes followed from the adapter (adapter.engine.queue)
_REACH_OBJECTS = 500  # objects looked at, at most


def reached_modules(adapter: object, threads: Iterable[object]) -> tuple[list[str], list[str]]:
    """``(running, holding)``: the modules whose code *threads* (the adapter's own) run,
    and the modules of the classes of the objects *adapter* holds, two attributes deep
    (instance attributes, slots, and the items of lists, tuples, sets and dicts)."""
    running: dict[str, None] = {}
    for thread in threads:
        target = getattr(thread, "_target", None)
        for name in (getattr(target, "__module__", None), type(thread).__module__):
            if isinstance(name, str):
                running.setdefault(name, None)
    holding: dict[str, None] = {}
    seen: set[int] = set()
    level: list[object] = [adapter]
    for _ in range(_REACH_DEPTH + 1):
        following: list[object] = []
        for obj in level:
            if id(obj) in seen or len(seen) >= _REACH_OBJECTS:
                continue
            seen.add(id(obj))
            holding.setdefault(type(obj).__module__, None)
            following.extend(_held(obj))
        level = following
    return list(running), list(holding)


def _held(obj: object) -> list[object]:
    """What *obj* holds directly: its attributes and slots, or a container's items."""
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)[:_REACH_OBJECTS]
    if isinstance(obj, dict):
        return list(obj.values())[:_REACH_OBJECTS]
    held = list(getattr(obj, "__dict__", {}).values()) if not isinstance(obj, type) else []
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__"):
                try:
                    held.append(getattr(obj, slot))
                except AttributeError:  # an empty slot
                    continue
    return held


def candidate_modules(
    factory: Callable[..., Any],
    adapter_type: type | None,
    named: Sequence[ModuleType | str] = (),
    *,
    running: Sequence[str] = (),
    holding: Sequence[str] = (),
) -> list[ModuleType]:
    """The modules whose threading names are rebound and whose threads must be ours
    (*running*, *holding*: what :func:`reached_modules` found; module doc)."""
    chosen: dict[str, ModuleType] = {}

    def add(name: str | None) -> None:
        module = sys.modules.get(name or "")
        if module is not None and _usable(module.__name__):
            chosen.setdefault(module.__name__, module)

    home = getattr(factory, "__module__", None)
    add(home)
    for cls in getattr(adapter_type, "__mro__", ()):
        add(cls.__module__)
    for name in (*running, *holding):
        add(name)
    tops = dict.fromkeys(
        top
        for top in ((home or "").partition(".")[0], *(n.partition(".")[0] for n in running))
        if top and top not in _OWN and _usable(top)
    )
    for name in sorted(sys.modules):
        if name.partition(".")[0] in tops:
            add(name)
    for module in named_modules(named):
        chosen.setdefault(module.__name__, module)
    return list(chosen.values())


@contextmanager
def rebound(modules: Sequence[ModuleType]) -> Iterator[None]:
    """Point names bound to real threading/time/queue objects in *modules* at the routers,
    and put a stand-in (:func:`.patches.routed_lock`) for every real ``Lock`` or ``RLock``
    the modules, or the classes defined in them, made at import: tasks share a controlled
    one per execution instead of blocking on the real one."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module in modules:
            for name, value in list(vars(module).items()):
                entry = REPLACEMENTS.get(id(value))
                if entry is not None and entry[0] is value:
                    saved.append((module, name, value))
                    setattr(module, name, entry[1])
                    continue
                _route_locks(module, name, value, saved)
                if isinstance(value, type) and value.__module__ == module.__name__:
                    for attr, held in list(vars(value).items()):
                        _route_locks(value, attr, held, saved)
        yield
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)


def _route_locks(owner: Any, name: str, value: Any, saved: list[tuple[Any, str, Any]]) -> None:
    where = getattr(owner, "__qualname__", None) or getattr(owner, "__name__", "?")
    stand_in = routed_lock(value, f"{where}.{name}")
    if stand_in is not None:
        try:
            setattr(owner, name, stand_in)
        except (AttributeError, TypeError):  # a class that refuses new attributes keeps its own
            return
        saved.append((owner, name, value))
