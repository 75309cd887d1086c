"""The oracles on hand-written histories, the receiver's rules: each fires on a violation
and stays quiet otherwise. One table row a case, its id naming the rule; the rows
are scripted with :mod:`tests.unit._history_script` (``do.*`` steps, then what the
oracles must say). Last, the table's own machinery: a row fails when its rule
does not fire.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit._history_script import Script, c, case, do, fires, first, only, play, quiet

NO_TRIES = {"put_tries": None}  # the receiver's rules only: no put-retry accounting

CASES = [
    case("R14", "quiet-on-a-registration-delivered-in-order",
         [do.load("r"), do.received("r", [c("a"), c("b", True)]), do.poll({"r": [c("a")]}),
          do.poll({"r": [c("b", True)]})],
         quiet(quiescent=True, **NO_TRIES)),
    case("R14", "fires-on-a-value-no-get-returned",
         [do.load("r"), do.poll({"r": [c("ghost")]})],
         only("R14")),
    case("R14", "fires-on-a-chunk-got-but-never-handed-out",
         [do.load("r"), do.received("r", [c("a")]), do.poll({})],
         quiet(quiescent=False), [], only("R14", quiescent=True)),
    case("R23", "fires-on-a-chunk-put-but-never-received",
         # the get came after the put landed, and found nothing
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0"), do.poll({})],
         fires("R23", quiescent=True, **NO_TRIES)),
    case(("R13", "R23"), "fires-when-the-registration-goes-past-a-chunk-put-but-never-got",
         # chunk 0 put; the receiver found it empty, then asked for chunk 1 (it
         # skipped 0): the next id only (R13) is the root of chunk 0 never received (R23)
         [do.load("r"), do.put("r_1_0", "a"), do.put("r_1_1", "b", True),
          do.get("r_1_0"), do.get("r_1_1", c("b", True)), do.poll({})],
         first("R13", quiescent=True, **NO_TRIES)),
    case("R23", "quiet-on-r13-while-the-registration-still-asks-for-the-chunk-it-misses",
         # the same, the receiver asking for chunk 0 only: never received, nothing skipped
         [do.load("r"), do.put("r_1_0", "a"), do.put("r_1_1", "b", True),
          do.get("r_1_0"), do.poll({})],
         first("R23", quiescent=True, **NO_TRIES)),
    case(("R13", "R23"), "fires-first-when-a-failed-get-is-never-tried-again",
         # the get of chunk 0 failed and the registration never asked again: a failed get
         # is retried later (R13), the root of chunk 0 never received (R23)
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0"), do.get("r_1_0", fail=True),
          do.poll({})],
         first("R13", quiescent=True, **NO_TRIES)),
    case("R23", "a-failed-get-tried-again-leaves-r23",
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", fail=True), do.get("r_1_0"),
          do.poll({})],
         first("R23", quiescent=True, **NO_TRIES)),
    case(("R1", "R23"), "fires-when-sender-and-receiver-keys-disagree-on-the-stage",
         # put under stage 2, read under stage 1, nothing ever put under 1: the keys
         # disagree (R1), the root of the chunk never received (R23)
         [do.load("r"), do.put("r_2_0", "a", True), do.get("r_1_0"), do.poll({})],
         first("R1", quiescent=True, **NO_TRIES)),
    case("R15", "fires-on-an-empty-list",
         [do.load("r"), do.poll({"r": []})],
         fires("R15")),
    case("R15", "fires-on-a-second-hand-out",
         [do.load("r"), do.received("r", [c("a")]), do.poll({"r": [c("a")]}),
          do.poll({"r": [c("a")]})],
         fires("R15")),
    case("R13", "fires-on-a-get-past-the-final",
         [do.load("r"), do.received("r", [c("end", True)]), do.get("r_1_1")],
         fires("R13", **NO_TRIES)),
    case("R13", "quiet-after-a-new-registration",
         [do.load("r"), do.received("r", [c("end", True)]), do.cleanup("r"), do.load("r"),
          do.get("r_1_0")],
         quiet(**NO_TRIES)),
    case("R13", "quiet-when-a-replaced-registrations-follower-gets-last",
         # a follower per registration (two get threads): the new registration's follower
         # finds nothing, then the old one, whose token was read before the cleanup, gets
         # the final (discarded), then the new one gets it; the old follower's get is the
         # cleaned-up registration's (the false-alarm runs' seed 420, aio_followers)
         [do.load("r"), do.cleanup("r"), do.load("r"), do.get("r_1_0", thread="follower-2"),
          do.put("r_1_0", "new", True), do.get("r_1_0", c("new", True), thread="follower-1"),
          do.get("r_1_0", c("new", True), thread="follower-2"), do.poll({"r": [c("new", True)]})],
         quiet(quiescent=True, **NO_TRIES)),
    case("R13", "fires-on-a-get-past-the-final-with-two-get-threads",
         # the same two threads, no cleanup: nothing excuses the second get
         [do.load("r"), do.put("r_1_0", "end", True),
          do.get("r_1_0", c("end", True), thread="fetch-1"),
          do.get("r_1_0", c("end", True), thread="fetch-2")],
         first("R13", **NO_TRIES)),
    case("R16", "fires-on-a-hand-out-after-cleanup",
         [do.load("r"), do.received("r", [c("a")]), do.cleanup("r"), do.poll({"r": [c("a")]})],
         only("R16", **NO_TRIES)),
    case("R16", "fires-on-a-stale-get-crossing-cleanup-and-load",
         # the get began under the first registration; discarded, it is fine
         [do.load("r"), do.put("r_1_0", "a"), do.start("in flight"), do.cleanup("r"),
          do.load("r"), do.get("r_1_0", c("a"), begin="in flight")],
         quiet(**NO_TRIES),
         [do.poll({"r": [c("a")]})],
         only("R16", **NO_TRIES)),
    case(("R16", "R23"), "fires-on-a-get-whose-token-was-read-before-other-gets",
         # one RECV thread: b's registration read at a round's start, then a's get, then
         # b's get, after cleanup and a new load of b: it takes the new registration's
         # final on a consuming connector and discards it (stale_round_get)
         [do.load("a"), do.load("b"), do.get("b_1_0"), do.cleanup("b"), do.load("b"),
          do.put("b_1_0", "x", True), do.get("a_1_0"), do.get("b_1_0", c("x", True)),
          do.get("b_1_0"), do.poll({})],
         first("R16", quiescent=True, **NO_TRIES)),
    case("R16", "quiet-when-a-get-after-the-thread's-other-gets-is-handed-out",
         # the same gets, the token read right before b's get: the new registration's
         [do.load("a"), do.load("b"), do.get("b_1_0"), do.cleanup("b"), do.load("b"),
          do.put("b_1_0", "x", True), do.get("a_1_0"), do.get("b_1_0", c("x", True)),
          do.poll({"b": [c("x", True)]})],
         quiet(quiescent=True, **NO_TRIES)),
    case("R16", "quiet-when-another-thread-made-the-other-get",
         # several threads get (a pool of fetchers): a token may be read by one and used
         # by another, and only the request's own previous get bounds the read
         [do.load("a"), do.load("b"), do.get("b_1_0"), do.cleanup("b"), do.load("b"),
          do.put("b_1_0", "x", True), do.get("a_1_0", thread="recv-2"),
          do.get("b_1_0", c("x", True)), do.poll({})],
         quiet(quiescent=True, **NO_TRIES)),
    case("R16", "quiet-when-two-threads-of-one-name-made-the-gets",
         # two fetchers given one name are still two threads
         [do.load("a"), do.load("b"), do.get("b_1_0"), do.cleanup("b"), do.load("b"),
          do.put("b_1_0", "x", True), do.get("a_1_0", ident=2),
          do.get("b_1_0", c("x", True)), do.poll({})],
         quiet(quiescent=True, **NO_TRIES)),
    case("R16", "is-the-root-of-a-second-hand-out-when-a-stale-get-fetched-it",
         # the old registration's get is committed beside the new one's own get of the
         # same chunk: the copy handed out twice is the fence's failure (R15 its symptom)
         [do.load("r"), do.put("r_1_0", "a"), do.start("in flight"), do.cleanup("r"),
          do.load("r"), do.get("r_1_0", c("a"), begin="in flight"), do.get("r_1_0", c("a")),
          do.poll({"r": [c("a")]}), do.poll({"r": [c("a")]})],
         only("R16", **NO_TRIES)),
    case("R15", "is-the-root-of-a-second-hand-out-the-old-registration-had-handed-out",
         # the old registration got it and handed it out; the new one got it again and
         # poll_ready handed that one copy out twice: nothing crossed the fence
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]}),
          do.cleanup("r"), do.load("r"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]}),
          do.poll({"r": [c("a")]})],
         fires("R15", **NO_TRIES)),
    case("R15", "is-the-root-of-a-second-hand-out-when-the-old-get's-thread-went-on",
         # the old registration got it and never handed it out, but its thread got on with
         # other gets before the fence: that get was committed before cleanup_receiver (and
         # forgotten by it), so the copy handed out twice is poll_ready's
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.get("r_1_1"),
          do.cleanup("r"), do.load("r"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]}),
          do.poll({"r": [c("a")]})],
         only("R15", **NO_TRIES)),
    case("R16", "is-the-root-when-the-old-get's-thread-went-on-only-after-the-fence",
         # its next get began after cleanup_receiver: the commit may have come after it
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.cleanup("r"),
          do.get("x_1_0"), do.load("r"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]}),
          do.poll({"r": [c("a")]})],
         only("R16", **NO_TRIES)),
    case(("R16", "R13"), "a-stale-commit-is-the-root-of-the-gets-past-the-final-it-caused",
         # the old registration's chunk 0 was committed to the new one past the fence, which
         # then got chunk 1 (the final) and went on past it before the poll showed chunk 0
         [do.load("r"), do.put("r_1_0", "a"), do.put("r_1_1", "end"), do.get("r_1_0", c("a")),
          do.cleanup("r"), do.load("r"), do.get("r_1_1", c("end", True)), do.get("r_1_2"),
          do.poll({"r": [c("a"), c("end", True)]})],
         first("R16", **NO_TRIES)),
    case(("R14", "R16"), "a-value-the-registration-got-itself-handed-out-in-a-lost-chunk's-place",
         # on a connector that keeps values both registrations got the final; the new one
         # lost its chunk 0 (a poll_ready that copies and clears in two sections) and
         # handed out the final, once: its own get, out of id order, not a stale commit
         # (SplitPoll at simulate seed 0 read R16 before)
         [do.load("r"), do.put("r_1_0", "a"), do.put("r_1_1", "end", True),
          do.get("r_1_0", c("a")), do.get("r_1_1", c("end", True)), do.cleanup("r"), do.load("r"),
          do.get("r_1_0", c("a")), do.get("r_1_1", c("end", True)),
          do.poll({"r": [c("end", True)]})],
         first("R14", **NO_TRIES)),
    case(("R12", "R14"), "fires-when-a-second-load-async-starts-the-registration-over",
         # chunk 0 got, then a load_async while registered; the chain began again at 0
         # and the chunk got is lost
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.load("r"),
          do.get("r_1_0")],
         only("R12", quiescent=True, **NO_TRIES)),
    case(("R12", "R15"), "is-the-root-of-a-second-hand-out-after-a-second-load-async",
         # the chunk was handed out; the second load_async started over and it came again
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]}),
          do.load("r"), do.get("r_1_0", c("a")), do.poll({"r": [c("a")]})],
         only("R12", **NO_TRIES)),
    case(("R12", "R13"), "is-the-root-of-a-get-past-the-final-after-a-second-load-async",
         # the final was got; a load_async while registered made the receiver poll again
         [do.load("r"), do.received("r", [c("end", True)]), do.load("r"), do.get("r_1_1")],
         only("R12", **NO_TRIES)),
    case("R14", "a-chunk-got-and-lost-with-no-second-load-async-is-r14",
         [do.load("r"), do.put("r_1_0", "a"), do.get("r_1_0", c("a")), do.get("r_1_0")],
         only("R14", quiescent=True, **NO_TRIES)),
    case("R12", "fires-on-a-hand-out-for-a-request-never-registered",
         [do.poll({"r": [c("a")]})],
         only("R12")),
]  # fmt: skip


@pytest.mark.parametrize("phases", CASES)
def test_receiver_rule(phases: Any) -> None:
    play(phases)


def test_a_row_fails_when_the_oracles_do_not_say_what_it_expects() -> None:
    unfinished = [do.save("r", "a")]  # R23 once quiescent, nothing before
    with pytest.raises(AssertionError, match=r"expected R9 .*got \[\]"):
        play([(unfinished, fires("R9"))])
    with pytest.raises(AssertionError, match=r"expected no finding .*got \['R23'\]"):
        play([(unfinished, quiet(quiescent=True))])
    with pytest.raises(AssertionError, match=r"expected just R23 .*got \[\]"):
        play([(unfinished, only("R23"))])
    with pytest.raises(AttributeError, match="Script has no method 'sav'"):
        do.sav("r", "a")
    with pytest.raises(TypeError, match="give steps, expect pairs"):
        case("R9", "half-a-row", unfinished)


@pytest.mark.rule("R1", "R23")
def test_r1_a_put_of_another_hop_is_no_disagreement_of_keys() -> None:
    """A middle stage reads stage 1 (the sender wrote it) and writes stage 2, which nobody
    reads here: the chunk its registration awaits is late (R23), not misnamed (R1)."""
    script = Script()
    for step in (do.load("r"), do.put("r_2_0", "a", True), do.put("r_1_0", "a", True),
                 do.get("r_1_0"), do.poll({})):  # fmt: skip
        step(script)
    said = script.rules(quiescent=True, put_tries=None)
    assert "R1" not in said, said
