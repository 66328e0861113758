"""Turn a ``DATABASE_URL`` into a Django ``DATABASES`` entry.

Handles ``postgres://user:pass@host:port/name`` and the Unix-socket form that libpq accepts,
``postgresql://user@/name?host=/path/to/socket/dir``.
"""

from __future__ import annotations

from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_SCHEMES = {"postgres", "postgresql", "pgsql"}


def parse_database_url(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    if scheme not in _SCHEMES:
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a PostgreSQL URL (postgresql://...); got scheme {scheme!r}. "
            "SQLite is not supported: recall relies on pgvector."
        )
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    host = query.pop("host", None) or unquote(parts.hostname or "")
    name = unquote(parts.path.lstrip("/")) or "postgres"
    options: dict[str, object] = {}
    if "sslmode" in query:
        options["sslmode"] = query.pop("sslmode")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
    }
