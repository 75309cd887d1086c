"""The oracles on hand-written histories, the sender's rules: each fires on a violation
and stays quiet otherwise. One table row a case, its id naming the rule; the rows
are scripted with :mod:`tests.unit._history_script` (``do.*`` steps, then what the
oracles must say).
"""

from __future__ import annotations

from typing import Any

import pytest

from chunk_adapter.errors import AdapterStopped
from chunk_adapter.oracles.records import UNCOPYABLE
from tests.unit._history_script import case, do, fires, first, only, play, quiet

FAIL = {"fail": True}  # a build or put that raised
QUIESCENT = {"quiescent": True}
NAN = float("nan")  # a payload not equal to itself


class NoTruth:
    def __bool__(self) -> bool:
        raise ValueError("the truth value is ambiguous")


class Ambiguous:
    """A value whose ``==`` answers neither True nor False (like a numpy array's)."""

    def __eq__(self, other: object) -> Any:
        return NoTruth()

    __hash__ = None  # type: ignore[assignment]


CASES = [
    case("R9", "quiet-on-contiguous-ids-and-stream-reuse",
         [do.sent("r", [("a", False), ("b", True)]), do.sent("r", [("c", True)])],
         quiet(**QUIESCENT)),
    case("R9", "fires-on-a-gap",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"), do.put("r_1_0", "a"),
          do.build("r", "b"), do.put("r_1_2", "b")],
         fires("R9")),
    case(("R9", "R10"), "fires-when-a-failed-put-used-up-an-id",
         [do.save("r", "a"), do.build("r", "a"), do.put("r_1_0", "a", **FAIL),
          do.put("r_1_1", "a")],
         fires("R9")),
    case("R2", "fires-on-a-malformed-wire-value",
         [do.save("r", "a"), do.build("r", "a"), do.put("r_1_0", None, value={"data": "a"})],
         fires("R2")),
    case("R5", "fires-when-chunks-are-put-out-of-save-order",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "b"), do.put("r_1_0", "b"),
          do.build("r", "a"), do.put("r_1_1", "a")],
         fires("R5")),
    case(("R5", "R10"), "quiet-when-equal-saves-leave-it-open-which-one-failed",
         # two saves of equal data: the first's three tries failed and it was dropped,
         # the second was put under the same id. Aligning the put with the first save
         # left the second "never put" (a false alarm on a correct relay, seed 216 of
         # the false-alarm runs): every reading of the events is tried
         [do.save("r", [0, 3]), do.build("r", [0, 3]), do.put("r_1_0", [0, 3], **FAIL),
          do.put("r_1_0", [0, 3], **FAIL), do.put("r_1_0", [0, 3], **FAIL),
          do.save("r", [0, 3]), do.save("r", "end", True), do.build("r", [0, 3]),
          do.put("r_1_0", [0, 3]), do.build("r", "end", True), do.put("r_1_1", "end", True)],
         quiet(put_tries=3, **QUIESCENT), [], quiet(put_tries=None, **QUIESCENT)),
    case(("R5", "R10"), "quiet-when-equal-saves-were-both-put-after-a-retry",
         # the first save's put failed once and then succeeded: each save has its put
         [do.save("r", "x"), do.save("r", "x"), do.build("r", "x"),
          do.put("r_1_0", "x", **FAIL), do.put("r_1_0", "x"), do.build("r", "x"),
          do.put("r_1_1", "x"), do.save("r", "end", True), do.build("r", "end", True),
          do.put("r_1_2", "end", True)],
         quiet(put_tries=3, **QUIESCENT), [], quiet(put_tries=None, **QUIESCENT)),
    case("R5", "fires-when-one-of-equal-saves-is-dropped-with-no-reason",
         # a failed put that was retried and succeeded explains no drop of the other
         [do.save("r", "x"), do.save("r", "x"), do.build("r", "x"),
          do.put("r_1_0", "x", **FAIL), do.put("r_1_0", "x"), do.save("r", "end", True),
          do.build("r", "end", True), do.put("r_1_1", "end", True)],
         first("R5", put_tries=3)),
    case("R5", "fires-first-when-a-later-stream-overtakes-a-final-put-after-it",
         # the id reused at once: the next stream's first save overtook the final, which
         # was put after it. Not lost (R11): out of save order
         [do.save("r", "a"), do.save("r", "end", True), do.save("r", "b"),
          do.build("r", "a"), do.put("r_1_0", "a"), do.build("r", "b"), do.put("r_1_1", "b"),
          do.build("r", "end", True), do.put("r_1_2", "end", True)],
         first("R5")),
    case("R11", "fires-first-when-a-later-stream-is-put-and-the-final-never",
         [do.save("r", "a"), do.save("r", "end", True), do.save("r", "b"),
          do.build("r", "a"), do.put("r_1_0", "a"), do.build("r", "b"), do.put("r_1_1", "b")],
         first("R11")),
    case("R6", "fires-first-when-a-cancel-mark-outlives-the-final-it-was-for",
         # cancel, the final put (the mark ends there), then a new stream of the id: its
         # chunk dropped and its final put with None, as if the old mark still held
         [do.cancel("r"), do.save("r", "end", True), do.put("r_1_0", None, True),
          do.save("r", "b"), do.save("r", "end2", True), do.put("r_1_0", None, True)],
         first("R6")),
    case("R5", "fires-on-an-unexplained-drop",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "b"), do.put("r_1_0", "b")],
         only("R5")),
    case("R4", "fires-when-the-payload-is-not-built-from-the-snapshot",
         [do.save("r", ["a"]), do.build("r", ["a", "mutated"]), do.put("r_1_0", ["a", "mutated"])],
         fires("R4")),
    case(("R11", "R4"), "a-lost-final-is-r11-not-a-snapshot-fault-of-the-next-stream",
         # the final's one put failed and was not retried; the next stream's chunk then
         # belongs to that stream, not to a mutated snapshot of the first
         [do.save("r", "end", True), do.build("r", "end", True),
          do.put("r_1_0", "end", True, **FAIL), do.save("r", "b"), do.build("r", "b"),
          do.put("r_1_0", "b")],
         only("R11")),
    case(("R11", "R4"), "a-lost-final-is-r11-when-the-next-stream-is-a-final-alone",
         # the final was built and its put given up; the next stream's final, put under
         # the lost one's id, is that stream's, not a mutated snapshot of the first
         [do.save("r", "a"), do.build("r", "a"), do.put("r_1_0", "a"),
          do.save("r", "end", True), do.build("r", "end", True),
          do.put("r_1_1", "end", True, **FAIL), do.save("r", "next", True),
          do.build("r", "next", True), do.put("r_1_1", "next", True)],
         only("R11")),
    case("R4", "fires-at-the-build-given-a-mutated-object",
         # no put needed: the build was given what the program changed after the call
         [do.save("r", [1, [2]]), do.build("r", [1, [2, "mutated"]])],
         only("R4"),
         [do.put("r_1_0", [1, [2, "mutated"]]), do.save("r", [3]), do.build("r", [3]),
          do.put("r_1_1", [3])],
         only("R4")),
    case("R4", "quiet-at-a-build-when-a-save-could-not-be-copied-for-comparison",
         # the recorder stands UNCOPYABLE for what deepcopy refused: nothing to compare
         [do.save("r", UNCOPYABLE), do.build("r", "the object itself")],
         quiet()),
    case(("R11", "R6"), "quiet-on-a-cancelled-final-built-before-the-next-streams-final",
         # builds run ahead of the puts (a pipelined SAVE side): the first final was built,
         # then cancelled and put with None; the next stream's final follows
         [do.save("r", "x", True), do.build("r", "x", True), do.cancel("r"),
          do.save("r", "y", True), do.build("r", "y", True), do.put("r_1_0", None, True),
          do.put("r_1_0", "y", True)],
         quiet(**QUIESCENT)),
    case("R4", "quiet-at-a-build-of-values-whose-equality-cannot-say",
         [do.save("r", Ambiguous()), do.build("r", Ambiguous())],
         quiet()),
    case("R4", "quiet-at-a-build-of-an-equal-copy",
         [do.save("r", [1, {"k": bytearray(b"x")}]), do.build("r", [1, {"k": bytearray(b"x")}]),
          do.put("r_1_0", [1, {"k": bytearray(b"x")}])],
         quiet(**QUIESCENT)),
    case("R4", "quiet-without-builder-records-when-data-is-the-snapshot",
         [do.save("r", ["a"]), do.put("r_1_0", ["a"])],
         quiet(),
         [do.save("r", ["b"], True), do.put("r_1_1", ["b", "mutated"], True)],
         fires("R4")),
    case("R6", "quiet-on-a-cancelled-stream-with-a-none-final",
         [do.save("r", "a"), do.cancel("r"), do.save("r", "b"), do.save("r", "end", True),
          do.put("r_1_0", None, True)],
         quiet(**QUIESCENT)),
    case("R6", "fires-on-a-chunk-saved-after-cancel-and-put",
         [do.cancel("r"), do.save("r", "a"), do.build("r", "a"), do.put("r_1_0", "a")],
         fires("R6")),
    case("R6", "fires-on-a-final-saved-after-cancel-with-data",
         [do.cancel("r"), do.save("r", "end", True), do.build("r", "end", True),
          do.put("r_1_0", "end", True)],
         fires("R6")),
    case("R6", "allows-one-chunk-past-the-check-but-not-two",
         # the build began after the cancel: the one chunk in progress may still go
         [do.save("w", "p0"), do.save("w", "p1"), do.cancel("w"), do.build("w", "p0"),
          do.put("w_1_0", "p0")],
         quiet(),
         [do.build("w", "p1"), do.put("w_1_1", "p1")],
         fires("R6")),
    case("R7", "quiet-when-a-failed-build-drops-a-chunk-and-nones-the-final",
         [do.save("r", "a"), do.save("r", "end", True), do.build("r", "a", **FAIL),
          do.build("r", "end", True, **FAIL), do.put("r_1_0", None, True)],
         quiet(**QUIESCENT)),
    case("R7", "fires-on-a-put-without-a-successful-build",
         [do.save("r", "a"), do.build("r", "a", **FAIL), do.put("r_1_0", "a")],
         fires("R7")),
    case(("R6", "R7"), "a-cancel-applied-to-two-finals-is-r6",
         [do.cancel("r"), do.save("r", "e1", True), do.build("r", "e1", True),
          do.put("r_1_0", None, True), do.save("r", "e2", True), do.build("r", "e2", True),
          do.put("r_1_0", None, True)],
         only("R6")),
    case("R7", "fires-on-a-none-final-that-nothing-explains",
         [do.save("r", "end", True), do.build("r", "end", True), do.put("r_1_0", None, True)],
         fires("R7")),
    case("R8", "quiet-when-a-none-payload-is-skipped",
         [do.save("r", None), do.save("r", "b"), do.build("r", None), do.build("r", "b"),
          do.put("r_1_0", "b")],
         quiet(**QUIESCENT)),
    case("R8", "fires-on-a-non-final-put-with-none",
         [do.save("r", None), do.build("r", None), do.put("r_1_0", None)],
         fires("R8")),
    # a final is put whatever its payload: one whose build gave None and that is never
    # put is R8 (its root), one whose build raised R7, R11 their consequence; a final
    # never built stays R11
    case("R8", "fires-first-on-a-final-built-to-none-and-never-put",
         [do.save("r", "a"), do.save("r", None, True), do.build("r", "a"), do.put("r_1_0", "a"),
          do.build("r", None, True)],
         first("R8", **QUIESCENT)),
    case("R7", "fires-first-on-a-final-whose-build-raised-and-never-put",
         [do.save("r", "a"), do.save("r", "end", True), do.build("r", "a"), do.put("r_1_0", "a"),
          do.build("r", "end", True, **FAIL)],
         first("R7", **QUIESCENT)),
    # a final put a second time (a retry of a put that succeeded) reads as what it is, not
    # as the next stream's final put with the wrong data (R6: a cancel used up)
    case("R11", "fires-first-on-a-final-put-twice",
         # the second put of r_1_0 began while the first was still in flight
         [do.cancel("r"), do.save("r", "e1", True), do.start("p1"), do.save("r", "e2", True),
          do.put("r_1_0", None, True), do.put("r_1_0", None, True, begin="p1"),
          do.build("r", "e2", True), do.put("r_1_0", "e2", True)],
         first("R11")),
    case("R11", "fires-first-on-a-final-put-twice-the-stream-after-it-put-too",
         # the second put of r_1_0 came after the first returned; the next stream's final
         # is put after it, which the "next stream's final" reading leaves unexplained
         [do.cancel("r"), do.save("r", "e1", True), do.put("r_1_0", None, True),
          do.save("r", "e2", True), do.put("r_1_0", None, True), do.build("r", "e2", True),
          do.put("r_1_0", "e2", True)],
         first("R11")),
    case("R6", "quiet-on-two-cancelled-streams-each-put-with-none",
         [do.cancel("r"), do.save("r", "e1", True), do.put("r_1_0", None, True),
          do.cancel("r"), do.save("r", "e2", True), do.put("r_1_0", None, True)],
         quiet(**QUIESCENT)),
    case("R11", "a-final-never-built-nor-put-stays-r11",
         [do.save("r", "a"), do.save("r", None, True), do.build("r", "a"), do.put("r_1_0", "a")],
         first("R11", **QUIESCENT)),
    case("R10", "quiet-on-a-drop-after-all-tries",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 3, do.build("r", "b"), do.put("r_1_0", "b")],
         quiet(put_tries=3)),
    case("R10", "fires-on-a-drop-after-too-few-tries",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"),
          do.put("r_1_0", "a", **FAIL), do.build("r", "b"), do.put("r_1_0", "b")],
         only("R10", put_tries=3),
         [],
         quiet(put_tries=None)),
    case("R10", "fires-when-a-final's-failed-tries-fill-up-the-dropped-chunks'-count",
         # a's 3 tries and b's 1 are 4 of the 6 two drops need; the final's 5 failed tries
         # are no tries of a or b (pooled with them, 9 looked enough)
         [do.save("r", "a"), do.save("r", "b"), do.save("r", "end", True),
          do.build("r", "a"), *[do.put("r_1_0", "a", **FAIL)] * 3, do.build("r", "b"),
          do.put("r_1_0", "b", **FAIL), do.build("r", "end", True),
          *[do.put("r_1_0", "end", True, **FAIL)] * 5, do.put("r_1_0", "end", True)],
         only("R10", put_tries=3, **QUIESCENT)),
    case("R10", "fires-when-a-dropped-chunk's-count-carries-over-to-the-next",
         # 6 failed tries for two drops, but b got 1 of its own: a's 3 and c's 2 are not b's
         [do.save("r", "a"), do.save("r", "b"), do.save("r", "c"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 3, do.build("r", "b"),
          do.put("r_1_0", "b", **FAIL), do.build("r", "c"),
          *[do.put("r_1_0", "c", **FAIL)] * 2, do.put("r_1_0", "c")],
         only("R10", put_tries=3),
         [],
         # put_tries unknown: a's drop after 3 tries of its own shows the adapter's tries
         only("R10", put_tries=None)),
    case("R10", "quiet-when-every-dropped-chunk-got-as-many-tries-of-its-own",
         [do.save("r", "a"), do.save("r", "b"), do.save("r", "c"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.build("r", "b"),
          *[do.put("r_1_0", "b", **FAIL)] * 2, do.build("r", "c"), do.put("r_1_0", "c")],
         quiet(put_tries=None), [], quiet(put_tries=2)),
    case("R10", "quiet-on-a-payload-not-equal-to-itself-tried-as-often",
         # nan != nan: the failed puts carry the very object, and are counted for it
         [do.save("r", NAN), do.save("r", "b"), do.save("r", "c"),
          *[do.put("r_1_0", NAN, **FAIL)] * 3, *[do.put("r_1_0", "b", **FAIL)] * 3,
          do.put("r_1_0", "c")],
         quiet(put_tries=3), [], quiet(put_tries=None)),
    case("R10", "quiet-when-a-chunk-is-refused-for-good-after-one-try",
         # R25: a put refused for good (a permanent error) ends that chunk's tries at once
         [do.save("r", "a"), do.save("r", "b"), do.save("r", "c"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 3, do.build("r", "b"),
          do.put("r_1_0", "b", permanent=True, **FAIL), do.build("r", "c"),
          do.put("r_1_0", "c")],
         quiet(put_tries=None)),
    case("R10", "quiet-when-a-chunk-excused-otherwise-shares-a-dropped-chunk's-payload",
         # x's build returned what a's did, and x is excused (a later save of x failed to
         # build): whose failed puts "P" are cannot be said
         [do.save("r", "a"), do.save("r", "x"), do.save("r", "b"), do.save("r", "x"),
          do.save("r", "c"), do.build("r", "a", result="P"), *[do.put("r_1_0", "P", **FAIL)] * 2,
          do.build("r", "x", result="P"), *[do.put("r_1_0", "P", **FAIL)] * 2,
          do.build("r", "b", result="Q"), *[do.put("r_1_0", "Q", **FAIL)] * 2,
          do.build("r", "x", **FAIL), do.build("r", "c", result="C"), do.put("r_1_0", "C")],
         quiet(put_tries=None)),
    case("R10", "fires-when-the-chunk-put-next-got-as-many-tries-as-a-dropped-one",
         # the mirror of a drop after too few: a was dropped after 2 failed puts of its
         # own, so the adapter's tries are 2; b failed twice too and was put on a third
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.build("r", "b"),
          *[do.put("r_1_0", "b", **FAIL)] * 2, do.put("r_1_0", "b")],
         only("R10", put_tries=None), [], only("R10", put_tries=2)),
    case("R10", "fires-on-a-chunk-dropped-after-more-than-put-tries",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 4, do.build("r", "b"), do.put("r_1_0", "b")],
         only("R10", put_tries=3),
         [],
         quiet(put_tries=None)),  # one drop: its 4 tries may be the adapter's number
    case("R10", "quiet-when-the-chunk-put-next-got-fewer-tries-than-a-dropped-one",
         [do.save("r", "a"), do.save("r", "b"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.build("r", "b"),
          do.put("r_1_0", "b", **FAIL), do.put("r_1_0", "b")],
         quiet(put_tries=None), [], quiet(put_tries=2)),
    case("R10", "quiet-when-the-chunk-put-next-shares-the-dropped-chunk's-payload",
         # two saves of "a": which failed puts were whose cannot be said
         [do.save("r", "a"), do.save("r", "a"), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.put("r_1_0", "a")],
         quiet(put_tries=None)),
    case("R10", "quiet-when-a-final-put-next-got-as-many-tries",
         # a final is retried until it lands: its tries are no measure of the others'
         [do.save("r", "a"), do.save("r", "end", True), do.build("r", "a"),
          *[do.put("r_1_0", "a", **FAIL)] * 2, do.build("r", "end", True),
          *[do.put("r_1_0", "end", True, **FAIL)] * 4, do.put("r_1_0", "end", True)],
         quiet(put_tries=None, **QUIESCENT)),
    case("R10", "fires-on-a-non-final-tried-more-than-put-tries",
         [do.save("r", "a"), do.build("r", "a"), *[do.put("r_1_0", "a", **FAIL)] * 3,
          do.put("r_1_0", "a")],
         only("R10", put_tries=3)),
    case("R11", "fires-on-a-final-never-put-after-quiescence",
         [do.save("r", "end", True)], quiet(quiescent=False), [], only("R11", **QUIESCENT)),
    case("R11", "fires-on-a-final-put-that-was-never-saved",
         [do.save("r", "a"), do.build("r", "a", True), do.put("r_1_0", "a", True)],
         fires("R11")),
    case(("R11", "R23"), "a-stream-lost-whole-reads-r11-first-its-lost-chunks-after",
         [do.save("r", "a"), do.save("r", "b"), do.save("r", "end", True)],
         quiet(quiescent=False), [], first("R11", **QUIESCENT), [], fires("R23", **QUIESCENT)),
    case("R23", "fires-on-a-saved-chunk-never-put-after-quiescence",
         [do.save("r", "a")], quiet(quiescent=False), [], only("R23", **QUIESCENT)),
    case("R18", "fires-on-a-put-after-stop-returned",
         [do.save("r", "a"), do.build("r", "a"), do.stop()],
         quiet(),
         [do.put("r_1_0", "a")],
         fires("R18")),
    case("R19", "fires-when-save-after-stop-does-not-raise",
         [do.stop(), do.call("save_async", "r", ("a", False), error=AdapterStopped("stopped")),
          do.call("poll_ready", None, (), {})],
         quiet(),
         [do.call("load_async", "r")],
         only("R19")),
]  # fmt: skip


@pytest.mark.parametrize("phases", CASES)
def test_sender_rule(phases: Any) -> None:
    play(phases)


@pytest.mark.rule("R5", "R10", "R11")
def test_many_repeated_finals_leave_the_equal_data_branches_their_budget() -> None:
    """Twenty streams that are one final each, all put with the same key and value (a
    correct history), then equal-data saves whose first is dropped after its failed tries:
    reading the repeats both ways spent the budget of the equal-data branches, so the drop
    read as R10 and R5 past 16 such streams. A review's find."""
    from chunk_adapter.oracles import check
    from tests.unit._history_script import Script

    s = Script()
    for _ in range(20):
        s.save("r", "f", True)
        s.build("r", "f", True)
        s.put("r_1_0", "f", True)
    s.save("r", [0, 3])
    s.build("r", [0, 3])
    for _ in range(3):
        s.put("r_1_0", [0, 3], fail=True)
    s.save("r", [0, 3])
    s.save("r", "end", True)
    s.build("r", [0, 3])
    s.put("r_1_0", [0, 3])
    s.build("r", "end", True)
    s.put("r_1_1", "end", True)
    assert check(s.h, quiescent=True, put_tries=3) == []


@pytest.mark.rule("R7", "R8", "R11")
@pytest.mark.parametrize("fail", [False, True])
def test_a_lost_final_is_not_blamed_on_the_build_of_the_final_before_it(fail: bool) -> None:
    """Stream 1's final built to None (or failing) and put with None, stream 2's final
    built and never put: R11, not stream 1's build (R8, R7). A review's find."""
    from chunk_adapter.oracles import check
    from tests.unit._history_script import Script

    s = Script()
    s.save("r", None, True)
    s.save("r", "b", True)
    s.build("r", None, True, fail=fail)
    s.put("r_1_0", None, True)
    s.build("r", "b", True)
    found = check(s.h, quiescent=True, put_tries=None)
    assert [v.rule for v in found][:1] == ["R11"], found
