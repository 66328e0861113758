"""Throttling: failed logins per account and per address, API calls per token.

Fixed windows, one increment per request whatever the rate, so the check costs the recall
hot path no database statement: counted in the process's memory by default, or in Django's
cache when ``CACHE_URL`` points at Redis (several web processes then share the counts).

- Logins: after ``LOGIN_FAILURES_PER_ACCOUNT`` failed attempts on one username, or
  ``LOGIN_FAILURES_PER_ADDRESS`` from one address, within ``LOGIN_WINDOW_SECONDS``, further
  attempts are refused with 429 (even with the right password) until the window ends. The
  message is the same whether the account exists or not.
- API: each token (or signed-in user) may make ``API_RATE_PER_MINUTE`` calls a minute unless
  the token sets its own (``ApiToken.api_rate_per_minute``), and recalls
  ``RECALL_RATE_PER_MINUTE`` a minute unless the token sets its own
  (``ApiToken.recall_rate_per_minute``) or else its workspace does
  (``Workspace.recall_rate_per_minute``). Over the limit: 429 ``THROTTLED`` with Retry-After.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle


def _window(seconds: int, now: float | None = None) -> tuple[int, int]:
    """The current window's number and the seconds left in it."""
    now = time.time() if now is None else now
    number = int(now // seconds)
    return number, max(1, int((number + 1) * seconds - now))


def _key(*parts: Any) -> str:
    # Hashed: a username or address is not kept in the cache as it is.
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]
    return f"throttle:{digest}"


class _LocalCounters:
    """This process's counts, when no shared cache is configured: a dict under a lock, none
    of the cache's pickling on the hot path. Keys carry their window, so old ones are dropped
    when the dict grows."""

    LIMIT = 50_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[float, int]] = {}

    def count(self, key: str, seconds: int, *, add: bool) -> int:
        now = time.monotonic()
        with self._lock:
            expires, n = self._counts.get(key, (0.0, 0))
            if expires <= now:
                n = 0
            if not add:
                return n
            self._counts[key] = (now + seconds + 1 if n == 0 else expires, n + 1)
            if len(self._counts) > self.LIMIT:
                self._counts = {k: v for k, v in self._counts.items() if v[0] > now}
            return n + 1

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


_local = _LocalCounters()


def reset() -> None:
    """Forget every count (tests start each case afresh)."""
    _local.clear()
    cache.clear()


def _count(key: str, seconds: int, *, add: bool) -> int:
    if not settings.CACHE_URL:
        return _local.count(key, seconds, add=add)
    if add:
        try:  # the usual case, one cache operation: the window's counter exists
            return int(cache.incr(key))
        except ValueError:  # the window's first call (or its counter just expired)
            if cache.add(key, 1, timeout=seconds + 1):
                return 1
            return int(cache.incr(key))
    return int(cache.get(key, 0))


def client_address(request: HttpRequest) -> str:
    """The caller's address. Behind a proxy, set ``TRUSTED_PROXY_COUNT`` so the address the
    proxy saw (in X-Forwarded-For) is used rather than the proxy's own."""
    hops = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0))
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if hops and forwarded:
        chain = [part.strip() for part in forwarded.split(",") if part.strip()]
        if len(chain) >= hops:
            return chain[-hops]
    return str(request.META.get("REMOTE_ADDR", ""))


# --- logins -----------------------------------------------------------------------------------


class ThrottledLoginView(auth_views.LoginView):
    """Django's login view, refusing attempts once an account or address failed too often."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        seconds = settings.LOGIN_WINDOW_SECONDS
        window, left = _window(seconds)
        username = str(request.POST.get("username", "")).strip().lower()
        account = _key("login-account", username, window)
        address = _key("login-address", client_address(request), window)
        over = _count(account, seconds, add=False) >= settings.LOGIN_FAILURES_PER_ACCOUNT or (
            _count(address, seconds, add=False) >= settings.LOGIN_FAILURES_PER_ADDRESS
        )
        if over:
            form = self.get_form()
            minutes = max(1, round(left / 60))
            form.errors.clear()
            form.add_error(
                None,
                "Too many failed attempts. Wait about "
                f"{minutes} minute{'s' if minutes != 1 else ''} and try again.",
            )
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            response["Retry-After"] = str(left)
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code == 200:  # the form came back: the attempt failed
            _count(account, seconds, add=True)
            _count(address, seconds, add=True)
        return response


# --- the API ----------------------------------------------------------------------------------


def token_ident(token: Any) -> str:
    """Whose calls a token's are, to the throttle."""
    return f"token:{token.pk}"


def api_call_counted(*, ident: str, token: Any, recall: bool) -> int | None:
    """Count one API call of ``ident`` (under the token's own limit or ``API_RATE_PER_MINUTE``)
    and one recall, if it is one (under the token's own limit, its workspace's, or
    ``RECALL_RATE_PER_MINUTE``): None while within the limits, else the seconds until the
    window ends."""
    limits = [("api", getattr(token, "api_rate_per_minute", None) or settings.API_RATE_PER_MINUTE)]
    if recall:
        workspace = getattr(token, "workspace", None)
        own = getattr(token, "recall_rate_per_minute", None) or getattr(
            workspace, "recall_rate_per_minute", None
        )
        limits.append(("recall", own or settings.RECALL_RATE_PER_MINUTE))
    window, left = _window(60)
    for scope, limit in limits:
        if limit and _count(_key(scope, ident, window), 60, add=True) > limit:
            return left
    return None


class TokenRateThrottle(BaseThrottle):
    """Per token (or signed-in user): all calls, and recalls under their own limit."""

    def allow_request(self, request: Request, view: Any) -> bool:
        token: Any = getattr(request, "auth", None)
        user: Any = getattr(request, "user", None)
        if getattr(token, "pk", None):
            ident = token_ident(token)
        elif getattr(user, "pk", None):
            ident = f"user:{user.pk}"
        else:
            ident = client_address(request)
        recall = getattr(view, "throttle_scope", "") == "recall"
        self.wait_seconds: int | None = api_call_counted(ident=ident, token=token, recall=recall)
        return self.wait_seconds is None

    def wait(self) -> float | None:
        return self.wait_seconds
