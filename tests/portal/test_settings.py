from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import embedded_db
from portal.database_url import parse_database_url
from portal.env import env_bool, env_int, env_json

ROOT = Path(__file__).resolve().parents[2]


def manage_check(**env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` in a process of its own, with ``env`` over this one's."""
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


class DeploySettingsTests:
    def test_production_settings_pass_the_deploy_check(self):
        env = {
            **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
            "DJANGO_PRODUCTION": "true",
            "DJANGO_SECRET_KEY": "k" * 30 + "-production-secret-" + "z" * 20,
            "DJANGO_ALLOWED_HOSTS": "portal.example.com",
            "AUDIT_HMAC_KEYS": "2026-12:" + "a" * 40,
        }
        result = subprocess.run(
            [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    @pytest.mark.parametrize(
        ("keys", "key_id", "complaint"),
        [
            ("", "", "AUDIT_HMAC_KEYS must be set in production"),
            ("k1:short", "", "at least 32 characters"),
            ("k1" + "x" * 40, "", "must be id:secret"),
            ("k1:" + "x" * 40 + ",k1:" + "y" * 40, "", "appears twice"),
            ("k1:" + "x" * 40, "k2", "names no key"),
        ],
    )
    def test_production_refuses_to_start_without_sound_audit_keys(self, keys, key_id, complaint):
        result = manage_check(
            DJANGO_PRODUCTION="true",
            DJANGO_SECRET_KEY="k" * 30 + "-production-secret-" + "z" * 20,
            AUDIT_HMAC_KEYS=keys,
            AUDIT_HMAC_KEY_ID=key_id,
        )
        assert result.returncode != 0
        assert complaint in result.stderr
        assert "x" * 40 not in result.stderr  # a secret is never echoed

    def test_production_refuses_to_start_without_a_secret_key(self):
        result = manage_check(DJANGO_PRODUCTION="true", DJANGO_SECRET_KEY="")
        assert result.returncode != 0
        assert "DJANGO_SECRET_KEY must be set" in result.stderr


class DatabaseUrlTests:
    def test_it_reads_a_host_and_port_url(self):
        db = parse_database_url("postgresql://ann:s%40cret@db.example:6543/recall?sslmode=require")
        assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == (
            "ann",
            "s@cret",
            "db.example",
            "6543",
            "recall",
        )
        assert db["OPTIONS"] == {"sslmode": "require"}

    def test_it_reads_the_unix_socket_form(self):
        db = parse_database_url("postgresql://postgres:@/postgres?host=/tmp/pg")
        assert db["HOST"] == "/tmp/pg"
        assert db["NAME"] == "postgres"

    def test_it_rejects_sqlite(self):
        with pytest.raises(ImproperlyConfigured, match="SQLite is not supported"):
            parse_database_url("sqlite:///db.sqlite3")


class EnvHelperTests:
    def test_a_malformed_boolean_fails_at_start_up(self, monkeypatch):
        monkeypatch.setenv("SOME_FLAG", "maybe")
        with pytest.raises(ImproperlyConfigured, match="SOME_FLAG"):
            env_bool("SOME_FLAG")

    def test_a_malformed_integer_fails_at_start_up(self, monkeypatch):
        monkeypatch.setenv("SOME_INT", "ten")
        with pytest.raises(ImproperlyConfigured, match="SOME_INT"):
            env_int("SOME_INT", 1)

    def test_an_integer_out_of_its_range_fails_at_start_up(self, monkeypatch):
        monkeypatch.setenv("SOME_INT", "65")
        with pytest.raises(ImproperlyConfigured, match="SOME_INT must be at most 64, got 65"):
            env_int("SOME_INT", 1, minimum=0, maximum=64)
        assert env_int("SOME_INT", 1, minimum=0, maximum=65) == 65

    def test_malformed_json_fails_at_start_up_and_blank_is_the_default(self, monkeypatch):
        monkeypatch.setenv("SOME_JSON", "{kind: extractive}")
        with pytest.raises(ImproperlyConfigured, match="SOME_JSON must be JSON"):
            env_json("SOME_JSON", {})
        monkeypatch.setenv("SOME_JSON", " ")
        assert env_json("SOME_JSON", {"a": 1}) == {"a": 1}
        monkeypatch.setenv("SOME_JSON", '{"x": {"kind": "extractive"}}')
        assert env_json("SOME_JSON", {}) == {"x": {"kind": "extractive"}}

    def test_too_many_recall_lanes_fail_at_start_up_with_the_limit(self):
        # A lane is a small integer in the database: far too many would fail every recall.
        result = manage_check(AUDIT_RECALL_LANES="100000")
        assert result.returncode != 0
        assert "AUDIT_RECALL_LANES must be at most 64, got 100000" in result.stderr


class EmbeddedServerTests:
    def test_a_data_folder_that_is_a_file_gives_a_clear_error(self, tmp_path):
        target = tmp_path / "pgdata"
        target.write_text("not a folder")
        with pytest.raises(ImproperlyConfigured, match="is not a folder"):
            embedded_db.ensure_server(target)

    def test_a_non_empty_foreign_folder_gives_a_clear_error(self, tmp_path):
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(ImproperlyConfigured, match="not a PostgreSQL data folder"):
            embedded_db.ensure_server(tmp_path)

    def test_starting_twice_reuses_the_running_server(self, server_tmp):
        pgdata = server_tmp / "pg"
        first = embedded_db.ensure_server(pgdata, temporary=True)
        second = embedded_db.ensure_server(pgdata, temporary=True)
        assert first == second
        assert (pgdata / "postmaster.pid").exists()

    def test_shared_buffers_is_written_to_the_cluster_and_used(self, server_tmp):
        import psycopg

        pgdata = server_tmp / "tuned"
        socket_dir = embedded_db.ensure_server(pgdata, temporary=True, shared_buffers="48MB")
        with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres") as conn:
            assert conn.execute("SHOW shared_buffers").fetchone()[0] == "48MB"
        assert "include_if_exists" in (pgdata / "postgresql.conf").read_text()

    def test_only_a_server_asked_not_to_be_durable_skips_flushing(self, server_tmp):
        import psycopg

        shown = {}
        for name, durable in (("durable", True), ("throwaway", False)):
            socket_dir = embedded_db.ensure_server(
                server_tmp / name, temporary=True, durable=durable
            )
            with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres") as conn:
                shown[name] = [
                    conn.execute(f"SHOW {setting}").fetchone()[0]
                    for setting in ("fsync", "synchronous_commit", "full_page_writes")
                ]
        assert shown == {"durable": ["on", "on", "on"], "throwaway": ["off", "off", "off"]}

    @pytest.mark.django_db
    def test_the_suites_own_server_is_the_throwaway_kind(self):
        from django.conf import settings
        from django.db import connection

        if not settings.DATABASES["default"].get("EMBEDDED_PGDATA"):
            pytest.skip("DATABASE_URL names a server the suite does not start")

        with connection.cursor() as cursor:
            cursor.execute("SHOW fsync")
            assert cursor.fetchone()[0] == "off"

    @pytest.mark.parametrize("value", ["lots", "1GB'; fsync = 'off", "0MB", "512"])
    def test_a_malformed_shared_buffers_is_refused_before_anything_starts(self, tmp_path, value):
        with pytest.raises(ImproperlyConfigured, match="EMBEDDED_PG_SHARED_BUFFERS"):
            embedded_db.ensure_server(tmp_path / "pg", shared_buffers=value)
        assert not (tmp_path / "pg").exists()
