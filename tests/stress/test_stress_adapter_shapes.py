"""Correct adapters in shapes found outside the repository pass the stress scenarios.

R22 is judged by the exceptions the adapter's threads die of, not by which threads live.

Found outside the repository: a correct adapter whose RECV side is re-armed as one
``threading.Timer`` per round got "R22: background thread(s) ['timer-recv', ...]
died while the adapter was running", confirmed, exit 1 — every round's thread
ends once its round is done. Here the same false alarm in its smallest shape (a
helper thread that ends, cleanly, after the first save), and the bug R22 is
about (a thread that dies of an exception) still found. And an attribute named
like one of the suite's options (``put_tries``, ``idle_backoff``, ``join_timeout``)
never tightens a bound alone: it may count puts, count retries, or be in milliseconds.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, cast

import pytest

from chunk_adapter import ChunkAdapter
from chunk_adapter.bed.crashes import thread_crashes
from chunk_adapter.factory import AdapterFactory
from chunk_adapter.stress import idle_polling, prompt_stop, put_faults

SMALL: dict[str, Any] = {"seed": 3, "requests": 20, "chunks": 4, "put_rate": 0.2}


class _OneShotHelper(ChunkAdapter):
    """Starts a helper thread that runs once, after the first ``save_async``, then ends.

    *fails*: the helper raises instead of returning (uncaught: the thread dies of it).
    """

    fails = False

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        super().__init__(connector, **kwargs)
        # Set by the first save_async; the helper thread waits for it, once.
        self._first_save = threading.Event()
        self._helper = threading.Thread(target=self._once, name="one-shot", daemon=True)
        self._helper.start()

    def _once(self) -> None:
        while not self._first_save.wait(0.05):
            if self._stop.is_set():
                return
        if self.fails:
            raise RuntimeError("the helper failed")

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        super().save_async(request_id, obj, is_final)
        self._first_save.set()


class _DyingHelper(_OneShotHelper):
    fails = True


@pytest.mark.rule("R22")
def test_a_thread_that_ends_when_its_work_is_done_is_not_a_death() -> None:
    report = put_faults(_OneShotHelper, **SMALL)
    assert report.ok, report.describe()


@pytest.mark.rule("R22")
# the helper thread's death is the point: pytest's report of it is expected output
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_dies_of_an_exception_is_still_found() -> None:
    report = put_faults(_DyingHelper, **SMALL)
    assert "R22" in report.rules, report.describe()
    (failure,) = [f for f in report.failures if f.startswith("R22")]
    assert "['one-shot']" in failure and "RuntimeError('the helper failed')" in failure


def test_the_hook_installed_before_still_sees_each_death(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.thread.name))
    with thread_crashes(chain=True) as crashes:
        thread = threading.Thread(target=lambda: 1 / 0, name="dies")
        thread.start()
        thread.join()
    assert [(name, type(exc)) for name, exc in crashes] == [("dies", ZeroDivisionError)]
    assert seen == ["dies"]  # e.g. the default hook, which prints the traceback
    with thread_crashes(chain=False) as crashes:
        thread = threading.Thread(target=lambda: 1 / 0, name="dies again")
        thread.start()
        thread.join()
    assert len(crashes) == 1 and seen == ["dies"]


_CONTRACT = ("save_async", "cancel_sender", "load_async", "poll_ready", "cleanup_receiver", "stop")


def _forward(front: Any, inner: ChunkAdapter) -> None:
    """Give *front* the contract's methods of *inner* (an adapter in front of another)."""
    for name in _CONTRACT:
        setattr(front, name, getattr(inner, name))


class _CountsPutTries:
    """Correct (the reference adapter inside); its ``put_tries`` is not the setting but a
    count of the puts tried so far, kept by a connector wrapper."""

    def __init__(self, connector: Any, **kwargs: Any) -> None:
        self.put_tries = 0  # only the inner SAVE thread adds to it
        owner = self

        class Counting:
            def put(self, key: str, value: Any) -> None:
                owner.put_tries += 1
                connector.put(key, value)

            def __getattr__(self, name: str) -> Any:
                return getattr(connector, name)

        self._inner = ChunkAdapter(Counting(), **kwargs)
        _forward(self, self._inner)


@pytest.mark.rule("R10")
def test_an_attribute_named_put_tries_that_counts_is_not_taken_for_the_setting() -> None:
    """The oracles learn the adapter's tries from ``put_tries`` as it was built; read
    after the run, a counter of that name told them every dropped chunk should have
    been tried thousands of times (R10 on a correct adapter)."""
    report = put_faults(cast(AdapterFactory, _CountsPutTries), **SMALL)
    assert report.ok, report.describe()


class _Front:
    """Correct (the reference adapter inside, with its defaults: 3 put tries, a 1 ms idle
    pause, a 1 s join timeout), whatever options it is passed; it shows attributes named
    like the suite's options that mean something else (:attr:`shows`)."""

    shows: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        connector: Any,
        *,
        stage_id: int,
        src_stage_id: int | None = None,
        build_payload: Any = None,
        **ignored: Any,
    ) -> None:
        self._inner = ChunkAdapter(
            connector, stage_id=stage_id, src_stage_id=src_stage_id, build_payload=build_payload
        )
        for name, value in self.shows.items():
            setattr(self, name, value)
        _forward(self, self._inner)


class _BackoffInMilliseconds(_Front):
    shows: ClassVar[dict[str, Any]] = {"idle_backoff": 1}  # 1 ms, an int


class _RetriesNamedPutTries(_Front):
    # Retries after the first try: 3 tries in all.
    shows: ClassVar[dict[str, Any]] = {"put_tries": 2}


class _JoinTimeoutOfSomethingElse(_Front):
    # E.g. one poll's wait; stop() joins for 1 s.
    shows: ClassVar[dict[str, Any]] = {"join_timeout": 0.01}


@pytest.mark.rule("R17")
def test_an_attribute_named_idle_backoff_does_not_set_the_polling_bound() -> None:
    """Found outside the repo: ``idle_backoff = 1`` (milliseconds) made the bound 5 gets/s
    per idle request, and a 1 ms poller failed R17, exit 1."""
    report = idle_polling(cast(AdapterFactory, _BackoffInMilliseconds), idle_requests=10)
    assert report.ok, report.describe()


@pytest.mark.rule("R10")
def test_an_attribute_named_put_tries_counting_retries_is_not_the_setting() -> None:
    """Found outside the repo: ``put_tries = 2`` meaning retries (3 tries in all, the
    contract's default) made a chunk put on its third try an R10 violation, exit 1."""
    report = put_faults(cast(AdapterFactory, _RetriesNamedPutTries), **SMALL)
    assert report.ok, report.describe()


@pytest.mark.rule("R18")
def test_an_attribute_named_join_timeout_only_ever_loosens_the_stop_bound() -> None:
    report = prompt_stop(cast(AdapterFactory, _JoinTimeoutOfSomethingElse), state="build_blocked")
    assert report.ok, report.describe()
