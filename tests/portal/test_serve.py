"""The production server as `make serve` runs it (``portal.serve``: granian) with production
settings: static files collected and served by WhiteNoise (compressed, cacheable), the access
log without query strings, connections kept alive, and the embedded PostgreSQL stopped when the
server stops; on a Unix socket, a worker busy with a long request leaves new connections to the
others."""

from __future__ import annotations

import http.client
import os
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_server_serves_the_collected_static_files(tmp_path: Path):
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_PRODUCTION": "true",
        "DJANGO_SECRET_KEY": "s" * 30 + "-serve-test-" + "t" * 20,
        "AUDIT_HMAC_KEYS": "serve-test:" + "h" * 40,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECURE_SSL_REDIRECT": "false",  # plain HTTP on the loopback, for the test
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        # No database is needed to serve static files (healthz says it is unreachable).
        "DATABASE_URL": f"postgresql://nobody@/none?host={tmp_path}",
        "DATABASE_OWNER_URL": "",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "collectstatic", "--noinput", "-v", "0"], env=env, check=True)
    assert (tmp_path / "static" / "portal" / "portal.css").exists()
    port = _free_port()
    log = tmp_path / "access.log"
    web = subprocess.Popen(
        [sys.executable, "-m", "portal.serve", "--workers", "1", "--port", str(port),
         "--access-log", str(log)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5)
                break
            except OSError:
                time.sleep(0.2)
        request = urllib.request.Request(
            base + "/static/portal/portal.css?q=CANARY", headers={"Accept-Encoding": "gzip"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/css")
            assert "max-age" in response.headers.get("Cache-Control", "")
        with urllib.request.urlopen(base + "/static/vendor/htmx.min.js", timeout=10) as response:
            assert response.status == 200
        with urllib.request.urlopen(base + "/healthz", timeout=10) as response:
            assert response.headers["Content-Security-Policy"].startswith("default-src 'self'")
    finally:
        web.terminate()
        web.wait(10)
    text = log.read_text()
    assert '"GET /static/portal/portal.css HTTP/1.1" 200' in text and "CANARY" not in text


def _wait_until_ready(base: str, path: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + path, timeout=5)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"the server did not answer {path} within 90 s")


def test_it_keeps_connections_alive_and_stops_the_embedded_database_it_used(
    tmp_path: Path, server_tmp: Path
):
    pgdata = server_tmp / "pg"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_OWNER_URL")},
        "EMBEDDED_PGDATA": str(pgdata),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    port = _free_port()
    web = subprocess.Popen(
        [sys.executable, "-m", "portal.serve", "--workers", "2", "--port", str(port)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # Not migrated: /healthz answers (the database "degraded", its roles not made yet).
        _wait_until_ready(f"http://127.0.0.1:{port}", "/healthz")
        assert (pgdata / "postmaster.pid").exists()
        # Several requests on one connection: the server keeps it open between responses.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for _ in range(3):
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            assert response.getheader("Connection", "").lower() != "close"
        sock = conn.sock
        conn.request("GET", "/healthz")
        conn.getresponse().read()
        assert conn.sock is sock  # the same connection, not a new one
        # Stopping does not wait for connections kept alive with no request on them (a
        # proxy's), where a busy worker is given 30 s.
        idle = [conn]
        for _ in range(3):
            idle.append(http.client.HTTPConnection("127.0.0.1", port, timeout=10))
            idle[-1].request("GET", "/healthz")
            idle[-1].getresponse().read()
        started = time.monotonic()
        web.terminate()
        try:
            web.wait(3)
        except subprocess.TimeoutExpired:
            raise AssertionError("the server waited for idle kept-alive connections") from None
        assert time.monotonic() - started < 3
        for each in idle:
            each.close()
    finally:
        web.terminate()
        web.wait(30)
    # The workers end without Python's exit handlers; the server process leaves the embedded
    # database's list of users last, and so stops it.
    deadline = time.monotonic() + 20
    while (pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (pgdata / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"


def test_a_request_carries_none_of_the_processs_environment_variables(monkeypatch):
    # granian starts each request's environ from the process's environment (as CGI did):
    # the secret key, the database URL and the audit keys would reach request.META.
    from portal import serve

    monkeypatch.setenv("DJANGO_SECRET_KEY", "process-secret")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("CONTENT_TYPE", "text/x-from-the-process")
    serve._process_variables.cache_clear()
    request = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/v1/workspaces/", "QUERY_STRING": "",
        "HTTP_AUTHORIZATION": "Bearer x", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
    }  # fmt: skip
    try:
        # Merged as granian merges them: the process's first, the request's over them.
        plain = serve.without_process_variables({**os.environ, **request})
        typed = serve.without_process_variables(
            {**os.environ, **request, "CONTENT_TYPE": "application/json"}
        )
    finally:
        serve._process_variables.cache_clear()

    assert plain == request
    assert typed == {**request, "CONTENT_TYPE": "application/json"}


def _refused(*arguments: str) -> str:
    """What ``python -m portal.serve`` says on standard error when it refuses ``arguments``
    before it starts (exit status 2)."""
    done = subprocess.run(
        [sys.executable, "-m", "portal.serve", *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    return done.stderr


def test_an_access_log_it_cannot_write_is_refused_before_it_starts(tmp_path: Path):
    stderr = _refused(
        "--port", str(_free_port()), "--access-log", str(tmp_path / "missing" / "access.log")
    )
    assert "cannot write the access log" in stderr and "No such file" in stderr
    assert "Traceback" not in stderr


def test_a_port_in_use_is_refused_in_one_line(tmp_path: Path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        stderr = _refused("--port", str(port))
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in stderr
    assert "Traceback" not in stderr and "backtrace" not in stderr


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: Path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(str(self.path))


def _get_over(path: Path, url: str) -> int:
    conn = _UnixHTTPConnection(path)
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_on_a_unix_socket_a_worker_busy_with_a_long_request_leaves_new_connections_to_the_others(
    tmp_path: Path,
):
    # portal.serve's settings for --uds, serving a test application with a slow path. On TCP,
    # each worker has a socket of its own and takes connections while busy, so about half of
    # these would wait for the slow request (measured: docs/deploy.md, "The web server").
    from tests.portal import slow_wsgi

    path = tmp_path / "web.sock"
    program = (
        "import sys; from pathlib import Path; from granian import Granian;"
        " from portal.serve import granian_options;"
        " options = granian_options(host='', port=0, workers=2, access_log=None,"
        " log_level='warning', uds=Path(sys.argv[1]));"
        " options['target'] = 'tests.portal.slow_wsgi:application';"
        " Granian(**options).serve()"
    )
    web = subprocess.Popen(
        [sys.executable, "-c", program, str(path)], cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert _get_over(path, "/") == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        slow = threading.Thread(target=_get_over, args=(path, "/slow"))
        started = time.monotonic()
        slow.start()
        time.sleep(0.5)  # the slow request is in its worker
        waits = []
        for _ in range(8):  # each on a connection of its own, as nginx without keep-alive
            before = time.monotonic()
            assert _get_over(path, "/") == 200
            waits.append(time.monotonic() - before)
        assert time.monotonic() - started < slow_wsgi.SLOW_SECONDS, "the probes took too long"
        assert max(waits) < 1.0, waits
        slow.join()
    finally:
        web.terminate()
        web.wait(30)


def test_a_socket_path_in_use_or_not_a_socket_is_refused_and_a_stale_one_replaced(
    tmp_path: Path,
):
    from portal.serve import _socket_path_problem

    taken = tmp_path / "taken.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(taken))
    listener.listen(1)
    try:
        assert _socket_path_problem(taken) == "another server is listening on it"
    finally:
        listener.close()
    # closed without removing its file: a killed server's
    assert _socket_path_problem(taken) == ""
    assert not taken.exists()
    plain = tmp_path / "plain"
    plain.write_text("")
    assert _socket_path_problem(plain) == "the path exists and is not a socket"
    assert _socket_path_problem(tmp_path / "missing" / "web.sock").endswith("is not a directory")
    stderr = _refused("--uds", str(plain))
    assert f"cannot listen on {plain}: the path exists and is not a socket" in stderr
    stderr = _refused("--uds", str(tmp_path / "web.sock"), "--port", "8001")
    assert "give one or the other" in stderr
