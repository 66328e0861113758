"""Two database roles: the owner, which runs the migrations and owns every table, and the
application role, which serves requests and runs tasks.

The application role owns nothing, so it cannot alter a table, turn row-level security off
or grant itself more. What it may do is granted after every migration
(``grant_application_role``, run by ``manage.py migrate``): reading and writing the tables,
except the audit trail's append-only ones, where it may only read and insert. An application
that cannot UPDATE, DELETE or TRUNCATE an audit row cannot quietly rewrite history, whoever
finds its credentials.

``DATABASES["default"]["OWNER"]`` holds the owner's ``USER`` (and ``PASSWORD``); without it
the application connects as whatever role it is given and nothing is granted (a single-role
set-up, as before). ``as_owner`` switches a connection alias to the owner for the length of
a block (the migrate command, the test suite's database creation and flushes).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import connections

# Whether connections opened now log in as the owner.
_owner: ContextVar[bool] = ContextVar("database_owner", default=False)

# Tables the application may read and insert into, never change or delete from: the audit
# trail's events and the rows its append writes with them.
APPEND_ONLY_TABLES = ("audit_auditevent", "audit_injection")
# Tables the application may insert into and update, never delete from: the chain's tip.
NEVER_DELETED_TABLES = ("audit_auditchainhead",)


def owner_settings(settings_dict: dict[str, Any]) -> dict[str, Any] | None:
    """The owner's credentials when they differ from the application's, else None."""
    owner = settings_dict.get("OWNER") or None
    if not owner or not owner.get("USER") or owner["USER"] == settings_dict.get("USER"):
        return None
    return dict(owner)


def owner_mode() -> bool:
    return _owner.get()


@contextmanager
def owner_logins() -> Iterator[None]:
    """Connections opened inside the block log in as the owner (those open stay as they are)."""
    token = _owner.set(True)
    try:
        yield
    finally:
        _owner.reset(token)


def connection_params_for_role(settings_dict: dict[str, Any], params: dict[str, Any]) -> None:
    """In owner mode, log in as the owner instead of the application role."""
    owner = owner_settings(settings_dict)
    if owner is None or not _owner.get():
        return
    params["user"] = owner["USER"]
    if owner.get("PASSWORD"):
        params["password"] = owner["PASSWORD"]
    else:
        params.pop("password", None)


@contextmanager
def as_owner(alias: str = "default") -> Iterator[None]:
    """Connections to ``alias`` opened inside the block log in as the owner.

    The alias's open connection is closed on the way in and on the way out, so no
    connection of one role is used as the other's. Outside any transaction only.
    """
    connection = connections[alias]
    if owner_settings(connection.settings_dict) is None or _owner.get():
        yield
        return
    connection.close()
    try:
        with owner_logins():
            yield
    finally:
        connection.close()


def grant_application_role(alias: str = "default") -> str | None:
    """Give the application role what it may do on every table (owner mode only).

    Creates the role first on the embedded server (which trusts its own socket); an external
    server's application role is created by its administrator (docs/deploy.md). Returns the
    role's name, or None in a single-role set-up.
    """
    from psycopg import sql

    connection = connections[alias]
    settings_dict = connection.settings_dict
    if owner_settings(settings_dict) is None:
        return None
    app = settings_dict["USER"]
    role = sql.Identifier(app)
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = %s", [app])
        row = cursor.fetchone()
        if row is None:
            if not settings_dict.get("EMBEDDED_PGDATA"):
                from django.core.management.base import CommandError

                raise CommandError(
                    f"The application's database role {app!r} does not exist. Create it"
                    " (docs/deploy.md, 'Two database roles'), then migrate again."
                )
            cursor.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(role))
        elif row[0]:
            from django.core.management.base import CommandError

            raise CommandError(
                f"The application's database role {app!r} is a superuser or bypasses row-level"
                " security; it must be neither."
            )
        statements = [
            sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                sql.Identifier(settings_dict["NAME"]), role
            ),
            sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role),
            sql.SQL(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {}"
            ).format(role),
            sql.SQL(
                "REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM {}"
            ).format(role),
            sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {}").format(role),
        ]
        for table in APPEND_ONLY_TABLES:
            statements.append(
                sql.SQL("REVOKE UPDATE, DELETE ON {} FROM {}").format(sql.Identifier(table), role)
            )
        for table in NEVER_DELETED_TABLES:
            statements.append(
                sql.SQL("REVOKE DELETE ON {} FROM {}").format(sql.Identifier(table), role)
            )
        for statement in statements:
            cursor.execute(statement)
    return app
