"""Which workspaces a connection may see: the setting that row-level security reads.

Every workspace-owned table has a policy (migration ``portal.0002``): a row is visible, and
may be written, only when its workspace is among ``portal.workspaces``, a per-connection
setting holding workspace ids separated by commas, or ``*`` for all of them. Unset or empty,
nothing is visible: a query that forgets its workspace filter returns no other workspace's
rows, and a connection that was never scoped returns none at all.

Who sets it:

- an API call with a token: the token lookup itself (``portal.authentication``), in the same
  statement, so the recall hot path pays no extra round trip;
- every other request: ``WorkspaceScopeMiddleware``, from the signed-in user's memberships
  (a superuser: all; nobody signed in: none);
- background workers and management commands: all workspaces (``scope_all_by_default``),
  being the system's own code acting on the ids it was given;
- a service that creates a workspace adds it to the scope it runs in (``scope_include``).

The application's role cannot turn the policies off (``portal.db.roles``); the owner, which
runs migrations, is not subject to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection as default_connection

SETTING = "portal.workspaces"
ALL = "*"

# What a new connection of this process starts with: nothing, unless the process is a worker
# or a command (scope_all_by_default).
_process_default = ""


def scope_all_by_default() -> None:
    """This process (a worker, a command, the test suite) sees every workspace by default."""
    global _process_default
    _process_default = ALL


def scope_set(value: str, connection: Any = None) -> None:
    connection = connection or default_connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, false)", [SETTING, value])
    scope_noted(value, connection)


# What each connection's scope was last set to, as this process saw it: a hint for the recall
# endpoint (``portal.tokens.token_remembered``), never trusted alone. A
# rolled-back transaction can undo a ``set_config``; whatever relies on the hint checks the
# setting itself in its statement.
def scope_noted(value: str | None, connection: Any = None) -> None:
    """Note that ``connection``'s scope is now ``value`` (None: not known)."""
    connection = connection or default_connection
    connection.portal_scope_noted = (connection.connection, value)


def scope_hint(connection: Any = None) -> str | None:
    """The scope last noted for the connection's current session, or None."""
    connection = connection or default_connection
    noted = getattr(connection, "portal_scope_noted", None)
    if noted is None or noted[0] is None or noted[0] is not connection.connection:
        return None
    return noted[1]


def scope_include(workspace_id: int) -> None:
    """Add a workspace (one just created) to what this connection may see, in one statement."""
    with default_connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config(%(s)s, CASE WHEN current_setting(%(s)s, true) = '*' THEN '*'"
            " ELSE concat_ws(',', nullif(current_setting(%(s)s, true), ''), %(id)s) END, false)",
            {"s": SETTING, "id": str(int(workspace_id))},
        )
    scope_noted(None)


def on_connection_created(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: a new connection starts with the process's default."""
    if _process_default:
        scope_set(_process_default, connection)


class WorkspaceScopeMiddleware:
    """Scope the connection of each signed-in user's request to the user's workspaces (a
    superuser's: all), in one statement.

    An API call with a bearer token is scoped by the token lookup instead (no statement here,
    none extra on the hot path); an invalid token fails before any data is read. A request
    from nobody signed in reads no workspace data (login, health, static files) and costs no
    statement: a database that is down does not turn /healthz into an error.
    """

    def __init__(self, get_response: Callable[[Any], Any]):
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        try:
            self._scope(request)
        except Exception as exc:
            from portal.middleware import database_unavailable_response

            unavailable = database_unavailable_response(request, exc)
            if unavailable is None:
                raise
            return unavailable
        return self.get_response(request)

    def _scope(self, request: Any) -> None:
        if request.META.get("HTTP_AUTHORIZATION", "").lower().startswith("bearer "):
            return
        user = request.user  # the session's user, read here from the database
        if not getattr(user, "is_authenticated", False):
            return
        if user.is_superuser:
            scope_set(ALL)
        else:
            self._scope_to_memberships(user.pk)

    @staticmethod
    def _scope_to_memberships(user_id: int) -> None:
        from portal.models import Membership

        with default_connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config(%s, coalesce(string_agg(workspace_id::text, ','), ''), false)"
                f" FROM {Membership._meta.db_table} WHERE user_id = %s",
                [SETTING, user_id],
            )
        scope_noted(None)
