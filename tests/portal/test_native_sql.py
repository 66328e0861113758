"""Prepared statements are converted once to PostgreSQL's placeholders (portal/db/cursors.py)."""

from __future__ import annotations

import pytest

from portal.db.cursors import PreparedStatement, native_sql, prepared_statement


class NativeSqlTests:
    def test_named_placeholders_become_numbered_once_each(self):
        sql, names = native_sql("SELECT %(a)s, %(b)s, %(a)s WHERE x LIKE 'a%%'")
        assert sql == "SELECT $1, $2, $1 WHERE x LIKE 'a%'"
        assert names == ("a", "b")

    def test_positional_placeholders_are_numbered_in_order(self):
        assert native_sql("SELECT %s, %s") == ("SELECT $1, $2", None)

    def test_a_statement_mixing_both_is_refused(self):
        with pytest.raises(ValueError, match="mixes"):
            native_sql("SELECT %(a)s, %s")

    def test_a_declared_statement_runs_with_named_or_positional_parameters(self, db):
        named = prepared_statement("test.named", "SELECT %(b)s::int - %(a)s::int, %(a)s::int")
        positional = prepared_statement("test.positional", "SELECT %s::int * %s::int")

        assert named.fetchone({"a": 2, "b": 7, "unused": 0}) == (5, 2)
        assert positional.fetchall([3, 4]) == [(12,)]


def prepared_on_the_connection(marker: str) -> list[str]:
    """The statements prepared on the test's connection whose text holds ``marker``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement FROM pg_prepared_statements WHERE statement LIKE %s",
            [f"%{marker}%"],
        )
        return [row[0] for row in cursor.fetchall()]


def prepared_past_the_threshold(name: str, *, factor: int) -> PreparedStatement:
    """A statement multiplying by ``factor``, run past the connection's prepare_threshold:
    prepared on the connection, its text marked with ``name``."""
    statement = prepared_statement(name, f"SELECT %s::int * {factor} /* {name} */")
    for n in range(4):
        assert statement.fetchone([n]) == (factor * n,)
    assert prepared_on_the_connection(f"/* {name} */") == [statement.native]
    return statement


def blocks_rolled_back_keep(statement: PreparedStatement) -> None:
    """Roll back two atomic blocks, one on an exception in Python after ``statement`` ran,
    one on an error in the server; ``statement`` stays prepared after each."""
    from django.db import DataError, transaction

    marker = f"/* {statement.name} */"
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        statement.fetchone([1])
        _ = 1 / 0
    assert prepared_on_the_connection(marker) == [statement.native]
    cast = prepared_statement(f"{statement.name}.cast", "SELECT %s::text::int")
    with pytest.raises(DataError), transaction.atomic():
        cast.fetchone(["not a number"])  # the transaction fails in the server
    assert prepared_on_the_connection(marker) == [statement.native]


class KeptCursorTests:
    """A prepared statement runs on the connection's own cursor, with the checks Django's
    cursor makes, unless Django must see every statement."""

    def test_statements_share_one_cursor_per_format_until_the_connection_changes(self, db):
        from django.db import connection

        statement = prepared_statement("test.kept", "SELECT %s::int + 1")
        assert statement.fetchone([1]) == (2,)
        first = connection.kept_cursors[False]
        assert statement.fetchall([2]) == [(3,)]
        assert connection.kept_cursors[False] is first
        assert prepared_statement("test.kept.binary", "SELECT %s::int", binary=True).fetchone(
            [5]
        ) == (5,)
        assert connection.kept_cursors[True] is not first
        assert {c.connection for c in connection.kept_cursors.values()} == {connection.connection}

    def test_a_new_connection_gets_new_cursors(self, transactional_db):
        from django.db import connection

        statement = prepared_statement("test.kept", "SELECT %s::int + 1")
        statement.fetchone([1])
        before = connection.kept_cursors[False]
        connection.close()
        assert statement.fetchone([3]) == (4,)
        assert connection.kept_cursors[False] is not before
        assert connection.kept_cursors[False].connection is connection.connection
        assert before.connection.closed

    def test_database_errors_are_djangos(self, db):
        from django.db import DataError, transaction

        statement = prepared_statement("test.kept.cast", "SELECT %s::text::int")
        with pytest.raises(DataError), transaction.atomic():
            statement.fetchone(["not a number"])

    def test_a_transaction_that_must_roll_back_refuses_further_statements(self, db):
        from django.db import DatabaseError, transaction
        from django.db.transaction import TransactionManagementError

        statement = prepared_statement("test.kept.cast", "SELECT %s::text::int")
        with transaction.atomic():
            try:
                with transaction.atomic(savepoint=False):
                    statement.fetchone(["x"])
            except DatabaseError:
                pass
            with pytest.raises(TransactionManagementError):
                statement.fetchone(["1"])

    def test_a_rolled_back_transaction_leaves_the_statements_prepared(self, transactional_db):
        # psycopg's own rollback() deallocates every prepared statement; the backend's keeps
        # them, so the recall after a failed request runs its prepared read.
        from django.db import connection

        statement = prepared_past_the_threshold("test.kept.rollback", factor=2)
        blocks_rolled_back_keep(statement)
        assert statement.fetchone([21]) == (42,)
        assert not connection.needs_rollback and connection.connection.info.transaction_status == 0

    def test_a_rolled_back_savepoint_leaves_the_statements_prepared(self, db):
        # ROLLBACK TO SAVEPOINT's command tag is "ROLLBACK": psycopg deallocated every prepared
        # statement when a cursor ran it (Django's savepoint rollback).
        from django.db import transaction

        statement = prepared_past_the_threshold("test.kept.savepoint", factor=3)
        with transaction.atomic():
            blocks_rolled_back_keep(statement)  # each inner block a savepoint
            assert statement.fetchone([7]) == (21,)

    def test_logged_queries_and_execute_wrappers_see_each_statement(self, db):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        statement = prepared_statement("test.kept.logged", "SELECT %s::int + 1 /* logged */")
        with CaptureQueriesContext(connection) as logged:
            for n in range(4):  # the first runs unprepared, the others prepared
                assert statement.fetchone([n]) == (n + 1,)
        assert [q["sql"] for q in logged] == [statement.native] * 4
        seen = []

        def wrapper(execute, sql, params, many, context):
            seen.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(wrapper):
            assert statement.fetchone([2]) == (3,)
        assert seen == [statement.native]


class VectorFormTests:
    def test_a_vector_sent_in_binary_is_the_vector_written_in_text(self, db):
        # Each element is rounded to the nearest float4 either way, so a query ranked through
        # either form finds exactly the same distances.
        import random

        from portal.db.cursors import BinaryVector, vector_literal

        same = prepared_statement(
            "test.vector_forms",
            "SELECT %s::vector = %s::vector, %s::vector <=> %s::vector, %s::vector <=> %s::vector",
        )
        rng = random.Random(7)
        for _ in range(20):
            query = [rng.uniform(-1, 1) * 10 ** rng.randint(-6, 2) for _ in range(384)]
            other = vector_literal([rng.gauss(0, 1) for _ in range(384)])
            equal, binary, text = same.fetchone(
                [BinaryVector(query), vector_literal(query), BinaryVector(query), other,
                 vector_literal(query), other]
            )  # fmt: skip
            assert equal is True
            assert binary == text

    def test_a_stored_vector_is_the_one_pgvector_would_have_stored(self, db):
        """A model's vector is written in ``vector_literal``'s text (``StoredVector``): the
        same float4 elements as pgvector's own text of it, and as the binary form."""
        import random

        from pgvector import Vector

        from portal.db.cursors import BinaryVector, StoredVector
        from recall.models import MemoryRecord

        field = MemoryRecord._meta.get_field("embedding")
        same = prepared_statement(
            "test.vector_stored", "SELECT %s::vector = %s::vector AND %s::vector = %s::vector"
        )
        rng = random.Random(11)
        for _ in range(20):
            vector = [rng.uniform(-1, 1) * 10 ** rng.randint(-6, 2) for _ in range(384)]
            ours = field.get_prep_value(StoredVector(vector))
            assert ours != Vector(vector).to_text()  # another text...
            assert same.fetchone(  # ...of the same vector
                [ours, Vector(vector).to_text(), ours, BinaryVector(vector)]
            ) == (True,)
