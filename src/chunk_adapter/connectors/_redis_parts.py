"""The Redis connector's parts outside the connector class: its errors, the
prefix and TTL checks, importing redis-py, the bounded header memories, and the
pub/sub listener thread behind ``subscribe`` (see :mod:`chunk_adapter.connectors.redis`)."""

from __future__ import annotations

import importlib
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..errors import ConnectorError, InvalidValue

__all__ = [
    "NOTIFY_THREAD",
    "HeaderMemory",
    "PutListener",
    "RedisConnectorError",
    "RedisNotInstalled",
    "check_prefix",
    "command_error",
    "import_redis",
    "ttl_ms",
]

NOTIFY_THREAD = "chunk-adapter-redis-notify"
# Error replies no retry can fix: a refused login, a missing ACL permission, a size limit.
_PERMANENT_REPLIES = ("NOAUTH", "WRONGPASS", "NOPERM", "string exceeds maximum allowed size")
# ... and a server certificate that the client does not trust (rediss://).
_UNTRUSTED_TLS = "CERTIFICATE_VERIFY_FAILED"
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


def import_redis() -> Any:
    try:
        return importlib.import_module("redis")
    except ImportError as exc:
        raise RedisNotInstalled(
            "RedisConnector needs redis-py, which is not installed: "
            "pip install 'chunk-adapter[redis]'"
        ) from exc


def ttl_ms(ttl: object) -> int | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise InvalidValue(
            f"ttl is the lifetime of a stored value in seconds, a number > 0 (or None for no "
            f"expiry), got ttl={ttl!r}"
        )
    return max(1, math.ceil(ttl * 1000))


def command_error(op: str, key: str, exc: BaseException) -> RedisConnectorError:
    """The error for *exc* raised by Redis command *op* on *key* (R25: permanent or not)."""
    redis = import_redis()
    text = str(exc)
    refused = (
        redis.AuthenticationError,
        redis.exceptions.AuthorizationError,
        redis.exceptions.NoPermissionError,  # NOPERM: redis-py drops the word
    )
    permanent = isinstance(exc, refused) or any(reply in text for reply in _PERMANENT_REPLIES)
    if _UNTRUSTED_TLS in text:
        permanent = True
        fix = (
            " Fix: name the CA that signed the server's certificate, e.g. "
            "rediss://host:6379/0?ssl_ca_certs=/path/to/ca.pem"
        )
    else:
        fix = " Fix the password or ACL in the url=" if permanent else ""
    return RedisConnectorError(
        f"{op}({key!r}) on Redis failed: {type(exc).__name__}: {text}.{fix}",
        permanent=permanent,
    )


class HeaderMemory:
    """Redis name -> value header, for the last *size* names (oldest forgotten first).

    Not thread-safe: the connector calls it under its own lock.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._headers: OrderedDict[bytes, bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._headers)

    def remember(self, name: bytes, header: bytes) -> None:
        self._headers[name] = header
        self._headers.move_to_end(name)
        while len(self._headers) > self.size:
            self._headers.popitem(last=False)

    def pop(self, name: bytes) -> bytes | None:
        return self._headers.pop(name, None)

    def get(self, name: bytes) -> bytes | None:
        return self._headers.get(name)


class PutListener:
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
        errors = import_redis().RedisError
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
