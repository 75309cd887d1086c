"""A pure, single-threaded model of the contract (docs/contract.md).

No threads, no clocks: :class:`ContractModel` is fed the scheduler's calls and
the environment's choices (injected failures, gates held and released) and
computes what a correct adapter must have done once it is **quiescent** —
every background action that can happen has happened, and the SAVE and RECV
threads are either idle or held at a gate. The stateful machines use it to
know what to wait for after each step and what ``poll_ready`` must return.

It models the contract's one SAVE thread and one RECV thread:

* SAVE: the FIFO in save order; a cancelled request's non-finals are dropped
  and its final is put with data ``None`` without a build (R6); a failed build
  drops a non-final and makes a final's data ``None`` (R7); a ``None`` payload
  skips a non-final (R8); put failures are retried, a non-final is dropped
  after ``put_tries`` tries and a final is retried until it succeeds (R10);
  the id advances only on success; a final resets the stream and the cancel
  mark (R9, R11).
* RECV: each current registration gets its next id until the final (R13);
  values are committed under a token check (R16); ``poll_ready`` swaps the
  ready lists (R15); ``cleanup_receiver`` forgets everything (R16);
  ``load_async`` is idempotent (R12).
* The connector consumes on get (a shared-memory store).

It models a **pipeline**: a sender adapter (``stage_id``) whose chunks a
receiver adapter reads (its ``src_stage_id``, by default the sender's stage),
or one adapter receiving its own chunks (a loopback, both ids equal): what a
correct adapter does is the same either way. ``stop()`` stops both sides.

Where the contract leaves a choice, the model takes the one the harness makes
deterministic: a chunk held at a put gate when ``cancel_sender`` comes is put
(it is past the check); the machines never cancel a request whose build is
held, the one case where both outcomes are allowed (R6). The model assumes
the contract's single SAVE and single RECV thread: while the RECV thread is
held at a get, no other request is received — unless the adapter shows it gets
for other registrations meanwhile (``gets_beside_held``, learned by the harness).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ContractModel", "HeldGet", "HeldSave", "Item", "ModelStopped", "identity"]

BuildFn = Callable[[str, Any, bool], Any]


def identity(request_id: str, snapshot: Any, is_final: bool) -> Any:
    return snapshot


class ModelStopped(RuntimeError):
    """The model's answer to a sending or registering call after ``stop()`` (R19)."""


@dataclass(frozen=True)
class Item:
    """One saved chunk in the FIFO."""

    request_id: str
    snapshot: Any
    is_final: bool
    serial: int


@dataclass
class HeldSave:
    """The SAVE thread, held at a gate: in ``build`` of *item*, or in the put of *key*."""

    stage: Literal["build", "put"]
    item: Item
    key: str | None = None
    value: dict[str, Any] | None = None


@dataclass
class HeldGet:
    """The RECV thread, held in the get of *key* for registration *token* of *request_id*."""

    request_id: str
    token: int
    key: str


@dataclass
class _Registration:
    token: int
    next_id: int = 0
    done: bool = False


class ContractModel:
    """What a correct adapter has done once quiescent (see module doc).

    Observable expectations, cumulative: ``ok_puts`` (successful puts per key),
    ``failed_puts`` (puts that raised), ``builds`` (completed builds per
    request), ``ok_gets`` (gets that returned a value, per key), ``sent`` (the
    successful puts in order, as ``(key, value)``).
    """

    def __init__(
        self,
        *,
        stage_id: int = 0,
        src_stage_id: int | None = None,
        put_tries: int = 3,
        build: BuildFn = identity,
    ) -> None:
        """*stage_id*: the sender's stage (its keys); *src_stage_id*: the stage the
        receiver reads (default: the sender's, so it receives what is sent)."""
        if put_tries < 1:
            raise ValueError(f"put_tries counts every try and must be >= 1, got {put_tries!r}")
        self.stage_id = stage_id
        self.src_stage_id = stage_id if src_stage_id is None else src_stage_id
        self.put_tries = put_tries
        self.build = build
        self.stopped = False
        # sender
        self.fifo: deque[Item] = deque()
        self.next_send: dict[str, int] = {}
        self.cancelled: set[str] = set()
        self.held_save: HeldSave | None = None
        self.build_gates: Counter[str] = Counter()
        self.put_gates: Counter[str] = Counter()
        self.put_failures: Counter[str] = Counter()  # per request (its sender stream)
        self.build_failures: Counter[str] = Counter()
        # receiver
        self.regs: dict[str, _Registration] = {}
        self.ready: dict[str, list[dict[str, Any]]] = {}
        self.held_get: HeldGet | None = None
        self.gets_beside_held = False
        """The receiver gets for other registrations while one get is held (a task or a
        worker per registration): a design the contract allows beside the one RECV thread
        this model assumes, learned from the adapter (:meth:`learn_gets_beside_held`)."""
        self.get_gates: Counter[str] = Counter()
        self._tokens = 0
        # the connector
        self.store: dict[str, dict[str, Any]] = {}
        # observations
        self.ok_puts: Counter[str] = Counter()
        self.failed_puts = 0
        self.builds: Counter[str] = Counter()
        self.ok_gets: Counter[str] = Counter()
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self._serial = 0

    # ------------------------------------------------------------ scheduler calls
    def save(self, request_id: str, snapshot: Any, is_final: bool) -> Item:
        self._running("save_async")
        self._serial += 1
        item = Item(request_id, snapshot, is_final, self._serial)
        self.fifo.append(item)
        self._settle()
        return item

    def cancel(self, request_id: str) -> None:
        self._running("cancel_sender")
        self.cancelled.add(request_id)
        self._settle()

    def load(self, request_id: str) -> None:
        self._running("load_async")
        if request_id not in self.regs:
            self._tokens += 1
            self.regs[request_id] = _Registration(self._tokens)
        self._settle()

    def poll(self) -> dict[str, list[dict[str, Any]]]:
        ready, self.ready = self.ready, {}
        return ready

    def cleanup(self, request_id: str) -> None:
        self.regs.pop(request_id, None)
        self.ready.pop(request_id, None)

    def stop(self) -> None:
        self.stopped = True

    # ------------------------------------------------------------- environment
    def fail_puts(self, request_id: str, times: int) -> None:
        """The next *times* puts of *request_id*'s stream raise.

        Per stream, not "any key": R5 orders a request's chunks only, so which of
        two requests' puts comes next is the adapter's choice, and a global count
        would make it the model's. Like ``FaultyConnector.fail_next``: scripted
        failures overlap, they do not add up — two "fail the next put" in a row
        fail one put.
        """
        self.put_failures[request_id] = max(self.put_failures[request_id], times)
        self._settle()

    @property
    def put_failures_pending(self) -> int:
        """Scripted put failures not yet met, all streams together."""
        return sum(self.put_failures.values())

    def fail_build(self, request_id: str, times: int = 1) -> None:
        self.build_failures[request_id] += times
        self._settle()

    def hold_build(self, request_id: str) -> None:
        """Hold the next build of *request_id* at a gate."""
        self.build_gates[request_id] += 1
        self._settle()

    def hold_put(self, key: str) -> None:
        """Hold the next put of *key* that gets past the fault check."""
        self.put_gates[key] += 1
        self._settle()

    def hold_get(self, key: str) -> None:
        """Hold the next get of *key* that gets past the fault check."""
        self.get_gates[key] += 1
        self._settle()

    def release_save(self) -> None:
        held, self.held_save = self.held_save, None
        if held is None:
            return
        if held.stage == "build":
            self._build_and_put(held.item, cancelled=False, gate_passed=True)
        else:
            assert held.key is not None and held.value is not None
            self._put_ok(held.item, held.key, held.value)
        self._settle()

    def release_recv(self, *, held_got: bool | None = None) -> None:
        """The held get returns. *held_got*: whether it returned a value, when the harness
        saw it. ``False`` while the model has the key's value stored and a current
        registration polls that key: the registration's own get took it first (a receiver
        that gets beside a held get, learned from now on)."""
        held, self.held_get = self.held_get, None
        if held is None:
            return
        reg = self.regs.get(held.request_id)
        if (
            held_got is False
            and held.key in self.store
            and reg is not None
            and not reg.done
            and reg.token != held.token
            and self.key(held.request_id, reg.next_id, receiver=True) == held.key
        ):
            self.learn_gets_beside_held()  # the current registration gets it
            return
        value = self.store.pop(held.key, None)
        if value is not None:
            self.ok_gets[held.key] += 1
            reg = self.regs.get(held.request_id)
            if reg is not None and reg.token == held.token:
                self._commit(held.request_id, reg, value)
        self._settle()

    def learn_gets_beside_held(self) -> None:
        """From now on, model a receiver that gets beside a held get (``gets_beside_held``)."""
        self.gets_beside_held = True
        self._settle()

    # ---------------------------------------------------------------- queries
    def key(self, request_id: str, chunk_id: int, *, receiver: bool = False) -> str:
        stage = self.src_stage_id if receiver else self.stage_id
        return f"{request_id}_{stage}_{chunk_id}"

    def pending(self, request_id: str) -> list[Item]:
        """Saved items of *request_id* not yet finished by the SAVE thread."""
        items = [i for i in self.fifo if i.request_id == request_id]
        if self.held_save is not None and self.held_save.item.request_id == request_id:
            items.insert(0, self.held_save.item)
        return items

    def next_send_key(self, request_id: str) -> str:
        return self.key(request_id, self.next_send.get(request_id, 0))

    def polling_key(self, request_id: str) -> str | None:
        """The key a current, unfinished registration gets next; ``None`` otherwise."""
        reg = self.regs.get(request_id)
        if reg is None or reg.done:
            return None
        return self.key(request_id, reg.next_id, receiver=True)

    def registered(self, request_id: str) -> bool:
        return request_id in self.regs

    # ---------------------------------------------------------------- internals
    def _running(self, call: str) -> None:
        if self.stopped:
            raise ModelStopped(f"{call} after stop() raises RuntimeError (R19)")

    def _settle(self) -> None:
        if self.stopped:
            return
        while self.held_save is None and self.fifo:
            item = self.fifo.popleft()
            cancelled = item.request_id in self.cancelled
            if cancelled and not item.is_final:
                continue  # R6: dropped without a build
            self._build_and_put(item, cancelled=cancelled, gate_passed=False)
        self._receive()

    def _build_and_put(self, item: Item, *, cancelled: bool, gate_passed: bool) -> None:
        rid = item.request_id
        payload: Any = None
        if not cancelled:
            if not gate_passed and self.build_gates[rid] > 0:
                self.build_gates[rid] -= 1
                self.held_save = HeldSave("build", item)
                return
            self.builds[rid] += 1
            if self.build_failures[rid] > 0:
                self.build_failures[rid] -= 1
                if not item.is_final:
                    return  # R7: dropped
            else:
                payload = self.build(rid, item.snapshot, item.is_final)
            if payload is None and not item.is_final:
                return  # R8: skipped, no id used
        value = {"data": payload, "finished": item.is_final}
        tries = 0
        while True:
            key = self.next_send_key(rid)
            if self.put_failures[rid] > 0:
                self.put_failures[rid] -= 1
                self.failed_puts += 1
                tries += 1
                if not item.is_final and tries >= self.put_tries:
                    return  # R10: dropped, the next chunk takes the id
                continue
            if self.put_gates[key] > 0:
                self.put_gates[key] -= 1
                self.held_save = HeldSave("put", item, key, value)
                return
            self._put_ok(item, key, value)
            return

    def _put_ok(self, item: Item, key: str, value: dict[str, Any]) -> None:
        rid = item.request_id
        self.store[key] = value
        self.ok_puts[key] += 1
        self.sent.append((key, value))
        if item.is_final:  # R11: the sender forgets the request
            self.next_send.pop(rid, None)
            self.cancelled.discard(rid)
        else:
            self.next_send[rid] = self.next_send.get(rid, 0) + 1

    def _receive(self) -> None:
        progress = True
        while progress and (self.held_get is None or self.gets_beside_held):
            progress = False
            for rid, reg in list(self.regs.items()):
                if reg.done or (self.held_get is not None and reg.token == self.held_get.token):
                    continue  # finished, or its get is the one in flight
                key = self.key(rid, reg.next_id, receiver=True)
                if self.get_gates[key] > 0 and self.held_get is None:
                    self.get_gates[key] -= 1
                    self.held_get = HeldGet(rid, reg.token, key)
                    return
                value = self.store.pop(key, None)
                if value is None:
                    continue
                self.ok_gets[key] += 1
                self._commit(rid, reg, value)
                progress = True

    def _commit(self, rid: str, reg: _Registration, value: dict[str, Any]) -> None:
        self.ready.setdefault(rid, []).append(value)
        reg.next_id += 1
        if value.get("finished") is True:
            reg.done = True
