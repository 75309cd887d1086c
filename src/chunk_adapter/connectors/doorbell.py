"""Cross-process "a key was put" notifications for one namespace (UNIX datagram sockets).

The shared-memory connector's ``notify=True`` uses it to offer ``subscribe``:

* a **subscriber** binds a datagram socket in the namespace's directory,
  ``<tmp>/chunk-adapter-<uid>/<digest of namespace>/<pid>-<random>``, and a
  thread that calls ``callback(key)`` for every datagram it receives;
* a **ringer** (the putting connector, after the value is committed) sends the
  key to every socket in that directory, never blocking: a full socket buffer
  drops the datagram, and a socket nobody listens on any more (its process
  died) is removed.

Trust: the directories have predictable names, so before binding or ringing
it checks that both (``chunk-adapter-<uid>`` and the namespace's) are real
directories owned by this user (and closes them to others, mode ``0700``);
one made in advance by another user (who would then see every key rung)
fails with :class:`ConnectorError` naming the path and the fix.

Like Redis pub/sub this is at most once, which the capability allows: the
adapter re-polls now and then, so a dropped ring costs latency, not a chunk.
A subscriber sees every ring sent after ``subscribe`` returned (its socket
exists from then on); nothing is delivered to a subscriber of another namespace.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import socket
import stat
import tempfile
import threading
import uuid
from collections.abc import Callable

from ..errors import ConnectorError
from .base import Subscriptions

__all__ = ["NOTIFY_THREAD", "Doorbell"]

NOTIFY_THREAD = "chunk-adapter-shm-notify"
_MAX_DATAGRAM = 1 << 18
_SUN_PATH_MAX = 100  # sockaddr_un.sun_path holds 104-108 bytes, depending on the OS
_log = logging.getLogger("chunk_adapter.doorbell")


def _directory(namespace: str) -> str:
    digest = hashlib.blake2b(namespace.encode(), digest_size=8).hexdigest()
    return os.path.join(tempfile.gettempdir(), f"chunk-adapter-{os.getuid()}", digest)


def check_private(directory: str) -> None:
    """Make *directory* and its parent (mode ``0700``) if missing; fail unless both are
    this user's own directories. One of ours that others may enter is closed (chmod)."""
    parent = os.path.dirname(directory)
    for path in (parent, directory):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            problem = "is not a directory (a symlink?)"
        elif st.st_uid != os.geteuid():
            problem = f"belongs to uid {st.st_uid}, not this user (uid {os.geteuid()})"
        else:
            if st.st_mode & 0o077:
                os.chmod(path, 0o700)  # ours, made by an older version or another umask
            continue
        raise ConnectorError(
            f"the notification directory {path!r} {problem}: another user could read the "
            f"keys rung there. Fix: remove it (rm -r {path}), or point TMPDIR elsewhere"
        )


class Doorbell:
    """Rings and subscriptions for one namespace (see module doc). Thread-safe."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.directory = _directory(namespace)
        # Guards _sender. ring() holds it only to make the socket once; nobody waits on it.
        self._lock = threading.Lock()
        self._sender: socket.socket | None = None
        self._listeners: Subscriptions[_Listener] = Subscriptions()
        self._checked = False  # the directory passed check_private once

    def ring(self, key: str) -> None:
        """Tell every subscriber of the namespace that *key* was put. Never raises."""
        try:
            if not self._checked:
                if not os.path.isdir(self.directory):
                    return  # nobody has ever subscribed
                check_private(self.directory)
                self._checked = True
            entries = os.listdir(self.directory)
        except FileNotFoundError:
            return  # nobody has ever subscribed
        except ConnectorError as exc:
            _log.error("not ringing: %s", exc)
            return
        data = key.encode("utf-8", "surrogatepass")
        sender = self._socket()
        for entry in entries:
            path = os.path.join(self.directory, entry)
            try:
                sender.sendto(data, path)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):  # a dead subscriber's socket
                    os.unlink(path)
            except OSError as exc:  # full buffer, oversized key: the re-poll covers it
                if exc.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.EMSGSIZE):
                    _log.warning("ring %r to %s failed: %r", key, path, exc)

    def _socket(self) -> socket.socket:
        with self._lock:
            if self._sender is None:
                self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self._sender.setblocking(False)
            return self._sender

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call *callback(key)* for each ring from now on; returns the unsubscribe function."""
        return self._listeners.add(_Listener(self.directory, callback))

    def close(self) -> None:
        """End every subscription and close the ringing socket. Idempotent."""
        listeners = self._listeners.take_all()
        with self._lock:
            sender, self._sender = self._sender, None
        for listener in listeners:
            listener.close()
        if sender is not None:
            sender.close()


class _Listener:
    """One bound datagram socket and the thread that calls back for each ring."""

    def __init__(self, directory: str, callback: Callable[[str], None]) -> None:
        self.directory = directory
        self.path = os.path.join(directory, f"{os.getpid()}-{uuid.uuid4().hex[:12]}")
        if len(self.path.encode()) > _SUN_PATH_MAX:
            raise ConnectorError(
                f"the notification socket path {self.path!r} is too long for a UNIX socket; "
                "point TMPDIR at a shorter directory (e.g. TMPDIR=/tmp)"
            )
        self.callback = callback
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for _ in range(3):  # another listener's close() may rmdir the directory meanwhile
            try:
                check_private(directory)
            except BaseException:
                self._sock.close()
                raise
            try:
                self._sock.bind(self.path)  # from here on every ring reaches us
                break
            except FileNotFoundError:
                continue
        else:
            self._sock.close()
            raise ConnectorError(f"cannot bind the notification socket {self.path!r}")
        self._sock.settimeout(0.1)  # the thread re-checks _stop this often
        # Set by close(); the thread checks it between 0.1 s receives.
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=NOTIFY_THREAD, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self._sock.recv(_MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError:  # closed under us by close()
                return
            key = data.decode("utf-8", "surrogatepass")
            try:
                self.callback(key)
            except Exception:
                _log.exception("put notification callback failed for key %r", key)

    def close(self, timeout: float = 1.0) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._sock.close()
        with contextlib.suppress(OSError):  # only when it was the last socket
            os.rmdir(self.directory)
