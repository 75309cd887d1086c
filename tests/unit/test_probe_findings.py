"""What the examples stage makes of an exception out of a check: a red only when
adapter code raised it.

``verify.probes._finding`` reads the traceback: an exception raised through the
adapter's (or its factory's, or the reference adapter's) code is the adapter
raising where no call may raise — a failure; one raised only through the
suite's own modules (and the standard library) is the suite's fault — never a
violation, always *inconclusive*, with where it came from.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from chunk_adapter import ChunkAdapter, examples
from chunk_adapter.bed.waiting import Hang
from chunk_adapter.connectors import MemoryConnector
from chunk_adapter.oracles import accepted
from chunk_adapter.verify import probes_input
from chunk_adapter.verify.leaks import Undecided
from chunk_adapter.verify.probes import _finding, run_probes


def _raised(fn: Any) -> Exception:
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError(f"{fn!r} did not raise")


def _raised_in_the_suite() -> Exception:
    """An exception raised and caught in frames of a suite module (a bug in a probe), as
    a check's runner catches it."""
    namespace: dict[str, Any] = {"__name__": "chunk_adapter.verify.probes"}
    code = (
        "def broken():\n"
        "    return {}['missing']\n"
        "def run():\n"
        "    try:\n"
        "        broken()\n"
        "    except Exception as exc:\n"
        "        return exc\n"
    )
    exec(code, namespace)
    exc: Exception = namespace["run"]()
    return exc


def test_an_exception_raised_by_the_suite_alone_is_inconclusive_not_a_violation() -> None:
    verdict, evidence, rules = _finding(_raised_in_the_suite(), ("R4",))
    assert verdict == "inconclusive" and rules == (), (verdict, evidence)
    assert evidence.startswith("the suite itself raised KeyError('missing')"), evidence


def test_an_exception_raised_through_adapter_code_is_a_failure() -> None:
    class Raising:
        def poll_ready(self) -> dict[str, Any]:
            raise RuntimeError("boom")

    verdict, evidence, _ = _finding(_raised(Raising().poll_ready), ())
    assert (verdict, evidence) == ("fail", "the adapter raised RuntimeError('boom')")


def test_the_reference_adapter_raising_counts_as_adapter_code() -> None:
    adapter = ChunkAdapter(MemoryConnector(), stage_id=1)
    try:
        adapter.stop()
        verdict, _, _ = _finding(_raised(lambda: adapter.load_async("x")), ())
    finally:
        adapter.stop()
    assert verdict == "fail"


class StopTwiceRaises(ChunkAdapter):
    """BUG (R18: stop() is idempotent): a second stop() closes what the first closed."""

    def stop(self) -> None:
        if self._stop.is_set():
            raise OSError(9, "Bad file descriptor")
        super().stop()


@pytest.mark.rule("R18")
def test_a_stop_that_raises_is_r18_not_a_failure_without_a_rule() -> None:
    from chunk_adapter.factory import load_factory
    from chunk_adapter.verify.probes import probe_stop

    factory = load_factory(f"{__name__}:StopTwiceRaises")
    verdict, evidence, rules = _finding(_raised(lambda: probe_stop(factory)), ())
    assert (verdict, rules) == ("fail", ("R18",)), evidence
    assert evidence == "R18: a second stop() raised OSError(9, 'Bad file descriptor')"
    # a call given no rules still re-raises what the adapter raised, as it was
    from chunk_adapter.bed.waiting import call_bounded

    adapter = StopTwiceRaises(MemoryConnector(), stage_id=0)
    adapter.stop()
    exc = _raised(lambda: call_bounded(adapter.stop, 5.0, "stop()"))
    assert isinstance(exc, OSError)


@pytest.fixture
def accepting_r23() -> Iterator[None]:
    accepted.install(accepted.Accepted.of(["R23"]))
    yield
    accepted.install(accepted.Accepted())


def _undecided() -> Undecided:
    blocker = Hang("the chunks of 50 streams", 10.0, call=False)  # R23: it never came about
    return Undecided(f"R24 not decided: {blocker}", blocker.broken)


@pytest.mark.rule("R24")
def test_a_check_a_stream_that_never_came_kept_from_deciding_is_inconclusive() -> None:
    verdict, evidence, rules = _finding(_undecided(), ("R24",))
    assert (verdict, rules) == ("inconclusive", ("R24",)), evidence


@pytest.mark.rule("R24")
def test_under_a_baseline_accepting_what_kept_it_from_deciding_it_is_not_reached(
    accepting_r23: None,
) -> None:
    verdict, evidence, rules = _finding(_undecided(), ("R24",))
    assert (verdict, rules) == ("skip", ("R24",)), evidence
    assert "a root cause the baseline accepts, R23" in evidence, evidence
    # and it survives the trip from a worker process
    again = pickle.loads(pickle.dumps(_undecided()))
    assert again.blocked_by == ("R23",) and str(again) == str(_undecided())


class _SaveLoopDies(ChunkAdapter):
    """Its SAVE thread dies at once of an error of its own: nothing is ever put."""

    def _save_loop(self) -> None:
        raise RuntimeError("the SAVE loop's own bug")


class _BadCallBreaks(ChunkAdapter):
    """A save_async that raised for an uncopyable object leaves the adapter refusing to
    queue anything more (a flag set before the snapshot, never cleared)."""

    broken = False

    def save_async(self, request_id: str, obj: Any, is_final: bool) -> None:
        if self.broken:
            return
        if isinstance(obj, type(threading.Lock())):
            self.broken = True
        super().save_async(request_id, obj, is_final)


def _examples(factory: Any, check: str) -> Any:
    (result,) = run_probes(factory, "verify", wants=lambda name: name == check)
    return result


@pytest.mark.rule("R22")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_check_that_fails_after_a_thread_died_names_r22_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The examples stage watches the adapters' threads: a SAVE thread that died is the
    root of the final that never came (R22 first; the example's own R11 after it)."""
    monkeypatch.setattr(examples, "ARRIVE", 1.0)
    result = _examples(_SaveLoopDies, "example 2")
    assert result.verdict == "fail", result
    assert result.rules[:1] == ("R22",), result.rules
    assert "died of RuntimeError" in result.evidence


@pytest.mark.rule("R21")
def test_a_rejected_call_that_breaks_the_adapter_is_r21(monkeypatch: pytest.MonkeyPatch) -> None:
    """A good final saved after the rejected calls is never put, and is on a fresh adapter
    asked nothing bad: the rejected call changed the adapter (R21), not a lost put (R23)."""
    monkeypatch.setattr(probes_input, "ARRIVE", 1.0)
    result = _examples(_BadCallBreaks, "bad input")
    assert result.verdict == "fail", result
    assert result.rules[:1] == ("R21",), (result.rules, result.evidence)
    assert _examples(ChunkAdapter, "bad input").verdict == "pass"
