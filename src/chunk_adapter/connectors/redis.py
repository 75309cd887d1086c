"""A connector on Redis (redis-py): namespaced keys, a TTL, consume on get.

Each value is stored as ``SET prefix+key <bytes> PX ttl``: the TTL bounds how
long an abandoned stream (a receiver that never comes, a sender that died) can
occupy the store. ``get`` is ``GETDEL`` by default (atomic: exactly one reader
gets a value), ``GET`` with ``consume_on_get=False``. A later put of the same key
overwrites (as :class:`~chunk_adapter.connectors.memory.MemoryConnector` does),
so a retried put is idempotent.

With ``notify=True`` every put also publishes the key on ``prefix + "puts"`` in
the same ``MULTI``/``EXEC`` transaction, and the connector offers the optional
``subscribe(callback)`` capability (see :mod:`chunk_adapter.connectors.base`):
a listener thread calls ``callback(key)`` for each such put, from any process.
Pub/sub is at most once (a message sent while the listener reconnects is
lost), which the capability allows: the adapter re-polls now and then.

Trust and isolation. Values are stored with the ``safe-json`` serializer by
default, which cannot run code when it reads (anyone who can write to the
database could otherwise run code in every receiver); pass
``serializer=PICKLE`` only for a database no untrusted client can write.
Authenticate and encrypt through the URL: ``redis://:password@host:6379/0``,
``redis://user:password@host/0`` (ACL) or ``rediss://...`` (TLS; redis-py's
``ssl_*`` query arguments, or ``client=`` a ``redis.Redis`` you configured).
A prefix is a name plus ``":"`` and the name may not contain ``":"``, so no
prefix is the start of another's key (``job:`` never sees ``job1:``'s keys).

Permanent errors (R25): a value over ``max_value_bytes`` (Redis's own limit,
512 MiB, by default) raises :class:`~.base.ValueTooLarge` before anything is
sent; a refused login or a missing ACL permission raises a
:class:`RedisConnectorError` with ``permanent = True``. The adapter retries
neither.

redis-py is imported when the first connector is made; without it, the error
says ``pip install 'chunk-adapter[redis]'``.
"""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..errors import ConnectorError, InvalidType, InvalidValue
from .base import OUTAGE_RETRY_WINDOW, ValueTooLarge
from .serialization import SAFE, Serializer, as_serializer, check_key, decode_value, encode_value

__all__ = ["DEFAULT_TTL", "RedisConnector", "RedisConnectorError", "RedisNotInstalled"]

DEFAULT_TTL = 600.0  # seconds: far longer than any chunk waits, short enough to clean up
MAX_VALUE_BYTES = 512 * 1024 * 1024  # Redis's proto-max-bulk-len default
# Error replies no retry can fix: a refused login, a missing ACL permission, a size limit.
_PERMANENT_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "string exceeds maximum allowed size")
NOTIFY_THREAD = "chunk-adapter-redis-notify"
_GLOB_SPECIAL = "*?[]\\"
_log = logging.getLogger("chunk_adapter.redis")


class RedisNotInstalled(ConnectorError, ImportError):
    """redis-py is missing."""


class RedisConnectorError(ConnectorError):
    """A Redis command failed (connection refused, timeout, server error).

    ``permanent`` is ``True`` for failures no retry can fix (R25): a refused
    login, a missing permission, a value over the server's size limit.
    """

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def check_prefix(prefix: object) -> str:
    """``name:`` from ``name`` or ``name:``; a name with ``:`` in it could be the
    start of another prefix's keys, so it is refused."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidValue(
            f"prefix namespaces the keys and must be a non-empty str, got {prefix!r}"
        )
    name = prefix[:-1] if prefix.endswith(":") else prefix
    if not name or ":" in name:
        raise InvalidValue(
            f"prefix must be a name with no ':' inside (one ':' is added at the end), got "
            f"{prefix!r}: a ':' inside lets one prefix read another's keys ('a:' + 'b:x' is "
            f"'a:b:' + 'x'). Use e.g. {name.replace(':', '-') or 'chunk-adapter'!r}"
        )
    return name + ":"


def _redis() -> Any:
    try:
        return importlib.import_module("redis")
    except ImportError as exc:
        raise RedisNotInstalled(
            "RedisConnector needs redis-py, which is not installed: "
            "pip install 'chunk-adapter[redis]'"
        ) from exc


def _ttl_ms(ttl: object) -> int | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise InvalidValue(
            f"ttl is the lifetime of a stored value in seconds, a number > 0 (or None for no "
            f"expiry), got ttl={ttl!r}"
        )
    return max(1, math.ceil(ttl * 1000))


class RedisConnector:
    """``put``/``get`` on a Redis server (see module doc).

    Pass a ``redis.Redis`` ``client`` (yours to close), or a ``url`` such as
    ``"redis://127.0.0.1:6379/0"`` (the connector makes and closes the client).
    ``prefix`` namespaces the keys (sender and receiver pass the same one;
    ``"job"`` and ``"job:"`` are the same prefix); ``ttl`` is in seconds
    (``None``: no expiry); ``serializer`` is a ``dumps``/``loads`` pair
    (default ``SAFE``, which cannot run code). See the module doc for
    passwords and TLS.
    """

    # A server restart or failover takes a moment: the reference adapter gives a
    # non-final this long before dropping it (see connectors.base).
    put_retry_window: float | None = OUTAGE_RETRY_WINDOW

    def __init__(
        self,
        client: Any = None,
        *,
        url: str | None = None,
        prefix: str = "chunk-adapter:",
        ttl: float | None = DEFAULT_TTL,
        consume_on_get: bool = True,
        serializer: Serializer | Any = SAFE,
        notify: bool = False,
        socket_timeout: float = 5.0,
        max_value_bytes: int = MAX_VALUE_BYTES,
    ) -> None:
        redis = _redis()
        prefix = check_prefix(prefix)
        if client is not None and url is not None:
            raise InvalidValue("pass client= or url=, not both")
        if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int):
            raise InvalidType(f"max_value_bytes must be an int, got {max_value_bytes!r}")
        if max_value_bytes < 1:
            raise InvalidValue(f"max_value_bytes must be >= 1, got {max_value_bytes!r}")
        self.max_value_bytes = max_value_bytes
        self.prefix = prefix
        self.ttl_ms = _ttl_ms(ttl)
        self.consume_on_get = bool(consume_on_get)
        self.serializer = as_serializer(serializer)
        self.notify = bool(notify)
        self.channel = f"{prefix}puts"
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError,)
        if client is None:
            client = redis.Redis.from_url(
                url or "redis://127.0.0.1:6379/0",
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
            )
            self._owns_client = True
        elif not callable(getattr(client, "set", None)):
            raise InvalidType(f"client must be a redis.Redis, got {client!r}")
        else:
            self._owns_client = False
        self.client = client
        self._getdel = True  # cleared if the server predates GETDEL (Redis < 6.2)
        # Guards _listeners and _closed; never held while talking to Redis
        # except to stop listeners in close(). Nobody waits on it.
        self._lock = threading.Lock()
        self._listeners: list[_PutListener] = []
        self._closed = False

    def _name(self, key: str) -> bytes:
        return (self.prefix + key).encode("utf-8", "surrogatepass")

    def _fail(self, op: str, key: str, exc: BaseException) -> RedisConnectorError:
        redis = _redis()
        text = str(exc)
        permanent = isinstance(
            exc, (redis.AuthenticationError, redis.exceptions.AuthorizationError)
        ) or any(reply in text for reply in _PERMANENT_REPLIES)
        fix = " Fix the password or ACL in the url=" if permanent else ""
        return RedisConnectorError(
            f"{op}({key!r}) on Redis failed: {type(exc).__name__}: {text}.{fix}",
            permanent=permanent,
        )

    # -------------------------------------------------------------- connector
    def put(self, key: str, value: dict[str, Any]) -> None:
        """``SET prefix+key value PX ttl`` (and publish the key with ``notify``)."""
        check_key(key, "put")
        self._check_open("put")
        data = encode_value(self.serializer, key, value)
        if len(data) > self.max_value_bytes:
            raise ValueTooLarge(
                f"put({key!r}): the value takes {len(data)} bytes, over max_value_bytes="
                f"{self.max_value_bytes} (Redis refuses bigger strings); nothing was stored. "
                "Fix: send smaller chunks"
            )
        name = self._name(key)
        try:
            if self.notify:
                pipe = self.client.pipeline(transaction=True)
                pipe.set(name, data, px=self.ttl_ms)
                pipe.publish(self.channel, key.encode("utf-8", "surrogatepass"))
                pipe.execute()
            else:
                self.client.set(name, data, px=self.ttl_ms)
        except self._errors as exc:
            raise self._fail("put", key, exc) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        """The value under *key* (``GETDEL`` by default), or ``None``."""
        check_key(key, "get")
        self._check_open("get")
        name = self._name(key)
        try:
            raw = self._fetch(name)
        except self._errors as exc:
            raise self._fail("get", key, exc) from exc
        if raw is None:
            return None
        return decode_value(self.serializer, key, bytes(raw))

    def contains(self, key: str) -> bool:
        """Whether a value sits under *key* now (nothing is consumed)."""
        check_key(key, "contains")
        try:
            return bool(self.client.exists(self._name(key)))
        except self._errors as exc:
            raise self._fail("contains", key, exc) from exc

    def _fetch(self, name: bytes) -> Any:
        if not self.consume_on_get:
            return self.client.get(name)
        if self._getdel:
            try:
                return self.client.getdel(name)
            except _redis().ResponseError as exc:
                if "unknown command" not in str(exc).lower():
                    raise
                self._getdel = False
        pipe = self.client.pipeline(transaction=True)
        pipe.get(name)
        pipe.delete(name)
        return pipe.execute()[0]

    # ------------------------------------------------------------- notifying
    @property
    def subscribe(self) -> Callable[[Callable[[str], None]], Callable[[], None]]:
        """Present only with ``notify=True`` (see the connector protocol)."""
        if not self.notify:
            raise AttributeError("RedisConnector(notify=False) is polled; pass notify=True")
        return self._subscribe

    def _subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        self._check_open("subscribe")
        listener = _PutListener(self.client, self.channel, callback)
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)
            listener.close()

        return unsubscribe

    # ----------------------------------------------------------- maintenance
    def keys(self) -> list[str]:
        """The keys stored under this prefix now (without the prefix)."""
        pattern = "".join("\\" + c if c in _GLOB_SPECIAL else c for c in self.prefix) + "*"
        found = self.client.scan_iter(match=pattern.encode("utf-8", "surrogatepass"), count=500)
        cut = len(self.prefix.encode("utf-8", "surrogatepass"))
        return sorted(bytes(k)[cut:].decode("utf-8", "surrogatepass") for k in found)

    def purge(self) -> int:
        """Delete every key under this prefix (a dead sender's leftovers); returns how many."""
        names = [self._name(k) for k in self.keys()]
        removed = 0
        for i in range(0, len(names), 500):
            removed += int(self.client.unlink(*names[i : i + 500]))
        return removed

    def close(self) -> None:
        """Stop the listeners, and close the client if this connector made it. Idempotent.

        Stored values stay (their TTL bounds them): a receiver may still need them.
        """
        with self._lock:
            listeners, self._listeners = self._listeners, []
            first, self._closed = not self._closed, True
        for listener in listeners:
            listener.close()
        if first and self._owns_client:
            self.client.close()

    def _check_open(self, op: str) -> None:
        if self._closed:
            raise ConnectorError(f"{op} on a closed {self!r}; make a new connector")

    def __enter__(self) -> RedisConnector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        ttl = None if self.ttl_ms is None else self.ttl_ms / 1000
        return (
            f"RedisConnector(prefix={self.prefix!r}, ttl={ttl}, "
            f"consume_on_get={self.consume_on_get}, notify={self.notify})"
        )


class _PutListener:
    """One subscription: a pub/sub connection and the thread that calls back."""

    def __init__(
        self, client: Any, channel: str, callback: Callable[[str], None], timeout: float = 5.0
    ) -> None:
        self.callback = callback
        self.channel = channel
        self._pubsub = client.pubsub()
        self._pubsub.subscribe(channel)
        # Confirmed before returning: a put after subscribe() returns is seen.
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._pubsub.close()
                raise RedisConnectorError(
                    f"subscribing to {channel!r} got no confirmation within {timeout} s"
                )
            message = self._pubsub.get_message(timeout=remaining)
            if message is not None and message["type"] == "subscribe":
                break
        # Set by close(); the thread checks it between 0.1 s reads.
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=NOTIFY_THREAD, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        errors = _redis().RedisError
        while not self._stop.is_set():
            try:
                message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            except (errors, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                _log.warning("notification listener on %r: %r; reconnecting", self.channel, exc)
                self._stop.wait(0.1)  # redis-py resubscribes on the next read
                continue
            if message is None or message.get("type") != "message":
                continue
            key = bytes(message["data"]).decode("utf-8", "surrogatepass")
            try:
                self.callback(key)
            except Exception:
                _log.exception("put notification callback failed for key %r", key)

    def close(self, timeout: float = 1.0) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        if not self._thread.is_alive():
            self._pubsub.close()
