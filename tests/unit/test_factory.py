"""Factory loading: ``load_factory`` specs, ``reference_factory``, and keyword acceptance
(``takes_keyword``, ``accepted_options``, ``accepts_runtime``)."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter.adapter import ChunkAdapter
from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.errors import InvalidValue
from chunk_adapter.factory import (
    REFERENCE,
    LoadedFactory,
    accepted_options,
    accepts_runtime,
    load_factory,
    reference_factory,
    takes_keyword,
)

FAKE = "_chunk_adapter_fake_factories"


@pytest.fixture
def fake_module() -> Iterator[types.ModuleType]:
    """A module with good and bad factories, importable as FAKE for the test's duration."""
    module = types.ModuleType(FAKE)

    def good(
        connector: Any, *, stage_id: int, src_stage_id: Any = None, build_payload: Any = None
    ) -> Any:
        return ("built", stage_id)

    def positional_only(connector: Any, stage_id: int) -> Any:
        return None

    def no_stage(connector: Any) -> Any:
        return None

    class Holder:
        make = staticmethod(good)

    module.good = good  # type: ignore[attr-defined]
    module.positional_only = positional_only  # type: ignore[attr-defined]
    module.no_stage = no_stage  # type: ignore[attr-defined]
    module.Holder = Holder  # type: ignore[attr-defined]
    module.not_callable = 42  # type: ignore[attr-defined]
    sys.modules[FAKE] = module
    try:
        yield module
    finally:
        del sys.modules[FAKE]


def test_reference_spec_loads_the_reference_adapter() -> None:
    factory = load_factory(REFERENCE)
    assert inspect.unwrap(factory) is ChunkAdapter
    adapter = factory(MemoryConnector(), stage_id=1)
    try:
        assert isinstance(adapter, ChunkAdapter)
    finally:
        adapter.stop()


def test_reference_factory_builds_with_options() -> None:
    adapter = reference_factory(MemoryConnector(), stage_id=3, join_timeout=0.5)
    try:
        assert isinstance(adapter, ChunkAdapter)
        assert adapter.stage_id == 3 and adapter.src_stage_id == 2 and adapter.join_timeout == 0.5
    finally:
        adapter.stop()


def test_good_and_dotted_specs(fake_module: types.ModuleType) -> None:
    assert inspect.unwrap(load_factory(f"{FAKE}:good")) is fake_module.good
    assert load_factory(f"{FAKE}:good") is load_factory(f"{FAKE}:good")  # one per callable
    made: object = load_factory(f"{FAKE}:Holder.make")(object(), stage_id=4)
    assert made == ("built", 4)


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("chunk_adapter.adapter.ChunkAdapter", r"package\.module:factory.*--adapter"),
        ("a:b:c", r"package\.module:factory"),
        (":ChunkAdapter", r"both sides of ':'"),
        ("chunk_adapter.adapter:", r"both sides of ':'"),
        ("no_such_pkg_xyz.mod:factory", r"cannot import module 'no_such_pkg_xyz\.mod'.*PYTHONPATH"),
        ("chunk_adapter.adapter:Nope", r"has no attribute 'Nope'"),
        (f"{FAKE}:not_callable", r"not callable"),
        (f"{FAKE}:positional_only", r"cannot be called as.*keyword parameters"),
        (f"{FAKE}:no_stage", r"cannot be called as"),
    ],
)
def test_bad_specs_fail_with_a_clear_message(
    fake_module: types.ModuleType, spec: str, match: str
) -> None:
    with pytest.raises(InvalidValue, match=match):
        load_factory(spec)


def test_a_non_str_spec_is_rejected() -> None:
    with pytest.raises(InvalidValue, match=r"package\.module:factory"):
        load_factory(42)  # type: ignore[arg-type]


def test_accepts_runtime() -> None:
    def plain(connector: Any, *, stage_id: int) -> None:
        return None

    def with_runtime(connector: Any, *, stage_id: int, runtime: Any = None) -> None:
        return None

    def with_kwargs(connector: Any, **options: Any) -> None:
        return None

    assert accepts_runtime(ChunkAdapter)
    assert accepts_runtime(reference_factory)
    assert accepts_runtime(with_runtime)
    assert accepts_runtime(with_kwargs)
    assert not accepts_runtime(plain)
    assert not accepts_runtime(42)  # type: ignore[arg-type]


def test_takes_keyword_reads_the_signature() -> None:
    def named(connector: Any, *, stage_id: int, logger: Any = None) -> None:
        return None

    def any_keyword(connector: Any, **options: Any) -> None:
        return None

    assert takes_keyword(named, "logger")
    assert not takes_keyword(named, "runtime")
    assert takes_keyword(any_keyword, "runtime")
    assert not takes_keyword(42, "logger")  # type: ignore[arg-type]  # no signature: no


def test_accepted_options_keeps_only_what_the_factory_takes() -> None:
    def named(connector: Any, *, stage_id: int, put_tries: int = 3) -> None:
        return None

    def any_keyword(connector: Any, **options: Any) -> None:
        return None

    options = {"put_tries": 5, "notify": True}
    assert accepted_options(named, options) == {"put_tries": 5}
    assert accepted_options(any_keyword, options) == options
    assert accepted_options(any_keyword, options) is not options  # a copy, safe to extend
    assert accepted_options(42, options) == {}  # type: ignore[arg-type]


class _Strict:
    """An adapter stand-in whose constructor takes the contract keywords only."""

    def __init__(
        self, connector: Any, *, stage_id: int, src_stage_id: Any = None, build_payload: Any = None
    ) -> None:
        self.stage_id = stage_id

    @classmethod
    def create(cls, connector: Any, **options: Any) -> _Strict:
        return cls(connector, **options)  # a **kwargs factory that forwards everything


def test_an_optional_keyword_a_forwarding_factory_refuses_is_left_out_and_remembered() -> None:
    factory = LoadedFactory(_Strict.create)
    assert takes_keyword(factory, "logger")  # **options: the signature cannot tell
    made = factory(object(), stage_id=2, build_payload=None, logger=1, put_tries=3)
    assert isinstance(made, _Strict) and made.stage_id == 2
    assert factory.rejected == {"logger", "put_tries"}
    assert not takes_keyword(factory, "logger") and accepts_runtime(factory)
    assert accepted_options(factory, {"logger": 1, "notify": True}) == {"notify": True}
    assert factory.__qualname__ == "_Strict.create" and factory.__module__ == __name__


def test_what_a_loaded_factory_learned_is_seen_through_another_wrapper() -> None:
    factory = LoadedFactory(_Strict.create)
    factory(object(), stage_id=1, logger=1)

    def watched(*args: Any, **kwargs: Any) -> Any:
        return factory(*args, **kwargs)

    watched.__wrapped__ = factory  # type: ignore[attr-defined]  # as verify's watchdog does
    assert not takes_keyword(watched, "logger") and takes_keyword(watched, "notify")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        # a contract keyword is never left out: the factory is told it must take it
        ({"stage_id": 1, "src_stage_id": None, "build_payload": None}, "build_payload"),
        # a TypeError about a keyword the suite did not pass is the factory's own
        ({"stage_id": 1}, "colour"),
    ],
)
def test_a_refused_contract_keyword_or_an_unrelated_type_error_is_raised(
    kwargs: dict[str, Any], match: str
) -> None:
    def refuses(connector: Any, **options: Any) -> Any:
        if "build_payload" in options:
            raise TypeError("make() got an unexpected keyword argument 'build_payload'")
        raise TypeError("Paint() got an unexpected keyword argument 'colour'")

    factory = LoadedFactory(refuses)
    with pytest.raises(TypeError, match=match):
        factory(object(), **kwargs)
    assert factory.rejected == set()


class _Cooperative:
    """A mixin chain that hands every keyword it does not know to ``object.__init__``."""

    def __init__(self, connector: Any, *, stage_id: int, **kw: Any) -> None:
        self.stage_id = stage_id
        kw.pop("src_stage_id", None)
        kw.pop("build_payload", None)
        super().__init__(**kw)  # object.__init__() takes exactly one argument, if any is left


def test_options_handed_down_to_object_init_are_left_out() -> None:
    """Found outside the repo: a mixin adapter passing ``**options`` up its ``super()``
    chain raised ``TypeError: object.__init__() takes exactly one argument``, which names
    no keyword: the stress stage crashed ("please report it") and every explore run was
    a factory error. Now the factory is built with the contract keywords alone."""
    factory = LoadedFactory(_Cooperative)
    made = factory(object(), stage_id=2, build_payload=None, put_tries=3, runtime=None)
    assert isinstance(made, _Cooperative) and made.stage_id == 2
    assert factory.rejected == {"put_tries", "runtime"}
    assert accepted_options(factory, {"put_tries": 3, "join_timeout": 1.0}) == {"join_timeout": 1.0}


def test_a_type_error_that_names_no_keyword_and_is_not_about_options_is_raised() -> None:
    def broken(connector: Any, **options: Any) -> Any:
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    factory = LoadedFactory(broken)
    with pytest.raises(TypeError, match="unsupported operand"):
        factory(object(), stage_id=1, put_tries=3)
    assert factory.rejected == set()


def test_a_stage_crash_raised_by_the_factory_is_named_the_factory_s() -> None:
    """A stage that dies of an exception from the user's factory says so (and how the
    factory is called), not "the stage itself raised ... please report it"."""
    from chunk_adapter.verify.worker import _raised_in_factory

    def refuses(connector: Any, **options: Any) -> Any:
        raise ValueError("no connector of that kind")

    with pytest.raises(ValueError) as info:
        LoadedFactory(refuses)(object(), stage_id=1)
    assert _raised_in_factory(info.value)
    with pytest.raises(KeyError) as other:
        {}["suite"]  # the suite's own bug: not the factory's
    assert not _raised_in_factory(other.value)
