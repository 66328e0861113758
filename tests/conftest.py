"""Shared fixtures: a temporary embedded PostgreSQL per test session, and personas.

Personas: an operator, an editor and a viewer of workspace A, an agent's token of workspace
A (no user), and an outsider who is the operator of workspace B. Every endpoint is tested
against the outsider.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.db import OperationalError, connections
from django.test import TransactionTestCase
from psycopg.errors import DeadlockDetected
from rest_framework.test import APIClient

from policies.models import Workload
from policies.services import workload_create, workspace_create
from portal.models import Membership, Role, Workspace
from team.services import api_token_create
from tests import properties  # noqa: F401 (loads the property tests' profile)
from tests.worker_support import celery_broker, celery_workers, redis_server  # noqa: F401

# The suite is about policies, recall, audit and maintenance, not about the embedder: it embeds
# with the hashing embedder (instant, no model) unless RECALL_EMBEDDER says otherwise. The ONNX
# embedder, the default of an install, has its own tests (tests/recall/test_onnx_embedder.py).
# pytest-django has read the settings before this file, so both are set: the settings for
# this process, the environment for the processes the tests start (workers, servers).
if "RECALL_EMBEDDER" not in os.environ:
    os.environ["RECALL_EMBEDDER"] = "hashing"
    settings.RECALL_EMBEDDER = "hashing"


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (Django, the schema, thousands of test items) lives as long as
    the run: left out of the garbage collector's full passes, which each traversed it again
    (~9% of a worker's CPU went to collections, a third less after)."""
    gc.freeze()


# The test client's handler parts that ``load_middleware`` builds.
_CHAIN = ("_view_middleware", "_template_response_middleware", "_exception_middleware")


@pytest.fixture(scope="session", autouse=True)
def middleware_built_once() -> Iterator[None]:
    """Each test client builds Django's middleware chain for its first request (~3.6 ms with
    coverage's tracer, for thousands of clients). The chain is built once per settings: a
    test that overrides a setting (a new ``settings._wrapped``) gets a chain of its own."""
    from django.test.client import ClientHandler

    built: dict[tuple[type, bool], tuple[Any, dict[str, Any]]] = {}
    original = ClientHandler.load_middleware

    def load_middleware(self: Any, is_async: bool = False) -> None:
        key, wrapped = (type(self), is_async), settings._wrapped
        kept = built.get(key)
        if kept is not None and kept[0] is wrapped:
            self.__dict__.update(kept[1])
            return
        original(self, is_async)
        built[key] = (wrapped, {n: getattr(self, n) for n in (*_CHAIN, "_middleware_chain")})

    ClientHandler.load_middleware = load_middleware  # type: ignore[method-assign]
    yield
    ClientHandler.load_middleware = original  # type: ignore[method-assign]


@pytest.fixture(scope="session", autouse=True)
def static_files_listed_once() -> Iterator[None]:
    """WhiteNoise lists every static file of the finders (thousands: the API docs' assets)
    whenever Django builds its middleware, which each test client does: a sixth of the
    suite's time. The files do not change while the tests run, so the list is made once per
    process and each new middleware gets the same entries."""
    from whitenoise.middleware import WhiteNoiseMiddleware

    listed: dict[str, Any] = {}
    original = WhiteNoiseMiddleware.add_files_from_finders

    def add_files_from_finders(self: WhiteNoiseMiddleware) -> None:
        if not listed:
            before = dict(self.files)
            original(self)
            listed.update({url: f for url, f in self.files.items() if url not in before})
        self.files.update(listed)

    WhiteNoiseMiddleware.add_files_from_finders = add_files_from_finders  # type: ignore[method-assign]
    yield
    WhiteNoiseMiddleware.add_files_from_finders = original  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def django_db_modify_db_settings() -> None:
    """Without DATABASE_URL, point the embedded server at a throw-away data folder."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db.get("EMBEDDED_PGDATA"):
        db["EMBEDDED_PGDATA"] = tempfile.mkdtemp(prefix="crp-test-pg-")
        db["EMBEDDED_TEMPORARY"] = True
        # Deleted at the end of the session: nothing needs to survive a crash of the machine.
        db["EMBEDDED_DURABLE"] = False


@pytest.fixture(scope="session", autouse=True)
def close_stray_connections(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """Let the test database be dropped at the end.

    Threads (the live server, concurrency tests) can leave a session open on it, and
    PostgreSQL refuses to drop a database in use.
    """
    yield
    from django.db import connection

    from portal.db.roles import as_owner

    # As the owner: it may end any session, the application role only its own.
    with django_db_blocker.unblock(), as_owner(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(scope="session", autouse=True)
def owner_role_for_tests(django_db_setup: Any, django_db_blocker: Any) -> None:
    """On the test cluster only, the application role may switch to the owner's role (SET
    ROLE, without inheriting its privileges): tests that play someone with the owner's access
    do so on their own connection, inside their transaction (tests/helpers.py
    ``database_owner``). Production grants nothing of the kind (portal/db/roles.py)."""
    from django.conf import settings
    from django.db import connection
    from psycopg import sql

    from portal.db.roles import as_owner, owner_settings

    db = settings.DATABASES["default"]
    owner = owner_settings(db)
    if owner is None:
        return
    with django_db_blocker.unblock(), as_owner(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [db["USER"]])
        if cursor.fetchone() is None:
            return  # no test of this session uses the database: nothing was migrated
        cursor.execute(
            sql.SQL("GRANT {} TO {} WITH INHERIT FALSE, SET TRUE").format(
                sql.Identifier(owner["USER"]), sql.Identifier(db["USER"])
            )
        )


@pytest.fixture(scope="session", autouse=True)
def tests_see_every_workspace() -> Any:
    """The tests' own code (fixtures, assertions) sees every workspace, as a command does; a
    request made through the test client is scoped like any other (portal/db/scope.py), and
    the test's connection sees everything again once the response is closed. The restore
    goes through the driver, so query counts of a request do not include it."""
    from django.core.signals import request_finished

    from portal.db import scope

    scope.scope_all_by_default()
    request_finished.connect(restore_scope_after_request, dispatch_uid=SCOPE_RESTORE)
    yield
    request_finished.disconnect(dispatch_uid=SCOPE_RESTORE)


SCOPE_RESTORE = "tests.scope_restore"


@pytest.fixture
def scope_kept(db: None) -> Iterator[None]:
    """Requests leave the connection scoped as they left it, as in a production worker (the
    endpoints that take a token as remembered: ``portal.api.views.RememberedTokenView``)."""
    from django.core.signals import request_finished

    from portal.db.scope import ALL, scope_set

    request_finished.disconnect(dispatch_uid=SCOPE_RESTORE)
    try:
        yield
    finally:
        request_finished.connect(restore_scope_after_request, dispatch_uid=SCOPE_RESTORE)
        scope_set(ALL)


def restore_scope_after_request(**kwargs: Any) -> None:
    """``request_finished`` receiver: the main thread's connection sees every workspace."""
    import threading

    from django.db import connection

    from portal.db import scope

    raw = connection.connection
    if threading.current_thread() is not threading.main_thread() or raw is None or raw.closed:
        return
    try:
        raw.execute("SELECT set_config(%s, '*', false)", [scope.SETTING])
    except Exception:  # noqa: BLE001 - an aborted transaction: the test sees its error
        scope.scope_noted(None)
    else:
        scope.scope_noted(scope.ALL)


def server_folder(prefix: str) -> Path:
    """A folder for a database server's data, outside pytest's own temporary folders.

    The embedded server runs as another system user (``pgserver``), which must traverse the
    folders above its data; pytest makes its temporary root private again whenever another
    pytest session starts on the machine, which would lock the server out mid-test."""
    return Path(tempfile.mkdtemp(prefix=f"crp-{prefix}-"))


@pytest.fixture
def server_tmp() -> Iterator[Path]:
    """``server_folder`` for one test, removed afterwards."""
    folder = server_folder("test")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def fresh_throttles() -> Any:
    """Each test starts with no throttle counts (they live in the process's cache), no token
    use noted and not written yet (whose write a later test's call would make), and no token
    lookup or effective policy remembered (keyed by ids that module-scoped rows share)."""
    from policies import selectors
    from portal import throttling, tokens

    def forget() -> None:
        throttling.reset()
        tokens.token_uses_forget()
        tokens.token_lookups_forget()
        selectors.remembered_policies_forget()

    forget()
    yield
    forget()


# Personas have passwords; the default hasher would cost every test ~0.2 s per persona. Set
# for the process (the processes tests start keep the real one), not per test: a setting
# overridden per test would give every test client a middleware chain of its own.
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
settings.PASSWORD_HASHERS = FAST_HASHERS

# A transactional test (a browser's, a worker's) ends with Django's flush: every table emptied,
# then the post_migrate signal makes the content types and permissions again, ~70 ms of a
# ~165 ms flush. Those two tables are kept instead: they hold what the signal would make.
FLUSH_KEEPS = {"django_content_type", "auth_permission"}
# The live server may still be answering a request of a page the test has closed: its
# transaction and the flush's TRUNCATE can each wait for a lock the other holds. PostgreSQL then
# ends one of them; if it is the flush, the request has gone on and the flush is made again.
FLUSH_ATTEMPTS = 3
_django_flush = TransactionTestCase._fixture_teardown


def _flush_keeping_content_types(self: TransactionTestCase) -> None:
    if self.available_apps is not None or self.serialized_rollback:
        # Either changes what Django's flush empties and whether it makes anything again.
        _django_flush(self)
        return
    for name in self._databases_names(include_mirrors=False):
        connection = connections[name]
        tables = connection.introspection.django_table_names(
            only_existing=True, include_views=False
        )
        emptied = [table for table in tables if table not in FLUSH_KEEPS]
        statements = connection.ops.sql_flush(no_style(), emptied)
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                connection.ops.execute_sql_flush(statements)
                break
            except OperationalError as exc:
                if attempt == FLUSH_ATTEMPTS or not isinstance(exc.__cause__, DeadlockDetected):
                    raise


TransactionTestCase._fixture_teardown = _flush_keeping_content_types  # type: ignore[method-assign]


@dataclass
class Persona:
    user: Any
    token: str
    role: str
    workspace: Workspace

    def api(self) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.token}")
        return client

    def session(self) -> APIClient:
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(self.user)
        return client


def persona(workspace: Workspace, username: str, role: str) -> Persona:
    user = get_user_model().objects.create_user(username=username, password="pw-" + username)
    Membership.objects.create(user=user, workspace=workspace, role=role)
    _, raw = api_token_create(workspace=workspace, name=f"{username}-token", role=role)
    return Persona(user=user, token=raw, role=role, workspace=workspace)


def agent_persona(workspace: Workspace) -> Persona:
    """An agent's API token (every agent scope, bound to nothing); no user."""
    _, raw = api_token_create(workspace=workspace, name="ada-agent", role=Role.AGENT)
    return Persona(user=None, token=raw, role=Role.AGENT, workspace=workspace)


def team_a() -> Workspace:
    return workspace_create(slug="team-a", name="Team A", author="system:test")


def team_b() -> Workspace:
    return workspace_create(slug="team-b", name="Team B", author="system:test")


def support_bot(workspace: Workspace) -> Workload:
    return workload_create(workspace=workspace, name="support-bot", author="system:test")


@contextmanager
def _rolled_back(django_db_blocker: Any) -> Iterator[None]:
    from django.db import transaction

    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            yield
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


@pytest.fixture(scope="module")
def module_db(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """Data a module's tests share, made once: module-scoped fixtures that ask for this write
    inside a transaction rolled back after the module's last test, and each test runs in a
    savepoint inside it (pytest-django's ``db``), so no test sees another's writes."""
    with _rolled_back(django_db_blocker):
        yield


@pytest.fixture(scope="class")
def class_db(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """``module_db`` for the tests of one class: rolled back after the class's last test."""
    with _rolled_back(django_db_blocker):
        yield


@pytest.fixture
def workspace_a(db: Any) -> Workspace:
    return team_a()


@pytest.fixture
def workspace_b(db: Any) -> Workspace:
    return team_b()


@pytest.fixture
def operator(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "olga", Role.OPERATOR)


@pytest.fixture
def editor(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "eddie", Role.EDITOR)


@pytest.fixture
def viewer(workspace_a: Workspace) -> Persona:
    return persona(workspace_a, "vera", Role.VIEWER)


@pytest.fixture
def outsider(workspace_b: Workspace) -> Persona:
    return persona(workspace_b, "otto", Role.OPERATOR)


@pytest.fixture
def agent(workspace_a: Workspace) -> Persona:
    """An agent's API token in workspace A (every agent scope, bound to nothing); no user."""
    return agent_persona(workspace_a)


@pytest.fixture
def workload_a(workspace_a: Workspace) -> Workload:
    return support_bot(workspace_a)


@pytest.fixture
def workload_b(workspace_b: Workspace) -> Workload:
    return workload_create(workspace=workspace_b, name="other-bot", author="system:test")
