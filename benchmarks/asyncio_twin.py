"""Executions per second of an asyncio adapter under the explorer, next to its thread twin.

    PYTHONPATH=. python benchmarks/asyncio_twin.py [--runs 5] [--executions 100] [--only NAME]

The asyncio adapter is ``tests.quality.correct.asyncio_loop:make``: SAVE and RECV work
as two tasks on one event loop in one daemon thread, blocking calls handed to two
one-worker pools. Its *thread twin* (:class:`ThreadTwinAdapter`, factory
``benchmarks.asyncio_twin:make``) has the same design, state, locks and pools, with
the event loop replaced by two plain daemon threads. Both are explored by
substitution, as ``chunk-adapter verify`` explores them.

For each scenario: ``RandomStrategy(seed=0)`` for ``--executions`` runs with each
adapter, on the thread and the greenlet runtime, ``--runs`` times, alternating the
adapters so machine load falls on both alike; the table gives the median
executions/s of each, their ratio (twin / asyncio: what the event loop costs under
the explorer) and the switch points per execution of each (one run's, the same
every run: the strategy is seeded).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.quality.correct
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "src"))

from tests.quality.correct.asyncio_loop import (
    _OPTIONS,
    AsyncioLoopAdapter,
    BuildPayload,
    Item,
    Outcome,
    _forget_workers,
    _key,
    _Registration,
    log,
)
from tests.quality.correct.asyncio_loop import make as asyncio_make

from chunk_adapter.explore import LIBRARY, RandomStrategy, explore


class ThreadTwinAdapter(AsyncioLoopAdapter):
    """:class:`AsyncioLoopAdapter` with its event loop replaced by two daemon threads.

    Inherited unchanged: the scheduler calls but ``load_async`` (``save_async``,
    ``cancel_sender``, ``poll_ready``, ``cleanup_receiver``), and every piece that runs
    on a pool worker or under a lock: the build, the put and the post-put state update
    (``_put_blocking``, ``_advance``), the get and the commit with its fence re-check
    (``_get_blocking``, ``_commit``). Replaced: the FIFO is a ``queue.Queue`` consumed
    by a sender thread; the receiver thread goes round the registrations one get each,
    woken by a ``threading.Event``; each waits on its pool's future (or stop()) where
    a task awaits ``run_in_executor``. The parent's coroutines are never run.
    """

    def __init__(self, connector: Any, **options: Any) -> None:
        """*options*: the keywords of :meth:`_configure`, which checks them."""
        # Not super().__init__(): it makes and starts the event loop. The options and the
        # state both sides share are its _configure().
        self._configure(connector, **options)
        # The SAVE worker (builds and puts, one at a time, R5) and the RECV worker (gets).
        # Spawned by the sender and the receiver thread, daemons, so daemons too.
        self._save_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"twin-save-{self.stage_id}"
        )
        self._recv_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"twin-recv-{self.stage_id}"
        )
        # The FIFO (R5): save_async's items in call order; stop() adds a None.
        self._fifo: queue.Queue[Item | None] = queue.Queue()  # type: ignore[assignment]
        # Set by load_async and stop(); waited on by the receiver with a timeout, in a
        # loop that re-checks (R20).
        self._recv_wake = threading.Event()  # type: ignore[assignment]
        self._sender = threading.Thread(
            target=self._send_loop, name=f"twin-send-{self.stage_id}", daemon=True
        )
        # Resolved by stop(): a thread waiting on a worker wakes and waits on until
        # _abandon_at (half the join timeout on, when the asyncio loop stops itself), then
        # abandons the worker and ends (R18: only the blocked worker may outlive stop()).
        self._stopped: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._abandon_at = float("inf")
        self._receiver = threading.Thread(
            target=self._recv_loop, name=f"twin-recv-{self.stage_id}", daemon=True
        )
        self._sender.start()
        self._receiver.start()

    def _wait(self, pool: concurrent.futures.Executor, fn: Any, *args: Any) -> Outcome:
        """What ``await loop.run_in_executor(pool, fn, *args)`` is on the loop: the result,
        or ``("stopped", None)`` once the loop would have stopped (the worker abandoned)."""
        future = pool.submit(fn, *args)
        first = concurrent.futures.FIRST_COMPLETED
        concurrent.futures.wait([future, self._stopped], return_when=first)
        if not future.done():  # stop() has begun: wait until the loop would have stopped
            concurrent.futures.wait([future], max(0.0, self._abandon_at - time.monotonic()))
        if not future.done():
            return ("stopped", None)  # blocked in a build, a put or a get: abandoned
        outcome: Outcome = future.result()
        return outcome

    # ------------------------------------------------------------------ sender

    def _hand_over(self, item: Item) -> None:
        self._fifo.put(item)

    def _send_loop(self) -> None:
        try:
            while not self._stopping.is_set():
                item = self._fifo.get()
                if item is None or self._stopping.is_set():
                    return
                try:
                    self._send_chunk(*item)
                except Exception:  # never let the sender die (R22)
                    log.exception("thread twin: sending a chunk of %r failed", item[0])
        finally:
            self._save_pool.shutdown(wait=False)

    def _send_chunk(self, request_id: str, snapshot: Any, is_final: bool) -> None:
        """``_send_one`` without the loop."""
        with self._send_lock:
            cancelled = request_id in self._cancelled
        if cancelled and not is_final:
            return  # dropped without a build (R6)
        payload: Any = None
        if not cancelled:
            status, result = self._wait(
                self._save_pool, self._build_blocking, request_id, snapshot, is_final
            )
            if status == "ok":
                payload = result
            elif not is_final:
                log.info("build_payload failed for %r: chunk dropped (R7): %r", request_id, result)
                return
        if payload is None and not is_final:
            return  # skipped: no put, no id used (R8)
        value = {"data": payload, "finished": is_final}
        tries = 0
        while not self._stopping.is_set():
            status, error = self._wait(
                self._save_pool, self._put_blocking, request_id, value, is_final
            )
            if status != "failed":
                return  # put (and recorded by the worker), or stop() has begun
            tries += 1
            if not is_final and tries >= self.put_tries:
                log.info(
                    "dropping a chunk of %r after %d failed puts: %r", request_id, tries, error
                )
                return  # the next chunk takes its id (R10)
            pause = min(self.put_backoff * 2 ** min(tries - 1, 30), self.put_backoff_max)
            self._stopping.wait(pause)  # cut short by stop()

    # ------------------------------------------------------------------ receiver

    def load_async(self, request_id: str) -> None:
        self._check_request_id(request_id)
        self._check_running("load_async")
        with self._recv_lock:
            if request_id in self._regs:
                return  # idempotent while registered (R12)
            self._regs[request_id] = _Registration()
        self._recv_wake.set()

    def _recv_loop(self) -> None:
        try:
            while not self._stopping.is_set():
                self._recv_wake.clear()
                with self._recv_lock:
                    todo = [(rid, reg) for rid, reg in self._regs.items() if not reg.done]
                if not todo:
                    self._recv_wake.wait(self.wait_timeout)  # then re-check (R17, R20)
                    continue
                progress = False
                for request_id, reg in todo:
                    if self._stopping.is_set():
                        return
                    try:
                        progress = self._poll_once(request_id, reg) or progress
                    except Exception:  # never let the receiver die (R22)
                        log.exception("thread twin: polling %r failed", request_id)
                if not progress:
                    time.sleep(self.idle_backoff)  # as asyncio.sleep: not cut short (R17)
        finally:
            self._recv_pool.shutdown(wait=False)

    def _poll_once(self, request_id: str, reg: _Registration) -> bool:
        """``_poll_one`` without the loop."""
        with self._recv_lock:  # the token, read right before the get
            if self._regs.get(request_id) is not reg or reg.done:
                return False
            chunk_id = reg.next_id
        key = _key(request_id, self.src_stage_id, chunk_id)
        status, value = self._wait(self._recv_pool, self._get_blocking, key)
        if status != "ok" or not isinstance(value, dict):
            return False  # failed or empty: retried next round (R13)
        return self._commit(request_id, reg, chunk_id, value)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Set the stop flag, wake both threads, join them and the workers against
        ``join_timeout``; a thread blocked in a build, a put or a get is abandoned with
        its worker (daemons both); idempotent (R18, R19)."""
        first = not self._stopping.is_set()
        self._stopping.set()
        deadline = time.monotonic() + (self.join_timeout if first else 0.0)
        if first:
            self._abandon_at = time.monotonic() + self.join_timeout / 2
            self._stopped.set_result(None)
            self._fifo.put(None)
            self._recv_wake.set()
        me = threading.current_thread()
        for thread in (self._sender, self._receiver):
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        pools = (self._save_pool, self._recv_pool)
        for worker in [w for pool in pools for w in list(getattr(pool, "_threads", ()))]:
            if worker is not me:
                worker.join(max(0.0, deadline - time.monotonic()))
        if self._sender.is_alive() or self._receiver.is_alive():
            _forget_workers(self._save_pool)
            _forget_workers(self._recv_pool)

    def __enter__(self) -> ThreadTwinAdapter:
        return self


def make(
    connector: Any,
    *,
    stage_id: int,
    src_stage_id: int | None = None,
    build_payload: BuildPayload | None = None,
    **options: Any,
) -> ThreadTwinAdapter:
    """The factory, as ``asyncio_loop.make``: the tuning options it knows; others ignored."""
    known = {k: v for k, v in options.items() if k in _OPTIONS and v is not None}
    return ThreadTwinAdapter(
        connector,
        stage_id=stage_id,
        src_stage_id=src_stage_id,
        build_payload=build_payload,
        **known,
    )


# ---------------------------------------------------------------------- the benchmark

SCENARIOS = (
    "q5-cleanup-inflight-get",
    "pipeline/q5-cleanup-inflight-get",
    "pipeline/q2-id-advances-on-put",
    "pipeline/three-stage",
    "q6-idle-polling",
)
RUNTIMES = ("thread", "greenlet")


def rate(name: str, adapter: str, runtime: str, executions: int) -> tuple[float, float]:
    """Executions/s and switch points per execution of one run."""
    factory = asyncio_make if adapter == "asyncio" else make
    start = time.perf_counter()
    report = explore(
        LIBRARY[name],
        RandomStrategy(seed=0, executions=executions),
        factory=factory,
        substitute="auto",
        runtime=runtime,
    )
    seconds = time.perf_counter() - start
    if report.failure is not None:
        raise SystemExit(f"{name}, {adapter}, {runtime} runtime:\n{report.describe_failure()}")
    return report.executions / seconds, report.steps / max(1, report.executions)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--executions", type=int, default=100)
    parser.add_argument("--only", default=None, help="one scenario")
    args = parser.parse_args()
    names = [n for n in SCENARIOS if args.only in (None, n)]
    print(
        f"{'scenario':34} {'runtime':8} {'asyncio/s':>9} {'twin/s':>7} {'ratio':>6}"
        f" {'steps/ex asyncio':>16} {'twin':>6}"
    )
    for name in names:
        for runtime in RUNTIMES:
            seen: dict[str, list[float]] = {"asyncio": [], "twin": []}
            steps: dict[str, float] = {}
            for _ in range(args.runs):
                for adapter in seen:
                    per_second, steps[adapter] = rate(name, adapter, runtime, args.executions)
                    seen[adapter].append(per_second)
            aio, twin = (statistics.median(seen[a]) for a in ("asyncio", "twin"))
            print(
                f"{name:34} {runtime:8} {aio:9.0f} {twin:7.0f} {twin / aio:6.2f}"
                f" {steps['asyncio']:16.0f} {steps['twin']:6.0f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
