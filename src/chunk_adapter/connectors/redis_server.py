"""A throwaway ``redis-server`` on a free loopback port, for tests and benchmarks.

``with RedisServer() as server: RedisConnector(url=server.url)``. The server
binds 127.0.0.1 only, keeps nothing on disk (no RDB, no AOF, a temporary
working directory), and is stopped (then killed if it lingers) on exit. Start-up
waits for the server's own "Ready to accept connections" line, bounded by
``start_timeout``, and retries on another port if the chosen one was taken.

``password=`` makes the server require it (``url`` carries it). ``tls=True``
makes it speak TLS only, with a certificate for 127.0.0.1 signed by a
throwaway CA made with the ``openssl`` command in the working directory:
``url`` is then ``rediss://...?ssl_ca_certs=<the CA file>``, so a client
verifies the server as it would in production; ``ca_file`` names the CA.
"""

from __future__ import annotations

import importlib
import os
import selectors
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from types import TracebackType

from ..errors import ChunkAdapterError

__all__ = [
    "INSTALL_HINT",
    "OPENSSL_HINT",
    "RedisServer",
    "RedisServerError",
    "redis_server_path",
    "redis_unavailable",
]

INSTALL_HINT = "redis-server is not installed: apt-get install redis-server"
OPENSSL_HINT = "RedisServer(tls=True) needs the openssl command: apt-get install openssl"
CLIENT_HINT = "redis-py is not installed: pip install 'chunk-adapter[redis]'"
_READY = b"Ready to accept connections"


class RedisServerError(ChunkAdapterError):
    """The throwaway redis-server could not be started."""


def redis_server_path() -> str | None:
    """Where ``redis-server`` is (``$REDIS_SERVER`` or the PATH), or ``None``."""
    return os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


def redis_unavailable() -> str | None:
    """Why a Redis test cannot run here (what to install), or ``None`` if it can."""
    if redis_server_path() is None:
        return INSTALL_HINT
    try:
        importlib.import_module("redis")
    except ImportError:
        return CLIENT_HINT
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _make_certificates(directory: str, host: str) -> str:
    """A throwaway CA and a certificate for *host* signed by it, in *directory*
    (``ca.crt``, ``server.crt``, ``server.key``); returns the CA file's path."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RedisServerError(OPENSSL_HINT)

    def path(name: str) -> str:
        return os.path.join(directory, name)

    with open(path("server.ext"), "w", encoding="ascii") as ext:
        ext.write(
            f"subjectAltName = IP:{host}\nbasicConstraints = CA:FALSE\n"
            "keyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n"
        )
    steps = [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=chunk-adapter test CA", "-keyout", path("ca.key"), "-out", path("ca.crt")],
        ["req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={host}",
         "-keyout", path("server.key"), "-out", path("server.csr")],
        ["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.crt"),
         "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2",
         "-extfile", path("server.ext"), "-out", path("server.crt")],
    ]  # fmt: skip
    for args in steps:
        done = subprocess.run(
            [openssl, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
        if done.returncode != 0:
            raise RedisServerError(
                f"openssl {args[0]} failed making the test certificates (exit "
                f"{done.returncode}):\n{done.stdout.decode(errors='replace')}"
            )
    return path("ca.crt")


class RedisServer:
    """One redis-server process; ``url``, ``host`` and ``port`` once started."""

    def __init__(
        self,
        *,
        start_timeout: float = 10.0,
        attempts: int = 3,
        password: str | None = None,
        tls: bool = False,
    ) -> None:
        self.start_timeout = start_timeout
        self.password = password
        self.tls = bool(tls)
        self.ca_file: str | None = None  # the CA that signed the server's certificate (tls)
        self.attempts = attempts
        self.host = "127.0.0.1"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.log = b""

    @property
    def url(self) -> str:
        """``redis://[:password@]host:port/0`` (the password URL-quoted); with ``tls``,
        ``rediss://[:password@]host:port/0?ssl_ca_certs=<ca_file>``."""
        auth = "" if self.password is None else f":{urllib.parse.quote(self.password, safe='')}@"
        if not self.tls:
            return f"redis://{auth}{self.host}:{self.port}/0"
        ca = urllib.parse.quote(self.ca_file or "", safe="/")
        return f"rediss://{auth}{self.host}:{self.port}/0?ssl_ca_certs={ca}"

    def start(self) -> RedisServer:
        binary = redis_server_path()
        if binary is None:
            raise RedisServerError(INSTALL_HINT)
        self._dir = tempfile.TemporaryDirectory(prefix="chunk-adapter-redis-")
        if self.tls:
            try:
                self.ca_file = _make_certificates(self._dir.name, self.host)
            except RedisServerError:
                self.stop()
                raise
        for _ in range(self.attempts):
            self.port = _free_port()
            if self._launch(binary):
                return self
        self.stop()
        raise RedisServerError(
            f"redis-server did not start in {self.attempts} attempts; its last output:\n"
            + self.log.decode(errors="replace")
        )

    def _launch(self, binary: str) -> bool:
        assert self._dir is not None
        cmd = [
            binary, "--port", str(self.port), "--bind", self.host, "--protected-mode", "yes",
            "--save", "", "--appendonly", "no", "--dir", self._dir.name,
            "--daemonize", "no", "--loglevel", "notice", "--logfile", "",
        ]  # fmt: skip
        if self.password is not None:
            cmd += ["--requirepass", self.password]
        if self.tls:
            d = self._dir.name
            cmd[1:3] = ["--port", "0", "--tls-port", str(self.port)]  # TLS only
            cmd += [
                "--tls-cert-file", os.path.join(d, "server.crt"),
                "--tls-key-file", os.path.join(d, "server.key"),
                "--tls-ca-cert-file", os.path.join(d, "ca.crt"),
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        self._proc, self.log = proc, b""
        deadline = time.monotonic() + self.start_timeout
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while _READY not in self.log:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    break
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:  # exited (e.g. the port was taken meanwhile)
                    break
                self.log += chunk
        if _READY in self.log:
            # Keep draining its output so the server never blocks on a full pipe.
            threading.Thread(
                target=self._drain, args=(proc,), name="redis-server-log", daemon=True
            ).start()
            return True
        self._terminate()
        return False

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        try:
            while chunk := os.read(proc.stdout.fileno(), 65536):
                self.log = (self.log + chunk)[-65536:]
        except (OSError, ValueError):  # closed by _terminate
            pass

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5.0)
        if proc.stdout is not None:
            proc.stdout.close()

    def crash(self) -> None:
        """Stop the server process only (an outage): its data is gone, the port is free
        until :meth:`restart`."""
        self._terminate()

    def restart(self) -> None:
        """Start the server again on the same port after :meth:`crash` (a restart)."""
        binary = redis_server_path()
        if binary is None or self._dir is None:
            raise RedisServerError(f"restart() needs a started server and {INSTALL_HINT}")
        if not self._launch(binary):
            raise RedisServerError(
                f"redis-server did not restart on port {self.port}; its output:\n"
                + self.log.decode(errors="replace")
            )

    def stop(self) -> None:
        """Stop the server and remove its directory. Idempotent."""
        self._terminate()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._proc is not None else "stopped"
        return f"RedisServer({self.host}:{self.port}, {state})"
