"""How the explorer takes control of an adapter: white-box or substitution, decided by looking.

A factory's signature does not say whether its adapter uses the runtime it is
given: ``make(connector, **options)`` accepts ``runtime=`` and may drop it. So
:func:`plan_control` *observes*: a discovery build calls the factory once, on
real threads, with a throwaway ``MemoryConnector`` and a spy runtime (a
``ThreadingRuntime`` that notes what it was asked for), then stops it, bounded
by a timeout. Then:

* **white-box**: the adapter started no thread of its own (it used the runtime,
  or started nothing yet);
* **substitution**: it started real threads although it was given ``runtime=``,
  or the factory takes no ``runtime=`` (or raised ``TypeError`` on it).

Either way the exploration runs under :mod:`.patches` (every thread a task
starts is controlled) and :func:`~.substitute.rebound` over the candidate
modules; the mode decides whether ``runtime=`` is passed and what the report
says. What the discovery build saw adds to the candidates: the modules of the
adapter's class and its MRO, of the code its threads run and of the objects it
holds (:func:`~.substitute.reached_modules`). Plans are cached per factory and named modules.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ...connectors import MemoryConnector
from ...factory import loaded
from ...runtime import ThreadingRuntime, ThreadLike
from ..runtime import real
from .keywords import Keywords
from .patches import installed
from .substitute import candidate_modules, reached_modules, rebound

__all__ = ["SUBSTITUTE_ENV", "Control", "controlled", "plan_control", "substitute_from_env"]

DISCOVERY_TIMEOUT = 10.0  # s for the discovery build: the factory call plus stop()
SUBSTITUTE_ENV = "CHUNK_ADAPTER_SUBSTITUTE"
"""Comma-separated modules ``chunk-adapter replay`` substitutes (what ``--substitute``
gave ``verify``); the stage prints it in front of its replay command when set."""


def substitute_from_env() -> tuple[str, ...] | str:
    """The modules named in ``$CHUNK_ADAPTER_SUBSTITUTE``, or ``"auto"`` when none."""
    names = tuple(n.strip() for n in os.environ.get(SUBSTITUTE_ENV, "").split(",") if n.strip())
    return names or "auto"


@dataclass(frozen=True)
class Control:
    """How executions build the adapter: whether ``runtime=`` is passed, which modules'
    names are rebound, the mode, and one line of how that was decided."""

    pass_runtime: bool
    modules: tuple[ModuleType, ...]
    mode: str  # "white-box" or "substitution"
    evidence: str

    @property
    def module_names(self) -> frozenset[str]:
        return frozenset(m.__name__ for m in self.modules)

    def describe(self) -> str:
        names = ", ".join(sorted(self.module_names)) or "none"
        return f"{self.mode} ({self.evidence}; modules: {names})"


class _Spy(ThreadingRuntime):
    """A real runtime that notes whether the adapter used it and which threads it made."""

    def __init__(self) -> None:
        self.used = False
        self.threads: list[ThreadLike] = []

    def Lock(self) -> Any:
        self.used = True
        return super().Lock()

    def Event(self) -> Any:
        self.used = True
        return super().Event()

    def start_thread(self, target: Callable[[], None], name: str) -> ThreadLike:
        self.used = True
        thread = super().start_thread(target, name)
        self.threads.append(thread)
        return thread


@dataclass
class _Seen:
    adapter_type: type | None = None
    runtime_taken: bool = False
    spy_used: bool = False
    own_threads: tuple[str, ...] = ()
    running: tuple[str, ...] = ()  # modules whose code the adapter's threads run
    holding: tuple[str, ...] = ()  # modules of the objects the adapter holds
    error: str = ""


def _discover(factory: Callable[..., Any], timeout: float, keywords: Keywords) -> _Seen:
    seen = _Seen()
    before = {t.ident for t in threading.enumerate()}

    def build() -> None:
        spy = _Spy()
        factory_ = loaded(factory)  # leaves runtime= out, and says so, if it is refused
        kwargs: dict[str, Any] = {"runtime": spy} if keywords.takes("runtime") else {}
        adapter = factory_(MemoryConnector(), stage_id=0, build_payload=None, **kwargs)
        seen.adapter_type = type(adapter)
        seen.runtime_taken = keywords.takes("runtime")  # unless this build refused it
        seen.spy_used = spy.used
        mine = {id(t) for t in spy.threads} | {id(threading.current_thread())}
        started = [t for t in threading.enumerate() if t.ident not in before and id(t) not in mine]
        seen.own_threads = tuple(t.name for t in started)
        running, holding = reached_modules(adapter, [*started, *spy.threads])
        seen.running, seen.holding = tuple(running), tuple(holding)
        adapter.stop()

    def guarded() -> None:
        try:
            build()
        except Exception as exc:
            seen.error = f"{type(exc).__name__}: {exc}"

    thread = real.Thread(target=guarded, name="chunk-adapter-explore-discovery", daemon=True)
    real.thread_start(thread)
    real.thread_join(thread, timeout)
    if real.thread_is_alive(thread):
        seen.error = f"building and stopping one adapter took longer than {timeout:g} s"
    return seen


_PLANS: dict[tuple[Any, tuple[Any, ...]], Control] = {}


def plan_control(
    factory: Callable[..., Any],
    named: Sequence[ModuleType | str] = (),
    *,
    timeout: float = DISCOVERY_TIMEOUT,
    keywords: Keywords | None = None,
) -> Control:
    """Decide how to control *factory*'s adapters (see module doc); cached. *keywords*:
    what the factory's signature says, when the run read it already."""
    key = (factory, tuple(named))
    plan = _PLANS.get(key)
    if plan is None:
        if keywords is None:
            keywords = Keywords.of(loaded(factory))  # what its discovery build refuses too
        plan = _PLANS[key] = _plan(factory, named, timeout, keywords)
    return plan


def _plan(
    factory: Callable[..., Any],
    named: Sequence[ModuleType | str],
    timeout: float,
    keywords: Keywords,
) -> Control:
    seen = _discover(factory, timeout, keywords)
    modules = tuple(
        candidate_modules(
            factory, seen.adapter_type, named, running=seen.running, holding=seen.holding
        )
    )
    if seen.error:
        takes = keywords.takes("runtime")
        return Control(
            takes,
            modules,
            "substitution",
            f"the discovery build failed ({seen.error}); runtime= "
            + ("passed as the signature allows" if takes else "not accepted"),
        )
    if not seen.runtime_taken:
        return Control(False, modules, "substitution", "the factory takes no runtime=")
    if seen.own_threads:
        return Control(
            True,
            modules,
            "substitution",
            f"given runtime=, the adapter still started real threads {list(seen.own_threads)}",
        )
    if not seen.spy_used:
        # Nothing started, nothing asked of the runtime: whatever it starts later is a
        # task anyway (the patches), so nothing is lost by trying white-box.
        return Control(
            True, modules, "white-box", "given runtime=, the adapter started no thread yet"
        )
    return Control(True, modules, "white-box", "the adapter takes its threads from runtime=")


@contextmanager
def controlled(control: Control) -> Iterator[None]:
    """The process-wide patches plus the candidate modules' names rebound."""
    with installed(), rebound(control.modules):
        yield
