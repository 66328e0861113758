"""Browser tests: Playwright's Python package driving Debian's headless Chromium.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (``make test`` installs
Debian's package). Each test gets a fresh context; ``shot`` saves full-page screenshots
under ``tests/artifacts/`` (git-ignored) for a human to look at, when asked for
(``make shots``); a failed test's page is saved there always.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # Headless Chromium opens the address bar's popup, a page of its own, in every window (a
    # context): ~0.9 CPU-seconds each, twice what the test's own page costs.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup",
]


def _chromium() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("Debian's chromium is not installed; run `make test` (it installs it).")
    return path


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    # Playwright runs an event loop in this thread; Django must still allow sync DB calls
    # from fixtures that run alongside it.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=_chromium(), headless=True, args=CHROMIUM_FLAGS
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


# Full-page screenshots cost the browser ~0.3 CPU-seconds each (100 a run): taken when asked
# (BROWSER_SHOTS=1, as `make shots` runs the browser tests), and of any browser test that fails.
SHOTS = os.environ.get("BROWSER_SHOTS") == "1"


@pytest.fixture
def shot() -> Any:
    """``shot(page, name)``: the page as it stands, saved as ``tests/artifacts/<name>.png``
    when screenshots are asked for (``BROWSER_SHOTS=1``); None otherwise."""

    def take(page: Any, name: str) -> Path | None:
        if not SHOTS:
            return None
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    """A failed browser test leaves its page as it was: ``tests/artifacts/failed-<test>.png``."""
    report = yield
    page = getattr(item, "funcargs", {}).get("page")
    if report.failed and report.when == "call" and page is not None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = "".join(c if c.isalnum() or c in "-_." else "-" for c in item.name)
        try:
            page.screenshot(path=str(ARTIFACTS / f"failed-{name}.png"), full_page=True)
        except Exception as exc:  # the page or browser may be gone: the report says why
            report.sections.append(("screenshot", f"no screenshot of the failure: {exc}"))
    return report


@pytest.fixture
def login(live_server: Any) -> Any:
    """Sign in as the login form would, without typing into it: a session made by Django's
    test client, its cookie given to the page, then the page the form's answer opens. The
    form itself is tested in test_login.py (``form_login``)."""
    from django.conf import settings
    from django.shortcuts import resolve_url
    from django.test import Client

    def sign_in(page: Any, username: str, password: str) -> None:
        client = Client()
        assert client.login(username=username, password=password), f"{username} cannot sign in"
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        page.context.add_cookies(
            [{"name": cookie.key, "value": cookie.value, "url": live_server.url}]
        )
        page.goto(live_server.url + resolve_url(settings.LOGIN_REDIRECT_URL))

    return sign_in


@pytest.fixture
def form_login(live_server: Any) -> Any:
    """Sign in through the login form, as a person does."""

    def sign_in(page: Any, username: str, password: str) -> None:
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        # The form's answer (a redirect home, or the form again) is a navigation: wait for
        # its page to load, not for the network to stay quiet half a second.
        with page.expect_navigation():
            page.get_by_role("button", name="Log in").click()

    return sign_in
