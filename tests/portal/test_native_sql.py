"""Prepared statements are converted once to PostgreSQL's placeholders (portal/db/cursors.py)."""

from __future__ import annotations

import pytest

from portal.db.cursors import native_sql, prepared_statement


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
