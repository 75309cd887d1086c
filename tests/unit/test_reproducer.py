"""The reproducer family: one format, every driver's kind registered, bad strings named."""

from __future__ import annotations

import io

import pytest

from chunk_adapter.errors import InvalidValue
from chunk_adapter.reproducer import Kind, forms, kinds, parse, register
from chunk_adapter.verify.replay import KINDS, replay_string

OLD_STRINGS = [  # as earlier versions printed them (users paste these from CI logs)
    ("stress:put failures 30%:0", "stress", ("put failures 30%", "0")),
    ("stateful:ci:steps.eNorSS0qyUjVTUosAQ", "stateful", ("ci", "steps.eNorSS0qyUjVTUosAQ")),
    ("stateful:quick:AXicY2BgYAQAAA0ABQ==", "stateful", ("quick", "AXicY2BgYAQAAA0ABQ==")),
    ("explore:q5-cleanup-inflight-get:1:9:a3b2c4", "explore",
     ("q5-cleanup-inflight-get", "1:9:a3b2c4")),
]  # fmt: skip


def test_replay_knows_every_drivers_kind() -> None:
    assert {k.name for k in KINDS} == {"explore", "sim", "stateful", "stress"}
    assert set(kinds()) >= {"explore", "stateful", "stress"}
    assert forms()[:5] == [
        "explore:SCENARIO:SCHEDULE",
        "sim:WORLD:SCHEDULE",
        "stateful:PROFILE:steps.DATA",
        "stateful:PROFILE:BLOB",
        "stress:SCENARIO:SEED",
    ]


@pytest.mark.parametrize(("string", "kind", "fields"), OLD_STRINGS)
def test_strings_of_earlier_versions_still_parse(
    string: str, kind: str, fields: tuple[str, ...]
) -> None:
    got, parsed = parse(string)
    assert (got.name, parsed) == (kind, fields)
    assert got.format(*parsed) == string  # and formatting gives them back


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_each_kind_round_trips_through_its_command(kind: Kind) -> None:
    fields = ["name with spaces", "another"]
    fields[kind.rest] = "the free field: it may hold colons:"
    command = kind.command(*fields, adapter_spec="pkg.mod:make", env="X=1 ")
    assert command.startswith("X=1 chunk-adapter replay '") and command.endswith(
        "' --adapter pkg.mod:make"
    )
    string = command.split("'")[1]
    assert parse(string) == (kind, tuple(fields))


def test_every_stress_scenario_has_a_reproducer_that_reads_back() -> None:
    """The stop scenarios are named ``stop: idle``...: a name holding ':' (before, writing
    their reproducer raised, and a confirmed stop finding crashed the stress stage)."""
    from chunk_adapter.stress.suite import scenarios

    stress = kinds()["stress"]
    names = [name for name, _, _ in scenarios(0)]
    assert any(":" in name for name in names)
    for name in names:
        assert parse(stress.format(name, 7)) == (stress, (name, "7"))


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("nonsense", "no KIND: prefix"),
        ("strss:blocked work:0", "no reproducer kind 'strss'"),
        ("stress:blocked work", "stress needs 2 fields: SCENARIO, SEED"),
        ("explore::abc", "explore needs 2 fields"),
        ("stateful:ci:", "stateful needs 2 fields"),
    ],
)
def test_a_bad_string_is_named_with_the_accepted_forms(bad: str, why: str) -> None:
    with pytest.raises(InvalidValue) as info:
        parse(bad)
    message = str(info.value)
    assert repr(bad) in message and why in message
    for form in forms():
        assert form in message


def test_replay_refuses_a_bad_string_before_loading_the_adapter() -> None:
    with pytest.raises(InvalidValue, match="accepted forms"):
        replay_string("stress-blocked-0", "no.such.module:factory", io.StringIO())


def test_a_field_that_would_not_read_back_is_refused_when_formatted() -> None:
    stress = kinds()["stress"]
    with pytest.raises(InvalidValue, match="holds ':' \\(only SCENARIO may\\)"):
        stress.format("blocked work", "1:2")
    explore = kinds()["explore"]
    with pytest.raises(InvalidValue, match="holds ':' \\(only SCHEDULE may\\)"):
        explore.format("q1:x", "1:2")
    with pytest.raises(InvalidValue, match="2 fields"):
        stress.format("blocked work")


def test_two_kinds_of_one_name_are_refused() -> None:
    stress = kinds()["stress"]
    assert register(stress) is stress  # registering the same kind again is harmless
    with pytest.raises(InvalidValue, match="two reproducer kinds named 'stress'"):
        register(Kind("stress", ("X",), stress.replay))
