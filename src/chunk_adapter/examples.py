"""The contract's worked examples 2 and 3, runnable against any adapter factory.

``chunk-adapter demo`` prints them for the reference adapter; ``chunk-adapter
verify`` runs them first against the adapter under test. Every adapter call
is bounded, so a hanging adapter is reported, not waited for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .bed.stack import FACTORY, Bed
from .bed.waiting import Hang, call_bounded, stopping, wait_until
from .factory import AdapterFactory, AdapterLike
from .finding import Finding
from .oracles.records import RecordedAdapter
from .oracles.sender import check_sender, wire_problem
from .oracles.timeline import Timeline
from .oracles.violations import Violation, rules_in_order
from .rules import R1, R2, R4, R5, R6, R9, R11, R15

__all__ = [
    "ARRIVE",
    "CALL",
    "EXAMPLES",
    "EXAMPLE_RULES",
    "FACTORY",
    "ExampleOutcome",
    "example_2",
    "example_3",
    "expect_snapshots",
]

CALL = 2.0  # seconds any single adapter call may take here before it counts as a hang
ARRIVE = 10.0  # seconds for a chunk to arrive
FINAL_NEVER_CAME = (R11,)  # a final that never arrives: the stream never ends
EXAMPLE_RULES: dict[str, tuple[str, ...]] = {
    "example_2": (R1, R2, R4, R9, R15),
    "example_3": (R2, R6, R9, R11),
}
"""The rules each example checks, before it runs: what the rule table says an example
that failed on one rule did not decide for the others (not "no check in the stages run")."""


@dataclass
class ExampleOutcome:
    """What one example saw: *lines* to print, and a :class:`Violation` per *problem*.

    ``rules`` are the rules the example checks; :attr:`broken` those its problems
    break, as data (each problem's rule, then its consequences).
    """

    title: str
    rules: tuple[str, ...]
    ok: bool = True
    lines: list[str] = field(default_factory=list)
    problems: list[Violation] = field(default_factory=list)

    def expect(
        self, condition: bool, rule: str, problem: str, *, also: tuple[str, ...] = ()
    ) -> None:
        """Unless *condition*, record *problem* as a violation of *rule* (and *also*)."""
        if not condition:
            self.ok = False
            self.problems.append(Violation(rule, problem, also=also))

    def wire(self, request_id: str, got: list[Any]) -> None:
        """R2 for every value *request_id*'s receiver handed out: the wire value's shape
        (the sender oracle's test), judged before what the example itself expects, so a
        value with a key too many is read as the wire value it is, not as the example's
        rule (a cancelled final with ``"cancelled": True`` added is R2, not R6)."""
        for value in got:
            problem = wire_problem(value)
            self.expect(
                problem is None, R2, f"{request_id!r} got a value that is no wire value: {problem}"
            )

    def sender_first(self, bed: Bed) -> None:
        """When the example failed, put what the sender oracle reads in *bed*'s history
        first (:func:`sender_says`): a final put before its stream's earlier chunks is R5
        at the sender, the root of whatever the receiver then saw (a missing snapshot,
        a final that ends the stream early), not the example's own rule."""
        if not self.ok:
            self.problems[:0] = sender_says(bed)

    @property
    def broken(self) -> tuple[str, ...]:
        """The rules the problems break, in order, each once (none when ``ok``)."""
        return tuple(rules_in_order(self.problems, also=True))

    @property
    def finding(self) -> Finding | None:
        """What the example found (``None`` when ``ok``): the rules broken (else the rules
        it checks), every problem on one line, what it printed as the evidence."""
        if self.ok:
            return None
        problems = "; ".join(str(problem) for problem in self.problems)
        return Finding(self.broken or self.rules, "", problems, "\n".join(self.lines))


def _drain(rcv: AdapterLike, request_id: str, into: list[dict[str, Any]]) -> bool:
    into.extend(call_bounded(rcv.poll_ready, CALL, "poll_ready()").get(request_id, []))
    return bool(into) and bool(into[-1].get("finished"))


def _listed(values: Any) -> list[Any]:
    """What ``poll_ready`` gave a request, as a list (a malformed entry: nothing to judge)."""
    return values if isinstance(values, list) else []


def _await_final(rcv: AdapterLike, request_id: str, into: list[dict[str, Any]], bed: Bed) -> None:
    """Wait for *request_id*'s final (R11 when it never comes); a hang is first read by the
    sender oracle's checks of what was put (the wire value, R2; contiguous ids per stream,
    R9): a final put under a skipped id, or an id used twice, is why no final came, and
    the root (R11 its consequence), not a lost final."""
    try:
        wait_until(
            lambda: _drain(rcv, request_id, into),
            ARRIVE,
            f"the final chunk of {request_id!r}",
            rules=FINAL_NEVER_CAME,
        )
    except Hang as hang:
        if hang.call or hang.rules != FINAL_NEVER_CAME:
            raise  # a call that did not return (R3): not a final that never came
        found = sender_says(bed, request_id)
        roots = tuple(dict.fromkeys(v.rule for v in found))
        if not roots:
            raise
        why = "; ".join(v.message for v in found)
        raise Hang(
            hang.what, hang.seconds, call=hang.call, rules=(*roots, *hang.rules),
            state=f"{hang.state} (root {', '.join(roots)}: {why})",
        ) from None  # fmt: skip


def sender_says(bed: Bed, request_id: str | None = None) -> list[Violation]:
    """What the sender oracle reads in *bed*'s history — the sender's recorded calls and
    its puts: the wire value (R2), contiguous ids (R9), and each save put in order, once,
    or explained (R5–R8, the aligner) — for *request_id*, or every request. Read while
    the adapters may still run (not quiescent): a save not yet put is no violation."""
    timeline = Timeline.of(bed.history)
    found = check_sender(timeline, quiescent=False, put_tries=None)
    return [v for v in found if request_id is None or v.request_id == request_id]


def _pair(factory: AdapterFactory, bed: Bed, build: Any = None) -> tuple[AdapterLike, AdapterLike]:
    """A sender (stage 0, *build* as its ``build_payload``) and a receiver (stage 1) on
    *bed*, each factory call bounded by :data:`FACTORY` seconds; the sender's calls are
    recorded into the bed's history, for :func:`sender_says`."""
    what = "the factory (sender)"
    snd = bed.adapter(factory, bound=FACTORY, what=what, stage_id=0, build_payload=build)
    rcv = bed.adapter(factory, bound=FACTORY, what="the factory (receiver)", stage_id=1)
    return RecordedAdapter(snd, bed.history, "sender"), rcv


def _save(adapter: AdapterLike, request_id: str, obj: Any, is_final: bool) -> None:
    call_bounded(
        lambda: adapter.save_async(request_id, obj, is_final),
        CALL,
        f"save_async({request_id!r}, {obj!r}, {is_final})",
    )


def example_2(factory: AdapterFactory) -> ExampleOutcome:
    out = ExampleOutcome("Example 2 — snapshots, and poll_ready drains", EXAMPLE_RULES["example_2"])
    bed = Bed(record=True)
    conn = bed.recording
    snd, rcv = _pair(factory, bed)
    with stopping(snd, rcv, seconds=CALL):
        live = ["a"]
        call_bounded(lambda: rcv.load_async("v"), CALL, "load_async('v')")
        call_bounded(lambda: snd.save_async("v", live, False), CALL, "save_async('v', ...)")
        live.append("b")  # the scheduler keeps mutating its object
        call_bounded(lambda: snd.save_async("v", live, True), CALL, "save_async('v', ..., True)")
        live.append("c")
        got: list[dict[str, Any]] = []
        _await_final(rcv, "v", got, bed)
        shown = [c["data"] if wire_problem(c) is None else c for c in got]
        out.lines += [f"keys put:      {conn.puts}", f"'v' received:  {shown}"]
        out.wire("v", got)
        out.expect(
            conn.puts == ["v_0_0", "v_0_1"],
            R1,
            f"keys put {conn.puts}, not v_0_0, v_0_1 (R9: contiguous ids)",
            also=(R9,),
        )
        expect_snapshots(out, got)

        call_bounded(lambda: rcv.load_async("q"), CALL, "load_async('q')")
        call_bounded(lambda: snd.save_async("q", 1, False), CALL, "save_async('q', 1)")
        call_bounded(lambda: snd.save_async("q", 2, False), CALL, "save_async('q', 2)")
        wait_until(
            lambda: sum(op.op == "get" and op.outcome == "ok" for op in conn.ops()) >= 4,
            ARRIVE,
            "the gets of q's two chunks",
        )
        first: dict[str, Any] = {}
        # The value is fetched; committing follows at once. Collect until both are in.
        wait_until(
            lambda: _merge(first, call_bounded(rcv.poll_ready, CALL, "poll_ready()")) >= 2,
            ARRIVE,
            "q's two chunks in poll_ready",
        )
        second = call_bounded(rcv.poll_ready, CALL, "poll_ready()")
        call_bounded(lambda: snd.save_async("q", 3, True), CALL, "save_async('q', 3, True)")
        third: list[dict[str, Any]] = []
        _await_final(rcv, "q", third, bed)
        out.lines += [
            f"poll_ready():  {first}",
            f"poll_ready():  {second}",
            f"poll_ready():  {{'q': {third}}}",
        ]
        handed = [v for d in (first, second) for v in _listed(d.get("q"))] + third
        out.wire("q", handed)
        want = [{"data": 1, "finished": False}, {"data": 2, "finished": False}]
        out.expect(first == {"q": want}, R15, f"q's chunks came as {first}, expected {want}")
        out.expect(second == {}, R15, f"a second poll_ready with nothing new gave {second}")
        out.expect(
            third == [{"data": 3, "finished": True}],
            R2,
            f"q's final came as {third}, expected [{{'data': 3, 'finished': True}}]",
        )
        out.sender_first(bed)
    return out


def expect_snapshots(out: ExampleOutcome, got: list[dict[str, Any]]) -> None:
    """Example 2's 'v': the chunks handed out are the snapshots ['a'] then ['a', 'b'] (R4),
    each handed out once (R15). R4 judges each chunk once: one handed out again (a
    ``poll_ready`` without the swap) is R15's doing, not a wrong snapshot."""
    distinct = [c for i, c in enumerate(got) if c not in got[:i]]
    out.expect(
        [c.get("data") for c in distinct] == [["a"], ["a", "b"]],
        R4,
        f"'v' received {distinct}, expected the snapshots ['a'] then ['a', 'b']",
    )
    out.expect(distinct == got, R15, f"'v' was handed out {got}: a chunk more than once")


def _merge(into: dict[str, Any], ready: dict[str, Any]) -> int:
    for request_id, chunks in ready.items():
        into.setdefault(request_id, []).extend(chunks)
    return sum(len(chunks) for chunks in into.values())


def example_3(factory: AdapterFactory) -> ExampleOutcome:
    """Example 3. A final that never comes is R11, or R6 when the cancel is why: the same
    example without its ``cancel_sender`` delivers the final (a counterfactual, as the
    generated worlds name a root cause: :mod:`~chunk_adapter.explore.stages.cause`)."""
    try:
        return _example_3(factory, cancel=True)
    except Hang as hang:
        if hang.rules != FINAL_NEVER_CAME:
            raise
        try:
            _example_3(factory, cancel=False)
        except Hang:
            raise hang from None  # no final without the cancel either: R11 stands
        raise Hang(
            hang.what,
            hang.seconds,
            call=hang.call,
            rules=(R6, *hang.rules),
            state=f"{hang.state} (root R6: the same example without the cancel_sender "
            "delivers its final; a cancelled final is put with data None)",
        ) from None


def _example_3(factory: AdapterFactory, *, cancel: bool) -> ExampleOutcome:
    out = ExampleOutcome("Example 3 — cancel while a build is blocked", EXAMPLE_RULES["example_3"])
    bed = Bed(record=True)
    conn = bed.recording
    builder = bed.builder(recorded=False)
    gate = builder.hold(predicate=lambda rid, snap, final: snap == "p0")
    snd, rcv = _pair(factory, bed, builder)
    with stopping(snd, rcv, seconds=CALL, first=bed.release_all):
        call_bounded(lambda: rcv.load_async("w"), CALL, "load_async('w')")
        call_bounded(lambda: snd.save_async("w", "p0", False), CALL, "save_async('w', 'p0')")
        if not gate.wait_started(ARRIVE):
            out.expect(False, R5, "the build of 'p0' never started")
            return out
        for part in ("p1", "p2", "p3"):
            _save(snd, "w", part, False)
        call_bounded(lambda: snd.save_async("w", "end", True), CALL, "save_async('w', 'end', True)")
        if cancel:
            call_bounded(lambda: snd.cancel_sender("w"), CALL, "cancel_sender('w')")
        gate.release()
        got: list[dict[str, Any]] = []
        _await_final(rcv, "w", got, bed)
    if not cancel:  # the counterfactual asks only whether the final came
        return out
    out.lines += [f"keys put:      {conn.puts}", f"'w' received:  {got}"]
    out.wire("w", got)
    both = [
        (["w_0_0", "w_0_1"], [{"data": "p0", "finished": False}, {"data": None, "finished": True}]),
        (["w_0_0"], [{"data": None, "finished": True}]),
    ]
    out.expect(
        (conn.puts, got) in both,
        R6,
        f"keys {conn.puts} and chunks {got} are neither outcome the contract allows",
    )
    out.sender_first(bed)
    return out


EXAMPLES: tuple[Callable[[AdapterFactory], ExampleOutcome], ...] = (example_2, example_3)
