from __future__ import annotations

from django.db import connection


class DatabaseTests:
    def test_it_runs_on_postgres_with_pgvector(self, db):
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            assert cursor.fetchone() is not None
        assert connection.vendor == "postgresql"
