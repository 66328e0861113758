"""The application's database role: it owns nothing and cannot change the audit trail.

Tried for real on the test cluster, as the application connects: every statement the role
must not run is run, and PostgreSQL refuses it.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from psycopg import errors

from audit.models import AuditChainHead, AuditEvent
from portal.db.roles import APPEND_ONLY_TABLES, NEVER_DELETED_TABLES, owner_settings
from tests.helpers import database_owner

pytestmark = pytest.mark.django_db


def _refused(statement: str, params: list[Any] | None = None) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), transaction.atomic():
        with connection.cursor() as cursor:
            try:
                cursor.execute(statement, params)
            except Exception as exc:  # Django wraps the driver's error; the cause is psycopg's
                raise exc.__cause__ or exc from None


@pytest.fixture
def events(workload_a: Any) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(workspace=workload_a.workspace).order_by("id"))


class ApplicationRoleTests:
    def test_the_application_connects_as_a_role_that_owns_no_table(self):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_user, session_user, r.rolsuper, r.rolbypassrls,"
                " (SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                "  AND tableowner = current_user)"
                " FROM pg_roles r WHERE r.rolname = current_user"
            )
            user, session_user, superuser, bypass, owned = cursor.fetchone()

        owner = owner_settings(connection.settings_dict)
        assert owner is not None and user != owner["USER"]
        assert (user, session_user) == ("portal_app", "portal_app")
        assert (superuser, bypass, owned) == (False, False, 0)

    def test_the_owner_owns_every_table(self):
        with connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
            owners = {row[0] for row in cursor.fetchall()}

        assert owners == {connection.settings_dict["OWNER"]["USER"]}

    @pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
    @pytest.mark.parametrize(
        "statement",
        [
            "UPDATE {table} SET workspace_id = workspace_id",
            "DELETE FROM {table}",
            "TRUNCATE {table}",
        ],
    )
    def test_audit_rows_cannot_be_changed_deleted_or_truncated(self, events, table, statement):
        _refused(statement.format(table=table))

        assert AuditEvent.objects.filter(pk__in=[e.pk for e in events]).count() == len(events)

    @pytest.mark.parametrize("table", NEVER_DELETED_TABLES)
    def test_the_chain_head_cannot_be_deleted(self, events, table):
        _refused(f"DELETE FROM {table}")

        assert AuditChainHead.objects.filter(workspace=events[0].workspace_id).exists()

    @pytest.mark.parametrize(
        "statement",
        [
            "ALTER TABLE audit_auditevent DISABLE TRIGGER ALL",
            "ALTER TABLE recall_memoryrecord DISABLE ROW LEVEL SECURITY",
            "DROP TABLE audit_injection",
            "CREATE TABLE public.scratch (id int)",
        ],
    )
    def test_the_schema_and_its_grants_are_out_of_reach(self, statement):
        with pytest.raises((errors.InsufficientPrivilege, errors.WrongObjectType)):
            with transaction.atomic(), connection.cursor() as cursor:
                try:
                    cursor.execute(statement)
                except Exception as exc:
                    raise exc.__cause__ or exc from None

    def test_the_application_cannot_grant_itself_what_it_lacks(self):
        with connection.cursor() as cursor:
            # PostgreSQL only warns ("no privileges were granted") and grants nothing.
            cursor.execute("GRANT UPDATE, DELETE ON audit_auditevent TO portal_app")
            cursor.execute(
                "SELECT has_table_privilege('audit_auditevent', 'UPDATE'),"
                " has_table_privilege('audit_auditevent', 'DELETE'),"
                " has_table_privilege('audit_auditevent', 'INSERT')"
            )
            assert cursor.fetchone() == (False, False, True)

    def test_the_owner_can_still_do_what_the_application_cannot(self, events):
        """The refusals above are the role's, not the table's: the owner may edit a row."""
        with database_owner(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE audit_auditevent SET author = author WHERE id = %s", [events[0].pk]
            )
            assert cursor.rowcount == 1
