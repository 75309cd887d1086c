"""Issue 27 point 5: the default serializer stores the payloads pipelines move.

Before: the default (``safe-json``) refused numpy arrays and scalars, dates and
times, ``Decimal`` and dataclasses, so a pipeline's real payloads failed the put
(a permanent error: the adapter dropped those chunks), and a 100 MB payload
cost several copies. Now the default, ``SAFE`` (``safe-msgpack``), stores them
and gives back equal values of the same types, an array's bytes are copied once
on each side, and reading still never runs code: a dataclass is rebuilt only as
a class the reader has already imported, without its ``__init__``. The old
format stays available as ``SAFE_JSON``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import subprocess
import sys
import threading
import tracemalloc
from decimal import Decimal
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunk_adapter.connectors import (
    SAFE,
    SAFE_JSON,
    RedisConnector,
    SerializationError,
    SharedMemoryConnector,
)
from chunk_adapter.connectors._msgpack_frames import write
from chunk_adapter.connectors._safe_msgpack import ARRAY, DATACLASS, _big_int
from chunk_adapter.connectors.redis_server import RedisServer
from chunk_adapter.connectors.serialization import encode_value

try:
    import numpy as np
    from hypothesis.extra import numpy as hnp
except ImportError:  # the numpy tests skip; the rest still run
    np = None  # type: ignore[assignment]
needs_numpy = pytest.mark.skipif(np is None, reason="numpy is not installed")
CALLS: list[str] = []  # what a dataclass's __init__ / __post_init__ ran: must stay empty


@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    label: Any
    seen: Any = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        CALLS.append("Frozen.__post_init__")


class NotADataclass:
    def __init__(self) -> None:
        CALLS.append("NotADataclass.__init__")


# ------------------------------------------------------------------ equality
def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (nan equals nan; arrays by bytes)."""
    if type(a) is not type(b):
        return False
    if np is not None and isinstance(a, np.ndarray):
        return bool(
            a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        ) and bool(b.flags.writeable)
    if np is not None and isinstance(a, np.generic):
        return bool(a.dtype == b.dtype and a.tobytes() == b.tobytes())
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and str(a) == str(b))
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if isinstance(a, (dt.datetime, dt.time)):
        return repr(a) == repr(b) and a.fold == b.fold
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        fields = [f.name for f in dataclasses.fields(a)]
        return all(same(getattr(a, n), getattr(b, n)) for n in fields)
    return bool(a == b)


def round_trip(value: Any) -> Any:
    return SAFE.loads(bytes(SAFE.dumps(value)))


# --------------------------------------------------------------- strategies
offsets = st.timedeltas(min_value=dt.timedelta(hours=-23), max_value=dt.timedelta(hours=23))
zones = st.none() | st.builds(dt.timezone, offsets) | st.timezones()
hashable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_categories=[]))
    | st.binary()
    | st.decimals(allow_nan=False)
    | st.datetimes(timezones=zones)
    | st.dates()
    | st.timedeltas(),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)
leaves = (
    hashable
    | st.floats()
    | st.binary().map(bytearray)
    | st.decimals()
    | st.times(timezones=st.none() | st.builds(dt.timezone, offsets))
    | st.integers(min_value=2**64).flatmap(lambda n: st.sampled_from([n, -n]))
)
if np is not None:
    dtypes = (
        hnp.boolean_dtypes()
        | hnp.integer_dtypes(endianness="?")
        | hnp.unsigned_integer_dtypes(endianness="?")
        | hnp.floating_dtypes(endianness="?")
        | hnp.complex_number_dtypes(endianness="?")
    )
    arrays = hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    layouts = st.sampled_from(
        [lambda a: a, lambda a: a.T, lambda a: a[::2] if a.ndim else a, np.asfortranarray]
    )
    arrays = st.builds(lambda a, f: f(a), arrays, layouts)  # C, F and strided views
    scalars = hnp.arrays(dtypes, ()).map(lambda a: a[()])
    leaves = leaves | arrays | scalars
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashable, inner, max_size=4)
        | st.sets(hashable, max_size=3)
        | st.frozensets(hashable, max_size=3)
        | st.builds(Point, inner, inner)
        | st.builds(Frozen, inner)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_any_nested_value_of_the_supported_types_round_trips_equal_and_of_its_types(
    value: Any,
) -> None:
    wire = {"data": value, "finished": False}
    CALLS.clear()  # building a Frozen ran its __post_init__; loading one must not
    got = round_trip(wire)
    assert same(wire, got), (wire, got)
    assert CALLS == [], "loading ran a dataclass's code"


def test_big_ints_surrogates_nan_and_dict_keys_of_any_type() -> None:
    value = {2**100: -(2**70), (1, "a"): frozenset({b"x"}), "\udcff": float("nan"), None: {3}}
    assert same(value, round_trip(value))


def test_a_subclass_of_a_built_in_type_comes_back_as_that_type() -> None:
    from collections import OrderedDict
    from enum import IntEnum

    class Level(IntEnum):
        HIGH = 2

    got = round_trip([Level.HIGH, OrderedDict(a=1)])
    assert got == [2, {"a": 1}] and type(got[0]) is int and type(got[1]) is dict


# ----------------------------------------------------------- the real types
@needs_numpy
@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=">f8").reshape(2, 3, 4)[:, ::2, 1:],
        lambda: np.asfortranarray(np.ones((3, 5), dtype=np.complex64)),
        lambda: np.zeros((0, 7), dtype=np.int16),
        lambda: np.array(True),
        lambda: np.float16(-0.0),
        lambda: np.uint64(2**64 - 1),
    ],
    ids=["strided-bigendian", "fortran-complex", "empty", "0-d-bool", "f16-scalar", "u64-scalar"],
)
def test_numpy_arrays_and_scalars_round_trip(make: Any) -> None:
    value = make()
    got = round_trip({"x": value})["x"]
    assert same(value, got)
    if isinstance(got, np.ndarray):
        got[...] = got  # writable, as pickle's arrays are


@needs_numpy
@pytest.mark.parametrize("dtype", ["O", "U3", "M8[s]", [("a", "f4")]], ids=str)
def test_numpy_arrays_of_other_dtypes_are_refused_naming_the_dtype_and_fix(dtype: Any) -> None:
    with pytest.raises(TypeError, match=r"cannot store a numpy array of dtype .*Fix: convert"):
        SAFE.dumps({"x": np.zeros(2, dtype=dtype)})


def test_dates_times_and_decimals_round_trip() -> None:
    import zoneinfo

    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    value = [
        dt.datetime(2024, 10, 27, 2, 30, tzinfo=berlin, fold=1),
        dt.datetime(1, 1, 1),
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
        dt.time(23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=-5), "EST")),
        dt.date(2000, 2, 29),
        dt.timedelta(days=-3, microseconds=1),
        Decimal("-0.00"),
        Decimal("sNaN"),
        Decimal("1E+999999"),
    ]
    got = round_trip(value)
    assert same(value, got)
    assert got[0].tzinfo is berlin and got[2].tzinfo is dt.timezone.utc


def test_another_tzinfo_is_refused_naming_it_and_the_fix() -> None:
    class Custom(dt.tzinfo):
        def utcoffset(self, when: Any) -> dt.timedelta:
            return dt.timedelta(hours=1)

    with pytest.raises(TypeError, match=r"time zone of type .*Custom.*Fix: convert"):
        SAFE.dumps(dt.datetime(2024, 1, 1, tzinfo=Custom()))


def test_a_dataclass_is_rebuilt_without_running_its_code_frozen_ones_too() -> None:
    CALLS.clear()
    value = Frozen(label=Point(1, (2, 3)))
    CALLS.clear()
    got = round_trip(value)
    assert type(got) is Frozen and got == value and type(got.label) is Point
    assert CALLS == [], "__init__ / __post_init__ ran on load"
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.label = 2  # type: ignore[misc]


def test_a_dataclass_defined_in_a_function_is_refused_at_put_with_the_fix() -> None:
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(TypeError, match=r"<locals>.Local: a dataclass defined inside a function"):
        SAFE.dumps({"data": Local(1)})


def test_torch_tensors_round_trip() -> None:
    torch = pytest.importorskip("torch")
    tensors = [
        torch.arange(6, dtype=torch.bfloat16).reshape(2, 3).T,
        torch.zeros(0, 3),
        torch.tensor(True),
        torch.ones(3, dtype=torch.complex64).conj(),
        torch.ones(2, requires_grad=True),
    ]
    for tensor in tensors:
        got = round_trip(tensor)
        assert type(got) is torch.Tensor and got.dtype == tensor.dtype
        assert got.shape == tensor.shape and torch.equal(got, tensor.detach().resolve_conj())
        assert got.requires_grad == tensor.requires_grad


def test_neither_numpy_nor_torch_is_needed_for_other_values() -> None:
    code = (
        "import sys\n"
        "from chunk_adapter.connectors import SAFE\n"
        "value = {'data': (1, {2: b'x'}), 'finished': True}\n"
        "assert SAFE.loads(bytes(SAFE.dumps(value))) == value\n"
        "print(sorted({'numpy', 'torch'} & set(sys.modules)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", f"imported: {proc.stdout}"


def test_a_main_dataclass_is_found_only_where_main_defines_it() -> None:
    code = (
        "import dataclasses\n"
        "from chunk_adapter.connectors import SAFE\n"
        "@dataclasses.dataclass\n"
        "class Job:\n"
        "    n: int\n"
        "blob = bytes(SAFE.dumps(Job(3)))\n"
        "assert SAFE.loads(blob) == Job(3), 'the same script finds its class'\n"
        "print(blob.hex())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(ValueError, match=r"__main__.Job.*no class of that name in '__main__'"):
        SAFE.loads(bytes.fromhex(proc.stdout.strip()))


# ------------------------------------------------------- planted bytes
def planted(code: int, meta: Any, buffers: list[memoryview] | None = None) -> bytes:
    frame = msgpack.ExtType(code, msgpack.packb(meta))
    return bytes(write({"data": frame, "finished": True}, buffers or [], _big_int))


def test_a_planted_dataclass_of_a_module_not_imported_is_refused_and_nothing_is_imported() -> None:
    # `antigravity` opens a web browser when imported: nothing may import it.
    code = (
        "import sys, msgpack\n"
        "from chunk_adapter.connectors import SAFE\n"
        "from chunk_adapter.connectors._msgpack_frames import write\n"
        "from chunk_adapter.connectors._safe_msgpack import DATACLASS, _big_int\n"
        "frame = msgpack.ExtType(DATACLASS, msgpack.packb(['antigravity', 'Thing', {}]))\n"
        "blob = bytes(write({'data': frame}, [], _big_int))\n"
        "try:\n"
        "    SAFE.loads(blob)\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
        "assert 'antigravity' not in sys.modules, 'loading imported a module'\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "antigravity.Thing" in proc.stdout and "is not imported" in proc.stdout, proc.stdout
    assert "Fix: import antigravity" in proc.stdout


@pytest.mark.parametrize(
    ("module", "name", "why"),
    [
        (__name__, "NotADataclass", "not a dataclass"),
        ("subprocess", "Popen", "not a dataclass"),
        ("os", "system", "not a dataclass"),
        (__name__, "Nowhere", "no class of that name"),
        (__name__, "Point.__init__.<locals>.X", "no class of that name"),
    ],
)
def test_a_planted_class_that_is_no_imported_dataclass_is_refused(
    module: str, name: str, why: str
) -> None:
    CALLS.clear()
    blob = planted(DATACLASS, [module, name, {}])
    with pytest.raises(ValueError, match=why) as info:
        SAFE.loads(blob)
    assert f"{module}.{name}" in str(info.value) and "Fix:" in str(info.value)
    assert CALLS == []


def test_stored_fields_must_be_the_dataclass_fields() -> None:
    with pytest.raises(ValueError, match=r"has the fields \['x', 'y'\] here.*\['x', 'z'\]"):
        SAFE.loads(planted(DATACLASS, [__name__, "Point", {"x": 1, "z": 2}]))


@needs_numpy
@pytest.mark.parametrize(
    ("meta", "why"),
    [
        (["|O8", [1], 0], "not one this format writes"),
        (["<f4", [3], 0], "takes 12 bytes, the buffer 8"),
        (["<f4", [2], 5], "does not exist"),
    ],
)
def test_a_planted_array_frame_is_refused(meta: list[Any], why: str) -> None:
    buffer = memoryview(bytes(8))
    with pytest.raises(ValueError, match=why):
        SAFE.loads(planted(ARRAY, meta, [buffer]))


@needs_numpy
def test_one_buffer_cannot_make_many_arrays() -> None:
    frames = [msgpack.ExtType(ARRAY, msgpack.packb(["<f4", [2], 0])) for _ in range(2)]
    blob = bytes(write(frames, [memoryview(bytes(8))], _big_int))
    with pytest.raises(ValueError, match="used twice"):
        SAFE.loads(blob)


@pytest.mark.parametrize(
    "data", [b"", b"\x80\x05N.", b'{"data": 1}', b"\x92\x01\x01\xc6\xff\xff\xff\xff"]
)
def test_bytes_it_did_not_write_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        SAFE.loads(data)


# -------------------------------------------------------------- copies
@needs_numpy
def test_a_large_array_is_copied_once_on_each_side() -> None:
    arr = np.ones(2_500_000, dtype=np.float32)  # 10 MB
    wire = {"data": arr, "finished": False}
    tracemalloc.start()
    try:
        data = encode_value(SAFE, "k", wire)
        assert isinstance(data, memoryview), "encode_value copied dumps' buffer into bytes"
        _, dumped = tracemalloc.get_traced_memory()
        stored = bytes(data)
        del data
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        got = SAFE.loads(stored)
        _, loaded = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(got["data"], arr)
    assert dumped < 1.2 * arr.nbytes, f"dumps allocated {dumped / arr.nbytes:.2f}x the array"
    assert loaded - base < 1.2 * arr.nbytes, f"loads took {(loaded - base) / arr.nbytes:.2f}x"


# ---------------------------------------------------- through real connectors
def payload() -> dict[str, Any]:
    data: dict[str, Any] = {
        "when": dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc),
        "price": Decimal("19.99"),
        "point": Point(Decimal("1"), dt.date(2024, 5, 1)),
        "spans": [(0, 3), (3, 9)],
    }
    if np is not None:
        data["logits"] = np.linspace(0, 1, 6000, dtype=np.float32).reshape(3, 2000)
        data["step"] = np.int64(7)
    return {"data": data, "finished": False}


def test_shared_memory_round_trips_a_real_payload_by_default(shm_namespace: str) -> None:
    with (
        SharedMemoryConnector(shm_namespace) as sender,
        SharedMemoryConnector(shm_namespace) as receiver,
    ):
        assert sender.serializer is SAFE
        value = payload()
        sender.put("req_0_0", value)
        assert same(value, receiver.get("req_0_0"))


def test_redis_round_trips_a_real_payload_by_default(
    redis_server: RedisServer, redis_prefix: str
) -> None:
    with (
        RedisConnector(url=redis_server.url, prefix=redis_prefix) as sender,
        RedisConnector(url=redis_server.url, prefix=redis_prefix) as receiver,
    ):
        assert sender.serializer is SAFE
        value = payload()
        sender.put("req_0_0", value)
        assert same(value, receiver.get("req_0_0"))


@pytest.mark.parametrize(
    ("bad", "named"),
    [(threading.Lock(), "_thread.lock"), (lambda: 1, "builtins.function")],
    ids=["lock", "lambda"],
)
def test_an_unsupported_type_fails_the_put_naming_the_type_where_and_the_fix(
    shm_namespace: str, bad: Any, named: str
) -> None:
    with SharedMemoryConnector(shm_namespace) as conn:
        with pytest.raises(SerializationError) as info:
            conn.put("bad_0_1", {"data": {"ok": 1, "x": [bad]}, "finished": False})
        message = str(info.value)
        assert f"cannot store a {named} object" in message
        assert "(at value['data']['x'][0])" in message
        assert "Fix: put only data the serializer accepts" in message
        assert "numpy arrays" in message, "the message lists what it stores"
        assert conn.segments() == []


def test_the_json_format_stays_available_by_name() -> None:
    value = {"data": {"t": (1, b"\x00"), 3: [None, 1.5]}, "finished": True}
    assert SAFE_JSON.name == "safe-json"
    assert SAFE_JSON.loads(SAFE_JSON.dumps(value)) == value
    with pytest.raises(ValueError, match="not written by the safe-msgpack serializer"):
        SAFE.loads(SAFE_JSON.dumps(value))
