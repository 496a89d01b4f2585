"""Read-only preview server for a rendered board (``semcal-eval board serve``).

Loopback only (127.0.0.1), GET and HEAD only, regular files under the site folder only:

* no directory listings: a folder is answered by its ``index.html`` or 404;
* a path that is not clean text (NUL or other control bytes, backslashes, bad percent-encoding) is
  answered 400, a path outside the site (``..``, a symlink leading out) 404, never a traceback;
* an idle or slow connection cannot hold a thread: each read waits at most :data:`READ_TIMEOUT` seconds
  and a connection lives at most :data:`CONNECTION_DEADLINE` seconds in all; at most
  :data:`MAX_CONNECTIONS` are served at once, at most :data:`MAX_PER_CLIENT` per non-loopback address (on
  loopback every client shares 127.0.0.1, so there the rule that keeps the server answering is the next one);
  when every slot is taken, the connection that has waited longest without completing its request is closed to
  make room, else the connection that has been answering longest, so slow clients can delay but not lock out a
  new one;
* a response is sent at :data:`MIN_RATE` bytes/s at least (after :data:`MIN_RATE_GRACE` s) and within
  :data:`RESPONSE_DEADLINE` s, or the connection is closed: slow readers cannot starve the server;
* only the files a render writes are served (:data:`ALLOWED`): never ``*.sqlite``, a README or a stray file;
* a ``Host`` header other than the loopback address or ``localhost`` is refused (400), so a web page
  cannot read the board through DNS rebinding;
* responses carry ``X-Content-Type-Options: nosniff``, the pages' Content-Security-Policy (also as a
  header, with ``frame-ancestors 'none'``), ``Referrer-Policy: no-referrer`` and ``Cache-Control: no-cache``
  (a re-render swaps the folder, and the next request sees the new site).
"""

from __future__ import annotations

import contextlib
import email.utils
import http.server
import mimetypes
import os
import posixpath
import re
import signal
import socket
import stat
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from .site import _CSP

HOST = "127.0.0.1"
#: Seconds one read on a connection may wait (request line, headers).
READ_TIMEOUT = 10.0
#: Seconds a connection may live in all, however slowly it trickles bytes in.
CONNECTION_DEADLINE = 30.0
#: Connections served at once. When all are taken, the one that has waited longest without completing its
#: request (a slow or idle client) is closed to make room, so the server keeps answering new clients.
MAX_CONNECTIONS = 32
#: Connections one client address may hold at once; more from it are closed at once.
MAX_PER_CLIENT = 8
#: A response must reach the client at this many bytes per second (after MIN_RATE_GRACE seconds) and be sent
#: within RESPONSE_DEADLINE seconds, or the connection is closed: a client that reads slowly cannot hold a
#: slot for long (issue 34: 40 slow readers of a 244 MB board.json let 4 of 110 requests through).
MIN_RATE = 64 * 1024
MIN_RATE_GRACE = 2.0
RESPONSE_DEADLINE = 10.0
#: Bytes written per send, so the rate is checked often and one blocked send waits at most one chunk.
CHUNK = 16 * 1024
#: The only files served: what ``board render`` writes (never the database, a README or anything else a user
#: keeps in the folder; issue 25: ``board.sqlite`` holding the spot-check secret was served).
ALLOWED = re.compile(r"(index\.html|style\.css|board\.js|leaderboard\.csv|leaderboard\.md|board\.json|"
                     r"entries/[0-9a-f]{16}\.html|entries/[0-9a-f]{16}-[0-9]{1,4}\.png)")
_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".js": "text/javascript; charset=utf-8", ".json": "application/json; charset=utf-8",
          ".csv": "text/csv; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".png": "image/png"}


class BoardHandler(http.server.BaseHTTPRequestHandler):
    """Serves the files of ``server.site``; see the module docstring for the rules."""

    server_version = "semcal-board"
    sys_version = ""
    timeout = READ_TIMEOUT  # socket timeout of every read (StreamRequestHandler.setup); per server in setup()
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive connections

    def setup(self):
        self.timeout = self.server.read_timeout
        super().setup()
        # A watchdog closes the socket at the deadline: a per-read timeout alone lets a client that sends
        # one byte every few seconds keep the thread for ever.
        self._watchdog = threading.Timer(self.server.deadline, self._kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _kill(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def finish(self):
        self._watchdog.cancel()
        try:
            super().finish()
        except OSError:
            pass  # the client went away (or the watchdog closed it) before the answer was flushed

    def version_string(self):
        return self.server_version  # no Python version in the Server header

    def log_message(self, fmt, *args):  # keep stdout for the URL line; requests go to stderr
        sys.stderr.write("%s - %s\n" % (self.address_string(), log_safe(fmt % args)))

    def end_headers(self):
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _CSP + "; frame-ancestors 'none'")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def do_GET(self):
        self._answer(body=True)

    def do_HEAD(self):
        self._answer(body=False)

    def _refuse_write(self):
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_write

    def parse_request(self):
        ok = super().parse_request()
        self.server.request_read(self.connection)  # no longer an idle/slow client: not evicted
        return ok

    def _answer(self, body: bool) -> None:
        host = (self.headers.get("Host") or "").strip().lower()
        if host and host.rsplit(":", 1)[0] not in (HOST, "localhost", "[::1]"):
            self.send_error(400, "unknown Host: this server answers only http://127.0.0.1")
            return
        path = self._resolve(self.path)
        if isinstance(path, int):
            self.send_error(path)
            return
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            self.send_error(404)
            return
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", _TYPES.get(Path(path).suffix.lower())
                             or mimetypes.guess_type(path)[0] or "application/octet-stream")
            self.send_header("Content-Length", str(st.st_size))
            self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
            self.end_headers()
            if body:
                self._send_body(fh)

    def _send_body(self, fh) -> None:
        """Copy ``fh`` to the client in CHUNK pieces; stop (closing the connection) when the client reads slower
        than the server's minimum rate or the response outlives its deadline."""
        t0, sent = time.monotonic(), 0
        srv = self.server
        try:
            while chunk := fh.read(CHUNK):
                self.wfile.write(chunk)
                sent += len(chunk)
                dt = time.monotonic() - t0
                if dt > srv.response_deadline or (dt > srv.min_rate_grace and sent < srv.min_rate * dt):
                    self.log_message("closed a slow reader: %d bytes in %.1f s", sent, dt)
                    self._kill()
                    return
        except OSError:
            pass  # the client hung up mid-file

    def _resolve(self, raw: str) -> str | int:
        """The file to send for request target ``raw``, or the HTTP status to answer instead."""
        target = raw.split("?", 1)[0].split("#", 1)[0]
        if not target.startswith("/"):
            return 400
        try:
            path = urllib.parse.unquote(target, errors="strict")
        except UnicodeDecodeError:
            return 400
        if any(ord(c) < 32 or ord(c) == 127 for c in path) or "\\" in path:
            return 400
        parts = [p for p in posixpath.normpath(path).split("/") if p not in ("", ".")]
        if any(p == ".." or p.startswith(".") for p in parts):
            return 404  # outside the site, or a hidden file (nothing the board writes starts with ".")
        root = os.path.realpath(self.server.site)
        full = os.path.join(root, *parts)
        if os.path.isdir(full):
            full = os.path.join(full, "index.html")
            parts = [*parts, "index.html"]
        if not ALLOWED.fullmatch("/".join(parts)):
            return 404  # not a site output (the database, a README, a stray file)
        real = os.path.realpath(full)
        if real != root and not real.startswith(root + os.sep):
            return 404  # a symlink leading out of the site
        return real if os.path.isfile(real) else 404


class BoardServer(http.server.ThreadingHTTPServer):
    """A threading HTTP server bound to 127.0.0.1 that serves one board folder (``site``)."""

    daemon_threads = True
    allow_reuse_address = True
    allow_reuse_port = False  # never share the port with another process (newer Pythons default to True)

    def __init__(self, site: Path, port: int, *, read_timeout: float = READ_TIMEOUT,
                 deadline: float = CONNECTION_DEADLINE, min_rate: float = MIN_RATE,
                 min_rate_grace: float = MIN_RATE_GRACE, response_deadline: float = RESPONSE_DEADLINE,
                 max_connections: int = MAX_CONNECTIONS):
        self.site = str(Path(site).resolve())
        self.read_timeout, self.deadline = read_timeout, deadline
        self.min_rate, self.min_rate_grace, self.response_deadline = min_rate, min_rate_grace, response_deadline
        self.max_connections = max_connections
        self._lock = threading.Lock()
        # socket -> [client address, accepted at (monotonic), request read?]
        self._live: dict = {}
        super().__init__((HOST, port), BoardHandler)

    def request_read(self, sock) -> None:
        with self._lock:
            if sock in self._live:
                self._live[sock][2] = True

    def process_request(self, request, client_address):
        evict = None
        with self._lock:
            same = sum(1 for v in self._live.values() if v[0] == client_address[0])
            if same >= MAX_PER_CLIENT and client_address[0] not in (HOST, "::1"):
                self.shutdown_request(request)  # one address may not hold every slot
                return
            if len(self._live) >= self.max_connections:
                waiting = [(v[1], k) for k, v in self._live.items() if not v[2]]
                # the longest-waiting incomplete request; when every slot is answering, the oldest answer (a
                # healthy answer takes milliseconds, so the oldest is a slow reader's)
                pool = waiting or [(v[1], k) for k, v in self._live.items()]
                evict = min(pool, key=lambda t: t[0])[1]
                del self._live[evict]
            self._live[request] = [client_address[0], time.monotonic(), False]
        if evict is not None:
            try:
                evict.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._lock:
                self._live.pop(request, None)
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._live.pop(request, None)

    def handle_error(self, request, client_address):
        # one line, no traceback: a broken client connection is not the server's failure
        exc = sys.exc_info()[1]
        sys.stderr.write(f"{client_address[0]} - connection error: {type(exc).__name__}: {log_safe(str(exc))}\n")


#: C0 controls, DEL and C1 controls (ESC of a terminal escape sequence, CR that overwrites a log line, the 8-bit
#: CSI), plus the Unicode line/paragraph separators and bidi controls: never written to the log as they came.
_LOG_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def log_safe(text: str) -> str:
    """``text`` with every control character written as ``\\xNN`` / ``\\uNNNN``: a request line is the client's
    text, and its escape codes must not reach the operator's terminal through the server log (issue 43)."""
    return _LOG_UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def make_server(site: str | Path, port: int, *, read_timeout: float = READ_TIMEOUT,
                deadline: float = CONNECTION_DEADLINE, **limits) -> BoardServer:
    """A :class:`BoardServer` for ``site`` on 127.0.0.1:``port`` (0 picks a free port), not yet serving:
    call ``serve_forever()`` (e.g. in a thread) and ``shutdown()``; ``server_address[1]`` is the port.
    ``read_timeout`` / ``deadline``: seconds per read and per connection (defaults :data:`READ_TIMEOUT`,
    :data:`CONNECTION_DEADLINE`)."""
    return BoardServer(Path(site), port, read_timeout=read_timeout, deadline=deadline, **limits)


def serve(site: str | Path, port: int) -> int:
    """Serve ``site`` on http://127.0.0.1:PORT/ until interrupted; returns the exit status (2 with a
    one-line message when the site is missing or the port cannot be used)."""
    site = Path(site)
    if not (site / "index.html").is_file():
        print(f"error: {site}/index.html not found; run `semcal-eval board render --out {site}` first",
              file=sys.stderr)
        return 2
    if not 0 <= port <= 65535:
        print(f"error: port {port} is not a TCP port; pass --port 1-65535, or 0 for a free one", file=sys.stderr)
        return 2
    try:
        httpd = make_server(site, port)
    except OSError as e:
        print(f"error: cannot listen on {HOST}:{port}: {e.strerror or e}; pick another --port (0 picks a free one)",
              file=sys.stderr)
        return 2
    with httpd:
        print(f"Serving {site} at http://{HOST}:{httpd.server_address[1]}/", flush=True)
        with _stop_on_signals():
            try:
                httpd.serve_forever()
            except _Stop:
                pass
    return 0


class _Stop(Exception):
    """Raised by the SIGINT/SIGTERM handler of :func:`serve` to leave ``serve_forever``."""


@contextlib.contextmanager
def _stop_on_signals():
    """SIGINT and SIGTERM end :func:`serve` cleanly, whatever dispositions the process inherited.

    Python turns SIGINT into KeyboardInterrupt only when SIGINT was not ignored at start-up, and a process that
    a non-interactive shell starts in the background inherits SIGINT *ignored*: there Ctrl-C (or ``kill -INT``)
    did nothing and the server outlived its caller. Handlers installed here make both signals stop it; the
    previous handlers come back afterwards. Signal handlers can only be set from the main thread; elsewhere
    (a server run in a thread) the caller stops it with ``shutdown()``.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise _Stop(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
