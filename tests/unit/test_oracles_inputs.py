"""The oracle on bad input (R21, ``oracles/inputs.py``) on hand-written histories: a call
with a wrong argument must have raised ``TypeError`` at the call; raised, the other
oracles take it as never made."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit._history_script import case, do, fires, play, quiet

BAD = TypeError("request id 1 is not a str")

CASES = [
    case("R21", "quiet-when-a-bad-id-raised-type-error",
         [do.call("save_async", 1, ([0], False), error=BAD), do.call("load_async", b"a", error=BAD),
          do.call("cleanup_receiver", None, error=BAD), do.call("cancel_sender", (1,), error=BAD)],
         quiet(quiescent=True)),
    case("R21", "fires-when-a-bad-id-returned-normally",
         [do.call("load_async", 1)],
         fires("R21")),
    case("R21", "fires-when-a-bad-is-final-returned-normally",
         [do.call("save_async", "r", ([0], 1))],
         fires("R21")),
    case("R21", "fires-when-a-bad-id-raised-something-else",
         [do.call("cancel_sender", None, error=AttributeError("'NoneType' has no 'split'"))],
         fires("R21")),
    case("R21", "quiet-when-a-raised-bad-save-left-the-stream-alone",
         # the rejected save (is_final=1) is never made: the stream is [0], [1]
         [do.save("r", [0]), do.call("save_async", "r", (["x"], 1), error=BAD),
          do.save("r", [1], True), do.build("r", [0]), do.put("r_1_0", [0]),
          do.build("r", [1], True), do.put("r_1_1", [1], True)],
         quiet(quiescent=True)),
    # the rejected save was built and put anyway: a build of nothing saved (R4 here; in a
    # generated world the counterfactual without the wrong call names R21 the root)
    case(("R21", "R4"), "a-raised-bad-save-that-was-put-anyway-is-a-chunk-too-many",
         [do.save("r", [0]), do.call("save_async", "r", (["x"], 1), error=BAD),
          do.save("r", [1], True), do.build("r", [0]), do.put("r_1_0", [0]),
          do.build("r", ["x"]), do.put("r_1_1", ["x"]), do.build("r", [1], True),
          do.put("r_1_2", [1], True)],
         fires("R4")),
    case(("R21", "R19"), "after-stop-a-bad-call-is-the-stopping-oracles",
         [do.stop(), do.call("save_async", 1, ([0], False), error=RuntimeError("stopped"))],
         quiet()),
]  # fmt: skip


@pytest.mark.parametrize("phases", CASES)
def test_inputs_rule(phases: Any) -> None:
    play(phases)
