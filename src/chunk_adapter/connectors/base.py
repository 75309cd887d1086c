"""The connector protocol: what an adapter talks to.

A connector is a key-value store with two operations::

    put(key: str, value: dict) -> None    # may raise; a put that raised stored nothing
    get(key: str) -> dict | None          # None: nothing under that key (yet)

A ``get`` may consume the value (shared-memory connectors do). Keys never
collide across requests, stages or chunks: see :func:`chunk_key`.

Optional capability (event-driven receive, beyond the design card): a
connector may also offer ::

    subscribe(callback: Callable[[str], None]) -> Callable[[], None]

calling ``callback(key)`` after each successful put (from any thread, possibly
late or more than once, never before the value is readable) and returning a
function that ends the subscription. An adapter that finds ``subscribe`` waits
for such a call instead of sleeping and re-polling; it still re-polls now and
then, so a lost notification costs latency, never a chunk.

Optional capability (stream identity, rule R29): a connector whose get consumes
may offer ::

    abandon(key: str) -> bool
    sweep(key: str) -> bool | None

The reference adapter calls ``abandon`` (from its RECV thread) when a
registration is cleaned up before its stream's final, with the key it would
have read next; the connector's later gets of that request and stage then
throw the rest of that stream away (``None``), so a reused request id never
reads an older stream's chunk (``False``: the reader had handed out nothing of
an unfinished stream there, so none was left). ``sweep`` (any key of that request and stage)
throws away the next chunk of that rest if it is there, touching no other
stream's value: ``True`` progress, ``False`` nothing there yet, ``None``
nothing left to wait for. Shared memory and Redis offer both
(``connectors/_stream_ids.py``).

Optional hint: a connector whose store can be briefly unreachable sets
``put_retry_window`` (seconds) and the reference adapter spreads a non-final
chunk's put tries over that long unless told otherwise (its
``put_retry_window`` option). Shared memory and Redis set
:data:`OUTAGE_RETRY_WINDOW`; the in-process ``MemoryConnector`` cannot have an
outage and sets none. Wrappers pass the hint through.

Permanent errors (rule R25). A put that can never succeed however often it
is retried (the value cannot be serialised, is too large for the store, the
store refuses this process, the key is held by someone else) raises an
exception whose ``permanent`` attribute is ``True`` — :class:`PermanentError`
or any other — or a :class:`PermissionError`. The adapter does not retry it
(:func:`is_permanent`). Every other exception is transient and retried.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from ..errors import ConnectorError

__all__ = [
    "OUTAGE_RETRY_WINDOW",
    "ClosedOnce",
    "Connector",
    "ConnectorWrapper",
    "NamespaceShared",
    "NotifyingConnector",
    "PermanentError",
    "Subscribe",
    "Subscriptions",
    "ValueTooLarge",
    "chunk_key",
    "is_permanent",
    "process_exists",
    "stage_of",
    "subscription",
]

Subscribe = Callable[[Callable[[str], None]], Callable[[], None]]

# Seconds over which the reference adapter spreads a non-final chunk's put tries,
# by default, on a connector whose store can go away for a moment (a Redis
# restart, a full /dev/shm): the connector's ``put_retry_window`` attribute.
OUTAGE_RETRY_WINDOW = 2.0


@runtime_checkable
class Connector(Protocol):
    """Anything with ``put(key, value)`` and ``get(key)`` (see module doc)."""

    def put(self, key: str, value: dict[str, Any]) -> None: ...

    def get(self, key: str) -> dict[str, Any] | None: ...


_CHUNK_KEY = re.compile(r".+_(-?\d+)_\d+")


def stage_of(key: str) -> int | None:
    """The stage a chunk key names (:func:`chunk_key`), or ``None`` for a key of another
    shape."""
    match = _CHUNK_KEY.fullmatch(key)
    return int(match.group(1)) if match else None


def process_exists(pid: int) -> bool:
    """Whether a process *pid* exists on this host (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and is not ours to signal
        return True
    return True


def chunk_key(request_id: str, stage_id: int, chunk_id: int) -> str:
    """The key of one chunk: ``f"{request_id}_{stage_id}_{chunk_id}"`` (rule R1).

    The sender passes its own ``stage_id``; the receiver passes its
    ``src_stage_id``, so both name the same chunk with the same key.
    """
    return f"{request_id}_{stage_id}_{chunk_id}"


class PermanentError(ConnectorError):
    """A put that can never succeed; the adapter does not retry it (see module doc)."""

    permanent = True


class NamespaceShared(PermanentError):
    """Another live process already writes (or consumes) this stage's keys in this
    namespace or prefix: two pipelines share it by accident. Nothing was stored or read;
    the message names the process and the fix. ``permanent`` is ``False`` where the
    holder may be a process that died and whose claim has yet to expire (Redis)."""

    def __init__(self, message: str, *, permanent: bool = True) -> None:
        super().__init__(message)
        self.permanent = permanent


class ValueTooLarge(PermanentError):
    """A value bigger than the store can ever hold; nothing was stored."""


def is_permanent(exc: BaseException) -> bool:
    """Whether retrying the operation that raised *exc* is pointless (see module doc)."""
    return getattr(exc, "permanent", False) is True or isinstance(exc, PermissionError)


@runtime_checkable
class NotifyingConnector(Connector, Protocol):
    """A connector with the optional ``subscribe`` capability (see module doc)."""

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]: ...


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound="ClosedOnce")


class ClosedOnce:
    """A connector that holds something until ``close()`` (shared memory, Redis).

    ``with`` closes it; :meth:`_check_open` refuses a call after ``close()``. The
    subclass sets ``_closed`` in ``__init__`` and ``close()``.
    """

    _closed: bool

    def close(self) -> None:
        raise NotImplementedError

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ConnectorError(f"{op} on a closed {self!r}; make a new connector")

    def __enter__(self: C) -> C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


L = TypeVar("L", bound=_Closable)


class Subscriptions(Generic[L]):
    """The listeners of a notifying connector's live subscriptions (Redis, the doorbell).

    :meth:`add` keeps a listener and returns the subscription's ``unsubscribe``:
    it drops the listener (if still kept) and closes it. :meth:`take_all` hands
    every kept listener to the connector's ``close()``, which closes them. A
    listener's ``close()`` must be idempotent: ``unsubscribe`` after ``close()``
    closes it again.
    """

    def __init__(self) -> None:
        # Guards _live; held only to add, drop or take listeners, never while one is
        # closed. Nobody waits on it.
        self._lock = threading.Lock()
        self._live: list[L] = []

    def add(self, listener: L) -> Callable[[], None]:
        """Keep *listener*; return the function that ends its subscription."""
        with self._lock:
            self._live.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._live:
                    self._live.remove(listener)
            listener.close()

        return unsubscribe

    def take_all(self) -> list[L]:
        """Every listener kept now, no longer kept (the caller closes them)."""
        with self._lock:
            taken, self._live = self._live, []
        return taken


def subscription(connector: object) -> Subscribe | None:
    """The connector's ``subscribe`` if it offers one, else ``None``."""
    fn = getattr(connector, "subscribe", None)
    return fn if callable(fn) else None


class ConnectorWrapper:
    """Base of the wrappers: keeps ``inner`` and passes ``subscribe`` (and the
    ``put_retry_window`` hint) through.

    A wrapper offers ``subscribe`` exactly when the connector it wraps does, so
    wrapping never switches an adapter between polling and event-driven receive.
    """

    def __init__(self, inner: Connector) -> None:
        self.inner = inner

    @property
    def put_retry_window(self) -> float | None:
        """The wrapped connector's retry-window hint (see module doc), or ``None``."""
        hint = getattr(self.inner, "put_retry_window", None)
        return hint if isinstance(hint, (int, float)) and not isinstance(hint, bool) else None

    @property
    def stream_identity(self) -> bool:
        """Whether the wrapped connector keeps stream identity (see module doc)."""
        return getattr(self.inner, "stream_identity", False) is True

    @property
    def abandon(self) -> Callable[[str], bool]:
        """The wrapped connector's ``abandon`` (see module doc), if it has one."""
        return cast(Callable[[str], bool], self._identity("abandon"))

    @property
    def sweep(self) -> Callable[[str], bool | None]:
        """The wrapped connector's ``sweep`` (see module doc), if it has one."""
        return cast(Callable[[str], "bool | None"], self._identity("sweep"))

    def _identity(self, name: str) -> object:
        fn = getattr(self.inner, name, None)
        if not callable(fn):
            raise AttributeError(f"{self.inner!r} offers no {name} (no stream identity)")
        return fn

    @property
    def subscribe(self) -> Subscribe:
        fn = subscription(self.inner)
        if fn is None:
            raise AttributeError(f"{self.inner!r} offers no subscribe (it is polled)")
        return fn
