"""A connector on Redis (redis-py): namespaced keys, a TTL, consume on get.

Each value is stored as ``SET prefix+key <header><bytes> NX PX ttl``: the TTL
bounds how long an abandoned stream (a receiver that never comes, a sender that
died) can occupy the store. ``get`` is ``GETDEL`` by default (atomic: exactly
one reader gets a value), ``GET`` with ``consume_on_get=False``.

No overwrite. ``NX`` makes a put store nothing when its key still holds a value
nobody consumed: it raises :class:`~chunk_adapter.connectors.KeyOccupied`, as the
shared-memory connector does, so a sender never silently replaces a chunk its
receiver has not read (a reused request id, a second sender on the prefix). Of
two writers racing for one key exactly one wins. The 36-byte header (``\x00CAS``,
the 16-byte id of the connector that put the value, a put number, the stream
number) says whose value is there: this connector's own means its reader will consume it, so the
error is transient and the adapter retries; anyone else's (another connector or
process, a value without the header) makes it permanent (R25), so one foreign
value cannot stall the SAVE thread. ``get`` strips the header; a value without
it (written by another tool) is read whole. A put that raised after the server
may have stored it (a timeout) is retried with the same header, so the retry
finds its own value and succeeds instead of waiting for the receiver. If the
receiver consumed the first copy before that retry, the retry stores a second
copy under the same header: the reading connector remembers the header it last
consumed under each of its last :data:`_CONSUMED_MAX` keys and throws such a
copy away (``get`` returns ``None``, and the key is free again), so neither the
stream nor the next stream of that request id ever reads a chunk twice.

Stream identity (R29). The writer's id and the stream number tag each value with
its stream, and :meth:`abandon` makes the gets of a request id throw away the
rest of a stream its reader was done with, so a reused request id never receives
an older stream's chunk (:mod:`._stream_ids`).

With ``notify=True`` a put that stored its value then publishes the key on
``prefix + "puts"``, and the connector offers the optional
``subscribe(callback)`` capability (see :mod:`chunk_adapter.connectors.base`):
a listener thread calls ``callback(key)`` for each such put, from any process.
Pub/sub is at most once (a message sent while the listener reconnects is
lost, and so is one whose PUBLISH fails: the put still succeeded, and says so
at WARNING), which the capability allows: the adapter re-polls now and then.

Trust and isolation. Values are stored with the ``safe-msgpack`` serializer by
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
sent; a refused login, a missing ACL permission or a server certificate the
client does not trust raises a :class:`RedisConnectorError` with
``permanent = True``; another writer's unconsumed value under the key raises a
permanent ``KeyOccupied``. The adapter retries none of them.

redis-py is imported when the first connector is made; without it, the error
says ``pip install 'chunk-adapter[redis]'``.

Over 400 lines, and one module because one connector class with its framing, claims and
TTL handling; the claims and parts already live in :mod:`._redis_claims` and
:mod:`._redis_parts`.
"""

from __future__ import annotations

import itertools
import logging
import struct
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import InvalidType, InvalidValue
from ._keeps_streams import KeepsStreams
from ._redis_claims import RedisClaims
from ._redis_parts import (
    HeaderMemory,
    PutListener,
    RedisConnectorError,
    RedisNotInstalled,
    check_prefix,
    command_error,
    import_redis,
    ttl_ms,
)
from ._shm_layout import KeyOccupied
from ._stream_ids import NUMBER, Leftover, StreamLedger, StreamNumbers, is_final
from .base import OUTAGE_RETRY_WINDOW, Subscriptions, ValueTooLarge
from .serialization import SAFE, Serializer, as_serializer, check_key, decode_value, encode_value

__all__ = [
    "DEFAULT_TTL",
    "HEADER_BYTES",
    "MAGIC",
    "KeyOccupied",
    "RedisConnector",
    "RedisConnectorError",
    "RedisNotInstalled",
]

DEFAULT_TTL = 600.0  # seconds: far longer than any chunk waits, short enough to clean up
MAX_VALUE_BYTES = 512 * 1024 * 1024  # Redis's proto-max-bulk-len default
_GLOB_SPECIAL = "*?[]\\"
# Every stored value starts with MAGIC, the 16-byte id of the connector that put it,
# its put number (u64): whose value a put found under its key (see module doc); and
# its stream number (u64, ._stream_ids). b"\x00CAR": the header before the stream number.
MAGIC = b"\x00CAS"
_PUT_NUMBER = struct.Struct("<Q")
_WRITER_AT = len(MAGIC)
WRITER_BYTES = 16
_STREAM_AT = len(MAGIC) + WRITER_BYTES + _PUT_NUMBER.size
HEADER_BYTES = _STREAM_AT + NUMBER.size
# Puts that raised after the server may have stored them, remembered (by key) so
# that their retry reuses the header; the oldest are forgotten beyond this many.
_UNSURE_MAX = 1024
# Headers of values this connector consumed, remembered (by key) so that a second
# copy a retry stored after the first was read is recognised; oldest out first.
_CONSUMED_MAX = 4096
_log = logging.getLogger("chunk_adapter.redis")


# KEYS[1]: a name; ARGV: MAGIC, the writer's offset and length, the stream number's
# offset and length, then the abandoned stream tags. Returns nil when nothing is
# there, 0 when another stream's value is (left in place), else the value, deleted.
_SWEEP = """
local head = redis.call('GETRANGE', KEYS[1], 0, ARGV[4] + ARGV[5] - 1)
if head == '' then return nil end
if string.sub(head, 1, string.len(ARGV[1])) ~= ARGV[1] then return 0 end
local tag = string.sub(head, ARGV[2] + 1, ARGV[2] + ARGV[3])
    .. string.sub(head, ARGV[4] + 1, ARGV[4] + ARGV[5])
for i = 6, #ARGV do
    if ARGV[i] == tag then
        local value = redis.call('GET', KEYS[1])
        redis.call('DEL', KEYS[1])
        return value
    end
end
return 0
"""


def _tag(raw: bytes) -> bytes | None:
    """The stream tag (writer id, stream number) in a value's header; ``None`` without
    a stream number."""
    stream = raw[_STREAM_AT:HEADER_BYTES]
    return raw[_WRITER_AT : _WRITER_AT + WRITER_BYTES] + stream if any(stream) else None


class RedisConnector(KeepsStreams):
    """``put``/``get`` on a Redis server (see module doc).

    Pass a ``redis.Redis`` ``client`` (yours to close), or a ``url`` such as
    ``"redis://127.0.0.1:6379/0"`` (the connector makes and closes the client).
    ``prefix`` namespaces the keys (sender and receiver pass the same one;
    ``"job"`` and ``"job:"`` are the same prefix); ``ttl`` is in seconds
    (``None``: no expiry); ``serializer`` is a ``dumps``/``loads`` pair
    (default ``SAFE``, which cannot run code). See the module doc for
    passwords and TLS. ``stream_identity`` (default ``True``, with
    ``consume_on_get``): :meth:`abandon` works, so a reused request id never reads an
    older stream's rest; ``False`` makes it do nothing.
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
        exclusive_stages: bool = True,
        stream_identity: bool = True,
    ) -> None:
        redis = import_redis()
        prefix = check_prefix(prefix)
        if client is not None and url is not None:
            raise InvalidValue("pass client= or url=, not both")
        if isinstance(max_value_bytes, bool) or not isinstance(max_value_bytes, int):
            raise InvalidType(f"max_value_bytes must be an int, got {max_value_bytes!r}")
        if max_value_bytes < 1:
            raise InvalidValue(f"max_value_bytes must be >= 1, got {max_value_bytes!r}")
        if not isinstance(exclusive_stages, bool):
            raise InvalidType(f"exclusive_stages must be True or False, got {exclusive_stages!r}")
        if not isinstance(stream_identity, bool):
            raise InvalidType(f"stream_identity must be True or False, got {stream_identity!r}")
        self.exclusive_stages = exclusive_stages
        self.max_value_bytes = max_value_bytes
        self.prefix = prefix
        self.ttl_ms = ttl_ms(ttl)
        self.consume_on_get = bool(consume_on_get)
        self.stream_identity = stream_identity and self.consume_on_get
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
        # One live process writes a stage's keys under this prefix, one consumes them
        # (._redis_claims).
        self._claims = RedisClaims(client, prefix, self._errors) if exclusive_stages else None
        if self._claims is not None:  # released by close() or when this is garbage
            weakref.finalize(self, self._claims.release)
        # This connector's id in the header of every value it puts (see module doc).
        self.writer = uuid.uuid4().bytes
        self._put_numbers = itertools.count(1)
        # Guards _closed, _unsure, _consumed and _put_numbers; never held while talking
        # to Redis. Nobody waits on it.
        self._lock = threading.Lock()
        self._listeners: Subscriptions[PutListener] = Subscriptions()
        self._closed = False
        # Headers of puts that raised after the server may have stored them; the next
        # put of that name reuses the header.
        self._unsure = HeaderMemory(_UNSURE_MAX)
        # Header of the value this connector last consumed under each name
        # (consume_on_get only): a value with the same header is a retry's second copy.
        self._consumed = HeaderMemory(_CONSUMED_MAX)
        # The stream number each put carries, and which values gets throw away (R29).
        self._streams = StreamNumbers()
        self._ledger = StreamLedger()

    def _name(self, key: str) -> bytes:
        return (self.prefix + key).encode("utf-8", "surrogatepass")

    # -------------------------------------------------------------- connector
    def put(self, key: str, value: dict[str, Any]) -> None:
        """``SET prefix+key header+value NX PX ttl`` (then publish the key with ``notify``).

        Raises :class:`KeyOccupied` (nothing stored) when the key holds a value
        nobody consumed yet: transient if this connector put it, permanent if
        anyone else did (see module doc).
        """
        check_key(key, "put")
        self._check_open("put")
        self._claim("put", key)
        data = encode_value(self.serializer, key, value)
        if HEADER_BYTES + len(data) > self.max_value_bytes:
            raise ValueTooLarge(
                f"put({key!r}): the value takes {HEADER_BYTES + len(data)} bytes with its "
                f"{HEADER_BYTES}-byte header, over max_value_bytes={self.max_value_bytes} "
                "(Redis refuses bigger strings); nothing was stored. Fix: send smaller chunks"
            )
        name = self._name(key)
        stream = NUMBER.pack(self._streams.number(key))
        with self._lock:
            reused = self._unsure.pop(name)
            put_number = _PUT_NUMBER.pack(next(self._put_numbers))
        if reused is not None and reused[_STREAM_AT:] != stream:
            reused = None  # an unsure try of another stream's chunk, never retried
        header = reused or (MAGIC + self.writer + put_number + stream)
        blob = header + data
        try:
            stored = self.client.set(name, blob, nx=True, px=self.ttl_ms)
        except self._errors as exc:
            with self._lock:  # it may have been stored all the same
                self._unsure.remember(name, header)
            raise command_error("put", key, exc) from exc
        if not stored:
            occupied = self._occupied(key, name, blob, whole=reused is not None)
            if occupied is not None:
                raise occupied
            # An earlier try of this very put was stored after all: it succeeded.
        self._streams.stored(key, is_final(value))
        if self.notify:
            self._publish(key)

    def _occupied(self, key: str, name: bytes, blob: bytes, *, whole: bool) -> KeyOccupied | None:
        """Why a ``SET NX`` of *blob* found *name* taken; ``None`` if *blob* itself is there.

        Reads the occupant's header (all of it when *whole*: the put retries an
        unsure try, which may be the occupant) in one transaction with ``EXISTS``.
        """
        try:
            pipe = self.client.pipeline(transaction=True)
            pipe.exists(name)
            if whole:
                pipe.get(name)
            else:
                pipe.getrange(name, 0, HEADER_BYTES - 1)
            exists, occupant = pipe.execute()
        except import_redis().ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise command_error("put", key, exc) from exc
            exists, occupant = 1, b""  # a list, hash, ... that someone else stored there
        except self._errors as exc:
            raise command_error("put", key, exc) from exc
        if not exists:
            return KeyOccupied(
                f"put({key!r}): the key held a value that was consumed or expired just now; "
                "nothing was stored (the adapter retries)"
            )
        occupant = bytes(occupant or b"")
        if whole and occupant == blob:
            return None
        if occupant[:_WRITER_AT] == MAGIC and occupant[_WRITER_AT:][:WRITER_BYTES] == self.writer:
            return KeyOccupied(
                f"put({key!r}): {self.prefix + key!r} still holds a value this connector put "
                "and nobody consumed yet; nothing was stored (the adapter retries)"
            )
        who = (
            "put by another connector (another process, or one that died)"
            if occupant.startswith(MAGIC)
            else "not put by a RedisConnector (no chunk-adapter header)"
        )
        return KeyOccupied(
            f"put({key!r}): {self.prefix + key!r} holds a value {who}; nothing was stored and "
            "retrying cannot help until it is consumed or expires. Fix: do not reuse a request "
            "id while another sender's value is unread, give each pipeline its own prefix, "
            f"or remove a dead sender's leftovers with RedisConnector(prefix={self.prefix!r})"
            ".purge()",
            permanent=True,
        )

    def _publish(self, key: str) -> None:
        """Announce a stored value; a failure loses the notification, never the put."""
        try:
            self.client.publish(self.channel, key.encode("utf-8", "surrogatepass"))
        except self._errors as exc:
            _log.warning(
                "put(%r) stored its value but could not notify %r (%r); receivers find it "
                "when they re-poll",
                key,
                self.channel,
                exc,
            )

    def get(self, key: str) -> dict[str, Any] | None:
        """The value under *key* (``GETDEL`` by default), or ``None``."""
        check_key(key, "get")
        self._check_open("get")
        if self.consume_on_get:
            self._claim("get", key)
        name = self._name(key)
        try:
            raw = self._fetch(name)
        except self._errors as exc:
            raise command_error("get", key, exc) from exc
        if raw is None:
            return None
        raw = bytes(raw)
        tag = None
        if raw.startswith(MAGIC) and len(raw) >= HEADER_BYTES:
            if self.consume_on_get and self._seen_before(name, raw[:HEADER_BYTES]):
                _log.info("get(%r): dropped a second copy of a value already consumed", key)
                return None
            tag = _tag(raw)
            raw = raw[HEADER_BYTES:]
        value = decode_value(self.serializer, key, raw)
        if self.stream_identity and not self._ledger.keep(key, tag, is_final(value)):
            return None  # the rest of an abandoned stream: thrown away (R29)
        return value

    def _sweep_at(self, leftover: Leftover) -> bool:
        """(:class:`KeepsStreams`) One server-side script reads the header and deletes
        only on a match."""
        name = self._name(leftover.key)
        try:
            found = self.client.eval(
                _SWEEP, 1, name, MAGIC, _WRITER_AT, WRITER_BYTES, _STREAM_AT, NUMBER.size,
                *leftover.abandoned,
            )  # fmt: skip
        except import_redis().ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise command_error("sweep", leftover.key, exc) from exc
            found = 0  # a list, hash, ... someone else stored there: not the rest
        except self._errors as exc:
            raise command_error("sweep", leftover.key, exc) from exc
        if found is None:
            return False
        if isinstance(found, int):
            self._ledger.passed(leftover)
            return True
        raw = bytes(found)
        # Remembered as consumed, as by a get: a retry's second copy of it is thrown away.
        self._seen_before(name, raw[:HEADER_BYTES])
        value = decode_value(self.serializer, leftover.key, raw[HEADER_BYTES:])
        self._ledger.keep(leftover.key, _tag(raw), is_final(value))
        return True

    def _claim(self, role: str, key: str) -> None:
        """Claim *key*'s stage for this process (:mod:`._redis_claims`)."""
        if self._claims is None:
            return
        try:
            self._claims.check(role, key, role)
        except self._errors as exc:
            raise command_error(role, key, exc) from exc

    def _seen_before(self, name: bytes, header: bytes) -> bool:
        """Whether *header* is the one last consumed under *name*; remembers it if not.

        Only a retry reuses a header (module doc), so an equal header is the second
        copy of a put whose first copy this connector already handed out.
        """
        with self._lock:
            if self._consumed.get(name) == header:
                return True
            self._consumed.remember(name, header)
            return False

    def contains(self, key: str) -> bool:
        """Whether a value sits under *key* now (nothing is consumed)."""
        check_key(key, "contains")
        try:
            return bool(self.client.exists(self._name(key)))
        except self._errors as exc:
            raise command_error("contains", key, exc) from exc

    def _fetch(self, name: bytes) -> Any:
        if not self.consume_on_get:
            return self.client.get(name)
        if self._getdel:
            try:
                return self.client.getdel(name)
            except import_redis().ResponseError as exc:
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
        return self._listeners.add(PutListener(self.client, self.channel, callback))

    # ----------------------------------------------------------- maintenance
    def keys(self) -> list[str]:
        """The keys stored under this prefix now (without the prefix)."""
        pattern = "".join("\\" + c if c in _GLOB_SPECIAL else c for c in self.prefix) + "*"
        found = self.client.scan_iter(match=pattern.encode("utf-8", "surrogatepass"), count=500)
        cut = len(self.prefix.encode("utf-8", "surrogatepass"))
        keys = (bytes(k)[cut:].decode("utf-8", "surrogatepass") for k in found)
        return sorted(k for k in keys if not k.startswith("\0"))  # claims, marks: not values

    def purge(self) -> int:
        """Delete every key under this prefix (a dead sender's leftovers; stage claims stay
        until they expire); returns how many."""
        names = [self._name(k) for k in self.keys()]
        removed = 0
        for i in range(0, len(names), 500):
            removed += int(self.client.unlink(*names[i : i + 500]))
        return removed

    def close(self) -> None:
        """Stop the listeners, and close the client if this connector made it. Idempotent.

        Stored values stay (their TTL bounds them): a receiver may still need them.
        """
        listeners = self._listeners.take_all()
        with self._lock:
            first, self._closed = not self._closed, True
        for listener in listeners:
            listener.close()
        if self._claims is not None:
            self._claims.release()
        if first and self._owns_client:
            self.client.close()

    def __repr__(self) -> str:
        ttl = None if self.ttl_ms is None else self.ttl_ms / 1000
        return (
            f"RedisConnector(prefix={self.prefix!r}, ttl={ttl}, "
            f"consume_on_get={self.consume_on_get}, notify={self.notify})"
        )
