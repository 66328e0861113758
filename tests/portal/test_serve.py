"""The production server as `make serve` runs it: gunicorn with production settings, static
files collected and served by WhiteNoise (compressed, cacheable), the access log without
query strings."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_gunicorn_serves_the_collected_static_files(tmp_path: Path):
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
        [sys.executable, "-m", "gunicorn", "portal.wsgi", "-w", "1", "-b", f"127.0.0.1:{port}",
         "--access-logfile", str(log), "--access-logformat", '"%(m)s %(U)s" %(s)s'],
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
    assert '"GET /static/portal/portal.css" 200' in text and "CANARY" not in text
