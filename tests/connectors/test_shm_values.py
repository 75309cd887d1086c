"""SharedMemoryConnector: values and keys — round trip, consume, key names, serializers,
and what it rejects.

Rules: a connector's get returns what was put (R2); a put that raised stored
nothing (R10).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from chunk_adapter.connectors.serialization import SerializationError, Serializer
from chunk_adapter.connectors.shm import NAME_MAX, SharedMemoryConnector
from chunk_adapter.errors import ConnectorError, InvalidType, InvalidValue
from tests.connectors._shm import linux_only, segment_bytes

VALUES: list[Any] = [
    None,
    0,
    "text",
    b"\x00\xff" * 5,
    [1, [2, [3]]],
    {"nested": {"a": (1, 2)}, "set": {1, 2}},
    b"x" * (1 << 20),
]


@pytest.mark.rule("R2")
@pytest.mark.parametrize("data", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip_returns_an_equal_value_and_consumes_it(shm_namespace: str, data: Any) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        value = {"data": data, "finished": False}
        conn.put("r_0_0", value)
        assert conn.get("r_0_0") == value
        assert conn.get("r_0_0") is None, "get must consume: the second get finds nothing"
        assert conn.segments() == [], "a consumed segment is unlinked"


@pytest.mark.rule("R2")
def test_get_of_a_missing_key_is_none(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        assert conn.get("never_put") is None


@pytest.mark.rule("R2")
def test_two_connectors_in_one_namespace_share_values_others_do_not(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace) as a,
        SharedMemoryConnector(shm_namespace) as b,
        SharedMemoryConnector(shm_namespace + "x") as other,
    ):
        a.put("k", {"data": 1, "finished": True})
        assert other.get("k") is None
        assert b.get("k") == {"data": 1, "finished": True}


@pytest.mark.rule("R2")
@pytest.mark.parametrize(
    "key",
    ["", "a/b/../c", "ключ_1_0", "\udcff\ud800", "*?[]\\.", "x" * 10_000, "a.b", "\x00nul"],
    ids=["empty", "slashes", "unicode", "surrogates", "glob", "long", "dot", "nul"],
)
def test_any_string_key_maps_to_a_short_safe_name(shm_namespace: str, key: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        name = conn.segment_name(key)
        assert len(name) <= NAME_MAX
        assert name.startswith(shm_namespace + ".")
        assert all(c.isalnum() or c in "._-" for c in name), name
        conn.put(key, {"data": key, "finished": False})
        assert conn.get(key) == {"data": key, "finished": False}


def test_distinct_keys_get_distinct_names() -> None:
    conn = SharedMemoryConnector("ns")
    names = {conn.segment_name(f"req{i}_1_{j}") for i in range(200) for j in range(50)}
    assert len(names) == 200 * 50


@pytest.mark.rule("R10")
@pytest.mark.parametrize(
    "bad", [lambda: 1, threading.Lock(), (x for x in [1])], ids=["lambda", "lock", "generator"]
)
def test_an_unserialisable_value_fails_the_put_clearly_and_stores_nothing(
    shm_namespace: str, bad: Any
) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        with pytest.raises(SerializationError) as info:
            conn.put("bad_0_3", {"data": bad, "finished": False})
        assert isinstance(info.value, ConnectorError)
        message = str(info.value)
        assert "'bad_0_3'" in message and "nothing was stored" in message
        assert "serializer=" in message, "the message names the fix"
        assert conn.get("bad_0_3") is None
        assert conn.segments() == []
        assert conn.pending() == 0


@linux_only
def test_a_pluggable_serializer_is_used_on_both_sides(shm_namespace: str) -> None:
    as_json = Serializer(dumps=lambda v: json.dumps(v).encode(), loads=json.loads, name="json")
    with (
        SharedMemoryConnector(shm_namespace, serializer=as_json) as a,
        SharedMemoryConnector(shm_namespace, serializer=(json.dumps, json.loads)) as b,
    ):
        a.put("k", {"data": [1, "x"], "finished": True})
        assert b'{"data": [1, "x"]' in segment_bytes(a.segment_name("k")), "stored as JSON"
        assert b.get("k") == {"data": [1, "x"], "finished": True}
        with pytest.raises(SerializationError, match="json serializer"):
            a.put("k2", {"data": {1, 2}, "finished": True})  # sets are not JSON


def test_a_serializer_that_is_not_a_pair_is_rejected_at_construction(shm_namespace: str) -> None:
    with pytest.raises(InvalidType, match="serializer must be"):
        SharedMemoryConnector(shm_namespace, serializer="pickle")


def test_a_dumps_that_returns_no_bytes_fails_the_put(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace, serializer=(lambda v: 42, lambda b: b)) as conn:
        with pytest.raises(SerializationError, match="not bytes"):
            conn.put("k", {"data": 1, "finished": True})
        assert conn.segments() == []


@pytest.mark.parametrize("namespace", ["", "a/b", "a.b", "x" * 300, "sp ace"])
def test_a_bad_namespace_is_rejected_with_the_rule(namespace: str) -> None:
    with pytest.raises(InvalidValue, match=r"namespace must be 1-\d+ characters"):
        SharedMemoryConnector(namespace)


def test_a_key_that_is_not_a_str_is_a_type_error(shm_namespace: str) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        with pytest.raises(InvalidType, match="key is a str"):
            conn.put(7, {"data": 1, "finished": True})  # type: ignore[arg-type]
        with pytest.raises(InvalidType, match="key is a str"):
            conn.get(b"k")  # type: ignore[arg-type]
