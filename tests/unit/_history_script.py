"""Hand-written histories for the oracle tests: :class:`Script` and its shorthands.

Histories are scripted record by record with :class:`Script`; every record
takes fresh sequence numbers, so records are strictly ordered unless a test
opens an operation early (``start(name)``, then ``get(..., begin=name)``) to
make it overlap others.

The rule tests are tables: a :func:`case` is a list of steps (``do.save("r",
"a")`` stands for ``script.save("r", "a")``) followed by what the oracles must
say of the history so far (:func:`quiet`, :func:`fires`, :func:`only`), possibly
several times over one growing history; :func:`play` runs one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from chunk_adapter.history import BuildCall, ConnectorOp, History
from chunk_adapter.oracles import CallRecord, check

__all__ = ["Expect", "Script", "c", "case", "do", "fires", "only", "play", "quiet"]


class Script:
    """Builds a History by hand (module doc)."""

    def __init__(self) -> None:
        self.h = History()
        self.begun: dict[str, int] = {}  # start(name): operations opened early, by name

    def start(self, name: str = "") -> int:
        self.begun[name] = self.h.tick()
        return self.begun[name]

    def call(
        self,
        call: Any,
        rid: str | None = None,
        args: tuple[Any, ...] = (),
        result: Any = None,
        error: BaseException | None = None,
        adapter: str = "adapter",
    ) -> None:
        b = self.h.tick()
        self.h.append(CallRecord(call, rid, args, result, error, b, self.h.tick(), "main", adapter))

    def save(self, rid: str, snap: Any, final: bool = False) -> None:
        self.call("save_async", rid, (snap, final))

    def cancel(self, rid: str) -> None:
        self.call("cancel_sender", rid)

    def load(self, rid: str) -> None:
        self.call("load_async", rid)

    def cleanup(self, rid: str) -> None:
        self.call("cleanup_receiver", rid)

    def poll(self, result: dict[str, list[dict[str, Any]]]) -> None:
        self.call("poll_ready", None, (), result)

    def stop(self) -> None:
        self.call("stop")

    def build(
        self, rid: str, snap: Any, final: bool = False, *, fail: bool = False, result: Any = ...
    ) -> None:
        b = self.h.tick()
        self.h.append(
            BuildCall(
                rid,
                snap,
                final,
                None if fail else snap if result is ... else result,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
            )
        )

    def put(
        self,
        key: str,
        data: Any,
        finished: bool = False,
        *,
        fail: bool = False,
        value: Any = None,
        permanent: bool = False,
        begin: int | str | None = None,
    ) -> None:
        b = self.begun[begin] if isinstance(begin, str) else begin
        b = b if b is not None else self.h.tick()
        v = value if value is not None else {"data": data, "finished": finished}
        self.h.append(
            ConnectorOp(
                "put",
                key,
                v,
                "error" if fail else "ok",
                "InjectedFault()" if fail else None,
                b,
                self.h.tick(),
                "save",
                permanent=permanent,
            )
        )

    def get(
        self,
        key: str,
        value: Any = None,
        *,
        begin: int | str | None = None,
        thread: str = "recv",
        ident: int = 0,
        fail: bool = False,
    ) -> None:
        b = self.begun[begin] if isinstance(begin, str) else begin
        b = b if b is not None else self.h.tick()
        outcome = "error" if fail else "none" if value is None else "ok"
        error = "InjectedFault()" if fail else None
        end = self.h.tick()
        self.h.append(ConnectorOp("get", key, value, outcome, error, b, end, thread, ident))

    def sent(self, rid: str, items: list[tuple[Any, bool]]) -> None:
        """Save, build and put *items* of one request correctly, in order."""
        for snap, final in items:
            self.save(rid, snap, final)
        for i, (snap, final) in enumerate(items):
            self.build(rid, snap, final)
            self.put(f"{rid}_1_{i}", snap, final)

    def received(self, rid: str, values: list[dict[str, Any]]) -> None:
        """Put *values* of one request and get each back, in order."""
        for i, v in enumerate(values):
            self.put(f"{rid}_1_{i}", v["data"], v["finished"])
            self.get(f"{rid}_1_{i}", v)

    def rules(self, *, quiescent: bool = False, put_tries: int | None = 3) -> list[str]:
        return [v.rule for v in check(self.h, quiescent=quiescent, put_tries=put_tries)]


def c(data: Any, finished: bool = False) -> dict[str, Any]:
    return {"data": data, "finished": finished}


Step = Callable[[Script], object]


class _Steps:
    """``do.save("r", "a")`` is the step that calls ``script.save("r", "a")``."""

    def __getattr__(self, name: str) -> Callable[..., Step]:
        if name.startswith("_") or not callable(getattr(Script, name, None)):
            raise AttributeError(f"do.{name}: Script has no method {name!r}; see Script")

        def step(*args: Any, **kwargs: Any) -> Step:
            return lambda script: getattr(script, name)(*args, **kwargs)

        return step


do = _Steps()


@dataclass(frozen=True)
class Expect:
    """What the oracles must say of the history so far: nothing (``rule`` None), *rule*
    among what they say, (``alone``) *rule* and nothing else, or (``root``) *rule* first."""

    rule: str | None
    alone: bool = False
    root: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # quiescent=, put_tries=

    def check(self, script: Script) -> None:
        said = script.rules(**self.options)
        if self.rule is None:
            assert said == [], f"expected no finding ({self.options}), got {said}"
        elif self.alone:
            assert said == [self.rule], f"expected just {self.rule} ({self.options}), got {said}"
        elif self.root:
            assert said[:1] == [self.rule], (
                f"expected {self.rule} first ({self.options}), got {said}"
            )
        else:
            assert self.rule in said, f"expected {self.rule} ({self.options}), got {said}"


def quiet(**options: Any) -> Expect:
    return Expect(None, options=options)


def fires(rule: str, **options: Any) -> Expect:
    return Expect(rule, options=options)


def only(rule: str, **options: Any) -> Expect:
    return Expect(rule, alone=True, options=options)


def first(rule: str, **options: Any) -> Expect:
    """*rule* is the root cause: the first of what the oracles say (others may follow)."""
    return Expect(rule, root=True, options=options)


Phase = tuple[Sequence[Step], Expect]


def case(rules: str | tuple[str, ...], name: str, *parts: Sequence[Step] | Expect) -> Any:
    """One table row: ``steps, expect[, steps, expect ...]``, marked with *rules* and with
    the id ``"<first rule>-<name>"``."""
    rules = (rules,) if isinstance(rules, str) else rules
    steps, expects = parts[0::2], parts[1::2]
    if len(steps) != len(expects) or not all(isinstance(e, Expect) for e in expects):
        raise TypeError(f"case {name!r}: give steps, expect pairs, got {parts!r}")
    phases = list(zip(steps, expects, strict=True))
    return pytest.param(phases, marks=pytest.mark.rule(*rules), id=f"{rules[0]}-{name}")


def play(phases: Sequence[Phase]) -> None:
    """Run one case's phases on one fresh Script, checking after each."""
    script = Script()
    for steps, expect in phases:
        for step in steps:
            step(script)
        expect.check(script)
