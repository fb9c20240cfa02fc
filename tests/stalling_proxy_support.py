"""A TCP proxy in front of the throwaway PostgreSQL server that can stop answering.

A server that is refused is told at once; one behind a dropped route, a stopped host or a full
accept queue is not: a connect waits up to its connect_timeout. `StallingProxy.stop_answering()`
ends the sessions through it and leaves every later connection accepted but unanswered, as such
a server does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class StallingProxy:
    """Forwards TCP connections to the server until `stop_answering()`; thread-safe.

    After it, each connection is accepted (`unanswered`) and nothing is ever sent on it.
    """

    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self._server = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listening = socket.create_server(("127.0.0.1", 0))
        port = self._listening.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=f"{parts.username}@127.0.0.1:{port}"))
        self._forwarded: list[socket.socket] = []
        self.unanswered: list[socket.socket] = []
        self._is_answering = True
        self._answers_left: int | None = None
        self._lock = threading.Lock()
        self._frozen = threading.Event()
        self._freezing_at: bytes | None = None
        self.accepted = threading.Semaphore(0)
        threading.Thread(target=self._accept, daemon=True).start()

    def answer_only(self, count: int) -> None:
        """Forward the next `count` connections, and leave the later ones unanswered."""
        with self._lock:
            self._answers_left = count

    def stop_answering(self) -> None:
        """End every forwarded connection; leave the next ones unanswered."""
        with self._lock:
            self._is_answering = False
            forwarded, self._forwarded = self._forwarded, []
        for sock in forwarded:
            with contextlib.suppress(OSError):  # closed already: its peer ended it
                sock.shutdown(socket.SHUT_RDWR)

    def freeze(self) -> None:
        """Forward nothing more on the open connections, and leave them open: a frozen host.

        What the clients send is still acknowledged (by this proxy), so no TCP timeout ends
        their wait for an answer.
        """
        self._frozen.set()

    def freeze_at(self, statement: bytes) -> None:
        """`freeze()` once `statement` passes through (it is not forwarded): a host that froze
        right as a client sent it, such as the next statement after a session was opened."""
        self._freezing_at = statement

    def is_frozen(self) -> bool:
        """Whether the proxy forwards nothing more (`freeze`, `freeze_at`)."""
        return self._frozen.is_set()

    def answer_again(self) -> None:
        """Forward the next connections again; end the unanswered ones.

        As a server that is back: the connection attempts made while it was away fail, and
        the next ones reach it.
        """
        with self._lock:
            self._is_answering = True
            unanswered, self.unanswered = self.unanswered, []
        for sock in unanswered:
            sock.close()

    def close(self) -> None:
        self.stop_answering()
        self._listening.close()
        for sock in self.unanswered:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listening.accept()
            except OSError:  # closed
                return
            with self._lock:
                if self._answers_left is not None:
                    self._is_answering = self._answers_left > 0
                    self._answers_left -= 1
                if self._is_answering:
                    server = socket.create_connection(self._server)
                    self._forwarded += [client, server]
                    for source, target in ((client, server), (server, client)):
                        threading.Thread(
                            target=self._copy, args=(source, target), daemon=True
                        ).start()
                else:
                    self.unanswered.append(client)
            self.accepted.release()

    def _copy(self, source: socket.socket, target: socket.socket) -> None:
        """Copy bytes until either side ends (dropping them once frozen); then end `target`
        too and close `source`.

        Ending `target` wakes the thread that reads it, which closes it in turn.
        """
        try:
            while data := source.recv(65536):
                if self._freezing_at is not None and self._freezing_at in data:
                    self._frozen.set()
                if not self._frozen.is_set():
                    target.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_RDWR)
            source.close()
