"""The pieces of a pasteable counterexample: steps parsed, shrunk, encoded, printed, capped.

Pure functions, no adapter: the stage's tests (test_stateful_stage.py) run a
printed counterexample with pytest against a broken and the reference adapter.
"""

from __future__ import annotations

import time

import pytest

from chunk_adapter.errors import InvalidValue
from chunk_adapter.stateful.counterexample import as_pytest, cap_lines, other_output, steps_of
from chunk_adapter.stateful.minimize import Step, decode, encode, minimize, parse

PRINTED = """\
Trying example: something
Falsifying example:
state = Conformance_missing_token_check()
state.poll()
state.save(final=False, kind='list', rid='a')
state.fail_puts(times=2)
state.teardown()

You can reproduce this example by temporarily adding @reproduce_failure('6.1', b'AX') as a dec
Traceback (most recent call last): from the adapter's log
"""


def test_steps_are_read_from_hypothesis_output_without_teardown() -> None:
    assert steps_of(PRINTED) == [
        "state.poll()",
        "state.save(final=False, kind='list', rid='a')",
        "state.fail_puts(times=2)",
    ]
    assert steps_of("no example here") == []


def test_a_step_round_trips_through_parse_and_the_replay_string() -> None:
    steps = [parse(line) for line in steps_of(PRINTED)]
    assert steps[1] == Step("save", (("final", False), ("kind", "list"), ("rid", "a")))
    assert [str(s) for s in steps] == steps_of(PRINTED)
    data = encode(steps)
    assert data.startswith("steps.") and ":" not in data and "'" not in data
    assert decode(data) == steps


@pytest.mark.parametrize(
    "line",
    [
        "__import__('os').system('true')",
        "state.save(rid=open('/etc/passwd').read())",
        "state.poll(1)",
        "other.poll()",
        "state.poll(",
    ],
)
def test_parse_accepts_only_rule_calls_with_literal_arguments(line: str) -> None:
    with pytest.raises(InvalidValue):
        parse(line)


def test_decode_rejects_what_encode_did_not_make() -> None:
    for data in ("AXicY3Bk", "steps.!!!", "steps." + "A" * 7):
        with pytest.raises(InvalidValue):
            decode(data)


def test_minimize_keeps_only_the_steps_the_failure_needs() -> None:
    """Fails when 'x' comes before 'y' somewhere: the minimum is those two, in order."""
    steps = [Step(name, ()) for name in "abxcdefyghx"]

    def fails(candidate: list[Step]) -> bool:
        names = [s.name for s in candidate]
        return "x" in names and "y" in names[names.index("x") :]

    small = minimize(steps, fails, time.monotonic() + 10)
    assert [s.name for s in small.steps] == ["x", "y"] and small.complete


def test_minimize_stops_at_its_deadline_with_what_it_has() -> None:
    steps = [Step(str(i), ()) for i in range(40)]
    calls = []

    def fails(candidate: list[Step]) -> bool:
        calls.append(len(candidate))
        return True

    cut = minimize(steps, fails, time.monotonic() - 1)
    assert cut.steps == steps and not cut.complete
    assert calls == []


def test_the_printed_test_imports_the_users_factory_and_runs_every_step() -> None:
    code = as_pytest("my_pkg.adapters:make_adapter", ["state.poll()", "state.stop()"],
                     liveness_timeout=10.0)  # fmt: skip
    compile(code, "test_counterexample.py", "exec")
    assert "from my_pkg.adapters import make_adapter as factory" in code
    assert "make_machine(factory, liveness_timeout=10.0, put_tries=3)" in code
    assert code.index("state.poll()") < code.index("state.stop()") < code.index("teardown")
    dotted = as_pytest("my_pkg.adapters:Maker.build", [], liveness_timeout=5.0)
    compile(dotted, "test_counterexample.py", "exec")
    assert "load_factory('my_pkg.adapters:Maker.build')" in dotted


def test_captured_output_is_capped_to_its_first_and_last_lines() -> None:
    text = "\n".join(f"line {i}" for i in range(1000))
    capped = cap_lines(text, head=3, tail=2).splitlines()
    assert capped == ["line 0", "line 1", "line 2", "… 995 lines omitted", "line 998", "line 999"]
    assert cap_lines("a\nb", head=3, tail=2) == "a\nb"


def test_other_output_drops_hypothesis_report_and_keeps_the_adapters_lines() -> None:
    kept = other_output(PRINTED)
    assert "Traceback (most recent call last): from the adapter's log" in kept
    assert "state." not in kept and "reproduce_failure" not in kept
