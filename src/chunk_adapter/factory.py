"""Adapter factories: how the suite builds the adapter it verifies.

A factory is any callable ::

    factory(connector, *, stage_id, src_stage_id=None, build_payload=None, **options)

that returns an adapter with ``save_async``, ``cancel_sender``, ``load_async``,
``poll_ready``, ``cleanup_receiver`` and ``stop``. A factory that also accepts
``runtime=`` can be explored white-box by the interleaving explorer.

Users name a factory as ``"pkg.mod:attr"`` (``--adapter`` on the command line
and in pytest); :func:`load_factory` resolves it with errors that say what to fix.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .errors import UsageError

LOG = logging.getLogger(__name__)

__all__ = [
    "REFERENCE",
    "AdapterFactory",
    "AdapterLike",
    "LoadedFactory",
    "accepted_options",
    "accepts_runtime",
    "calibration_reference",
    "declares_keyword",
    "known_options",
    "load_factory",
    "loaded",
    "reference_factory",
    "refused_keywords",
    "surely_got",
    "takes_keyword",
]

REFERENCE = "chunk_adapter.adapter:ChunkAdapter"
"""The spec string of the reference adapter, the default everywhere."""


class AdapterLike(Protocol):
    """The six calls the suite makes on an adapter (the contract's surface)."""

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None: ...

    def cancel_sender(self, request_id: str) -> None: ...

    def load_async(self, request_id: str) -> None: ...

    def poll_ready(self) -> dict[str, list[dict[str, Any]]]: ...

    def cleanup_receiver(self, request_id: str) -> None: ...

    def stop(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: object) -> Any: ...


AdapterFactory = Callable[..., AdapterLike]


def reference_factory(connector: Any, **kwargs: Any) -> AdapterLike:
    """Build the reference :class:`~chunk_adapter.adapter.ChunkAdapter`."""
    from .adapter import ChunkAdapter

    return ChunkAdapter(connector, **kwargs)


def calibration_reference(factory: Callable[..., Any]) -> AdapterFactory | None:
    """The reference adapter's factory, to run a confirmed failure's check on once more.

    A check that also fails on the reference adapter, in the same window and the
    same way, judged the machine (too slow or loaded for one of its time bounds),
    not the adapter: the stages then say *inconclusive*. ``None`` when *factory*
    is the reference itself (through any ``__wrapped__`` chain): nothing to
    compare it with, and the suite's own mutation runs mutate that very class.
    """
    from .adapter import ChunkAdapter

    if inspect.unwrap(factory) is ChunkAdapter:
        return None
    return load_factory(REFERENCE)


def load_factory(spec: str) -> AdapterFactory:
    """Resolve ``"pkg.mod:attr"`` (attr may be dotted) to a callable factory."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise UsageError(
            f"an adapter is named as 'package.module:factory', got {spec!r}; "
            f"for example --adapter {REFERENCE}"
        )
    module_name, attr = spec.split(":")
    if not module_name or not attr:
        raise UsageError(f"both sides of ':' are needed in {spec!r}, e.g. {REFERENCE}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"cannot import module {module_name!r} named in --adapter {spec!r}: {exc}. "
            "Is the package installed, or its directory on PYTHONPATH?"
        ) from exc
    except Exception as exc:  # SyntaxError, or the module raising while it is imported
        raise UsageError(
            f"importing module {module_name!r} named in --adapter {spec!r} raised "
            f"{type(exc).__name__}: {exc}. Fix the module so that it imports cleanly."
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(
                f"module {module_name!r} has no attribute {attr!r} (from --adapter {spec!r})"
            ) from None
    if not callable(obj):
        raise UsageError(f"{spec!r} names {obj!r}, which is not callable; name a factory")
    _check_signature(spec, obj)
    return loaded(obj)


# The keywords the contract gives every factory; a factory that rejects one of them is
# misnamed or broken, and the suite says so rather than leaving the keyword out.
CONTRACT_KEYWORDS = frozenset({"stage_id", "src_stage_id", "build_payload"})
_UNEXPECTED = re.compile(r"unexpected keyword argument '([A-Za-z_][A-Za-z0-9_]*)'")


class LoadedFactory:
    """A factory as the suite calls it: the user's callable, plus the optional keywords
    (``runtime``, ``logger``, ``put_tries``...) it turned out not to take.

    A factory with ``**kwargs`` may hand them to a constructor that declares fewer;
    its signature says "any keyword" and only a call tells. When a call fails with
    ``TypeError: ... unexpected keyword argument 'X'`` for an optional keyword the
    suite passed, ``X`` is remembered, left out, and the call made again; from then
    on :func:`takes_keyword` answers ``False`` for it. A ``TypeError`` that names no
    keyword (options handed down to ``object.__init__``) leaves every optional keyword
    out, if the factory then builds. A contract keyword (``stage_id``,
    ``src_stage_id``, ``build_payload``) is never left out.
    """

    def __init__(self, factory: Callable[..., Any]) -> None:
        functools.update_wrapper(self, factory)
        self.__wrapped__ = factory
        # _lock guards rejected (stage threads may build adapters at once); nobody waits on it.
        self._lock = threading.Lock()
        self.rejected: set[str] = set()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        while True:
            with self._lock:
                call = {k: v for k, v in kwargs.items() if k not in self.rejected}
            try:
                return self.__wrapped__(*args, **call)
            except TypeError as exc:
                name = _unexpected_keyword(exc)
                if name is None:
                    return self._without_options(exc, args, call)
                if name not in call or name in CONTRACT_KEYWORDS:
                    raise
                LOG.info(
                    "factory %r does not take %s=; building its adapters without it",
                    self.__wrapped__, name,
                )  # fmt: skip
                with self._lock:
                    self.rejected.add(name)

    def _without_options(self, exc: TypeError, args: tuple[Any, ...], call: dict[str, Any]) -> Any:
        """A ``TypeError`` that names no keyword (``object.__init__() takes exactly one
        argument``: options handed down a ``super().__init__(**kw)`` chain): build with the
        contract keywords alone; if that works, leave every optional keyword out from now
        on. Otherwise the error was not about the options: raise it."""
        optional = sorted(k for k in call if k not in CONTRACT_KEYWORDS)
        if not optional:
            raise exc
        try:
            built = self.__wrapped__(*args, **{k: call[k] for k in call if k not in optional})
        except Exception:
            raise exc from None
        LOG.info(
            "factory %r raised %r with the options %s and builds without them; building "
            "its adapters without them", self.__wrapped__, exc, optional,
        )  # fmt: skip
        with self._lock:
            self.rejected.update(optional)
        return built

    def __repr__(self) -> str:
        return repr(self.__wrapped__)


def loaded(factory: Callable[..., Any]) -> AdapterFactory:
    """*factory* as a :class:`LoadedFactory` (itself if it already is one): the same
    one for the same callable, so what one driver learns the others know."""
    if isinstance(factory, LoadedFactory):
        return factory
    try:
        with _LOADED_LOCK:
            found = _LOADED.get(factory)
            if found is None:
                found = _LOADED[factory] = LoadedFactory(factory)
            return found
    except TypeError:  # unhashable callable: no sharing
        return LoadedFactory(factory)


# _LOADED maps each callable loaded so far to its LoadedFactory (a handful per process);
# _LOADED_LOCK guards it. Nobody waits on it.
_LOADED: dict[Any, LoadedFactory] = {}
_LOADED_LOCK = threading.Lock()


def _unexpected_keyword(exc: TypeError) -> str | None:
    found = _UNEXPECTED.search(str(exc))
    return found.group(1) if found else None


def refused_keywords(factory: Callable[..., Any]) -> set[str]:
    """The keywords a :class:`LoadedFactory` anywhere in *factory*'s ``__wrapped__``
    chain has found it does not take."""
    out: set[str] = set()
    seen = 0
    obj: Any = factory
    while obj is not None and seen < 20:
        if isinstance(obj, LoadedFactory):
            with obj._lock:
                out |= obj.rejected
        obj, seen = getattr(obj, "__wrapped__", None), seen + 1
    return out


def _check_signature(spec: str, factory: Callable[..., Any]) -> None:
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # builtins and C callables: trust them
    try:
        sig.bind(object(), stage_id=1, src_stage_id=None, build_payload=None)
    except TypeError as exc:
        raise UsageError(
            f"factory {spec!r} has signature {sig}, which cannot be called as "
            "factory(connector, *, stage_id=..., src_stage_id=..., build_payload=...): "
            f"{exc}. Give it those keyword parameters."
        ) from None


def takes_keyword(factory: Callable[..., Any], name: str) -> bool:
    """Whether *factory* may be called with keyword *name*: it declares it, or takes
    ``**kwargs``. ``False`` when the signature cannot be read (builtins, C callables).

    The one answer to "does the factory accept this keyword" for every driver.
    """
    params = _parameters(factory)
    if params is None or name in refused_keywords(factory):
        return False
    return name in params or _takes_any(params)


def declares_keyword(factory: Callable[..., Any], name: str) -> bool:
    """Whether *factory* names keyword *name* in its signature (not only ``**kwargs``,
    which may drop it), and has not refused it."""
    params = _parameters(factory)
    return params is not None and name in params and name not in refused_keywords(factory)


def accepted_options(factory: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    """The subset of *options* the factory takes (all of them if it has ``**kwargs``;
    none if its signature cannot be read)."""
    params = _parameters(factory)
    if params is None:
        return {}
    rejected = refused_keywords(factory)
    if _takes_any(params):
        return {k: v for k, v in options.items() if k not in rejected}
    return {k: v for k, v in options.items() if k in params}


def accepts_runtime(factory: Callable[..., Any]) -> bool:
    """Whether *factory* may take ``runtime=``: it declares it, or takes ``**kwargs``.

    Only a hint: a ``**options`` factory may drop it. The explorer does not rely
    on this; it builds one adapter and looks whether its threads came through
    the runtime (:mod:`chunk_adapter.explore.control.plan`).
    """
    return takes_keyword(factory, "runtime")


def _parameters(factory: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    try:
        return inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None


def _takes_any(params: Mapping[str, inspect.Parameter]) -> bool:
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def known_options(factory: AdapterFactory, options: dict[str, Any], built: Any) -> dict[str, Any]:
    """The *options* the adapter *built* surely got: the factory takes the keyword and
    names it in its signature, or (``**kwargs``, which may drop it) the adapter shows that
    value under that name. An option the suite cannot be sure of must not tighten a bound:
    the contract's default, or a bound that holds whatever it is, is used instead."""
    return surely_got(
        accepted_options(factory, options), lambda name: declares_keyword(factory, name), built
    )


def surely_got(
    accepted: dict[str, Any], declared: Callable[[str], bool], built: Any
) -> dict[str, Any]:
    """Of the *accepted* options, those *built* surely got: *declared* (the factory names
    the keyword), or shown by the adapter under that name with that value."""
    out = {}
    for name, value in accepted.items():
        if declared(name):
            out[name] = value
            continue
        try:
            shown = getattr(built, name, None)
        except Exception:  # an adapter whose attribute lookup raises shows nothing
            continue
        if shown == value and type(shown) is type(value):
            out[name] = value
    return out
