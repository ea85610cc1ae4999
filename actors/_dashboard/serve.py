"""Serving the dashboard with uvicorn: the socket is bound here first, so a port in use or an address
that is not this machine's is one clear ``ConfigError`` before anything starts; ``Background`` runs a
server in a thread that is always stopped (tests, scripts).
"""

from __future__ import annotations

import errno
import socket
import threading
from typing import Any

from actors._driver.errors import ConfigError


def require_extra() -> None:
    """Fail with the install command when the ``dashboard`` extra is missing."""
    import importlib.util

    missing = [m for m in ("starlette", "uvicorn", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(f"the dashboard needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                          "not installed: pip install 'audition[dashboard]'")


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port; pass a number from 1 to 65535 (0: any free port)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host}: cannot resolve it ({exc.strerror}); pass an address of this machine, "
                          "e.g. 127.0.0.1 or 0.0.0.0") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use (another dashboard or server?): pass another "
                              "--port, or --port 0 for a free one") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"--host {host} is not an address of this machine; pass one of its addresses, "
                              "or 0.0.0.0 for all") from None
        if exc.errno == errno.EACCES:
            raise ConfigError(f"port {port} needs privileges to bind; pass a port above 1023") from None
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def server(app: Any) -> Any:
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    return uvicorn.Server(config)


class Background:
    """A dashboard served from a thread; ``stop()`` (or leaving the ``with``) shuts it down and joins."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = bind(host, port)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}/"
        self._server = server(app)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]},
                                        name="dashboard-server", daemon=True)

    def start(self, timeout: float = 10.0) -> Background:
        self._thread.start()
        started = threading.Event()
        for _ in range(int(timeout / 0.02)):
            if self._server.started or not self._thread.is_alive():
                break
            started.wait(0.02)  # uvicorn offers no event to wait on; its flag is polled
        if not self._server.started:
            self.stop()
            raise RuntimeError(f"the dashboard server did not start within {timeout} s")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> Background:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Background", "bind", "require_extra", "server"]
