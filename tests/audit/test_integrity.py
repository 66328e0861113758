"""The audit trail against someone with the database owner's access.

Each test tampers as the owner (the application's role may not), then verifies: the chain's
HMAC catches what is rewritten without the key, the anchors kept outside the database catch
what is rewritten with it, and the first broken link is named.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.anchors import AnchorFile, anchor_file_read, audit_anchor_record
from audit.chain import GENESIS_HASH, ChainKey, event_hash
from audit.keys import signing_key
from audit.models import AuditChainHead, AuditEvent
from audit.services import _hashed_fields, audit_chain_verify
from policies.services import workload_policy_save
from tests.helpers import database_owner, owner_execute
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(operator: Any, workload_a: Any) -> list[AuditEvent]:
    for budget in (3000, 2900, 2800, 2700):
        workload_policy_save(
            workload=workload_a,
            environment="",
            document={"totalTokenBudget": budget},
            author="user:olga",
        )
    return list(AuditEvent.objects.filter(workspace=operator.workspace).order_by("id"))


@pytest.fixture
def anchors(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "anchors.jsonl"
    settings.AUDIT_ANCHOR_FILE = str(path)
    return path


def _fields(event: AuditEvent, **changes: Any) -> dict[str, Any]:
    values = {
        "type": event.type,
        "occurred_at": event.occurred_at,
        "author": event.author,
        "workload_id": event.workload_id,
        "environment": event.environment,
        "actor_id": event.actor_id,
        "payload": event.payload,
        **changes,
    }
    return _hashed_fields(workspace_slug=event.workspace.slug, **values)


def _rewrite(events: list[AuditEvent], key: ChainKey | None, **changes: Any) -> str:
    """Rewrite every event with ``changes`` and recompute the whole chain with ``key`` (None:
    the plain SHA-256 of unkeyed events), as the owner; move the head to the new tip."""
    prev = GENESIS_HASH
    for event in events:
        digest = event_hash(prev, _fields(event, **changes), key)
        owner_execute(
            "UPDATE audit_auditevent SET author = %s, prev_hash = %s, hash = %s, key_id = %s"
            " WHERE id = %s",
            [changes.get("author", event.author), prev, digest, key.id if key else "", event.pk],
        )
        prev = digest
    owner_execute(
        "UPDATE audit_auditchainhead SET last_hash = %s WHERE workspace_id = %s AND lane = 0",
        [prev, events[0].workspace_id],
    )
    return prev


class TamperingAsTheOwnerTests:
    def test_new_events_are_keyed(self, history):
        key = signing_key()
        first = history[0]

        assert {event.key_id for event in history} == {key.id}
        assert first.hash == event_hash(GENESIS_HASH, _fields(first), key)
        assert first.hash != event_hash(GENESIS_HASH, _fields(first))

    def test_an_edited_row_is_named(self, operator, history):
        owner_execute(
            "UPDATE audit_auditevent SET author = 'user:mallory' WHERE id = %s", [history[2].pk]
        )

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, history[2].pk)

    def test_a_deleted_row_is_named_by_the_link_after_it(self, operator, history):
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[2].pk])

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, history[3].pk)

    def test_an_inserted_row_is_named(self, operator, history):
        """Appended after the tip, chained to it and the head moved, hashed without the key."""
        last = history[-1]
        forged = {**_fields(last, author="user:mallory"), "payload": {"forged": True}}
        digest = event_hash(last.hash, forged, ChainKey(last.key_id, b"a guess at the key"))
        owner_execute(
            "INSERT INTO audit_auditevent (workspace_id, type, occurred_at, author, environment,"
            " actor_id, payload, prev_hash, hash, key_id) SELECT workspace_id, type, occurred_at,"
            " 'user:mallory', environment, actor_id, '{\"forged\": true}', %s, %s, key_id"
            " FROM audit_auditevent WHERE id = %s",
            [last.hash, digest, last.pk],
        )
        owner_execute(
            "UPDATE audit_auditchainhead SET last_hash = %s, length = length + 1"
            " WHERE workspace_id = %s AND lane = 0",
            [digest, last.workspace_id],
        )
        inserted = AuditEvent.objects.filter(workspace=operator.workspace).latest("id")

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, inserted.pk)

    def test_reordered_rows_are_named(self, operator, history):
        """Two rows swapped whole (content and hashes), as if their order had changed."""
        a, b = history[1], history[2]
        owner_execute("UPDATE audit_auditevent SET hash = 'moving' WHERE id = %s", [a.pk])
        for target, source in ((b, a), (a, b)):
            owner_execute(
                "UPDATE audit_auditevent SET type = %s, author = %s, payload = %s::jsonb,"
                " workload_id = %s, prev_hash = %s, hash = %s WHERE id = %s",
                [source.type, source.author, json.dumps(source.payload), source.workload_id,
                 source.prev_hash, source.hash, target.pk],
            )  # fmt: skip

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, a.pk)

    @pytest.mark.parametrize("key", [None, ChainKey("dev", b"a guess at the secret, wrong")])
    def test_a_full_rewrite_without_the_key_is_named_at_its_first_row(self, operator, history, key):
        if key is not None:
            key = ChainKey(signing_key().id, key.secret)
        _rewrite(history, key, author="user:mallory")

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, history[0].pk)

    def test_a_full_rewrite_with_the_key_is_caught_by_an_anchor(self, operator, history, anchors):
        audit_anchor_record()
        _rewrite(history, signing_key(), author="user:mallory")

        assert audit_chain_verify(
            workspace=operator.workspace, anchors=AnchorFile()
        ).ok  # key alone
        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, history[-1].pk)
        assert "anchor" in verdict.reason

    def test_a_deleted_tail_with_the_head_moved_back_is_caught_by_an_anchor(
        self, operator, history, anchors
    ):
        audit_anchor_record()
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[-1].pk])
        owner_execute(
            "UPDATE audit_auditchainhead SET last_hash = %s, length = length - 1"
            " WHERE workspace_id = %s AND lane = 0",
            [history[-2].hash, history[-1].workspace_id],
        )

        assert audit_chain_verify(
            workspace=operator.workspace, anchors=AnchorFile()
        ).ok  # head agrees
        verdict = audit_chain_verify(workspace=operator.workspace)

        assert not verdict.ok
        assert "missing" in verdict.reason


class AnchorTests:
    def test_an_anchor_names_each_chain_head(self, operator, outsider, history, anchors):
        taken = audit_anchor_record()

        lines = [json.loads(line) for line in anchors.read_text().splitlines()]
        assert [(a.workspace, a.length, a.event_id) for a in taken] == [
            ("team-a", len(history), history[-1].pk),
            ("team-b", AuditChainHead.objects.get(workspace=outsider.workspace).length,
             AuditEvent.objects.filter(workspace=outsider.workspace).latest("id").pk),
        ]  # fmt: skip
        assert lines[0]["hash"] == history[-1].hash and len(lines[0]["signature"]) == 64

    def test_the_chain_holds_against_its_anchors_as_it_grows(self, operator, history, anchors):
        audit_anchor_record()
        workload_policy_save(
            workload=history[-1].workload_id and operator.workspace.workloads.get(),
            environment="",
            document={"totalTokenBudget": 2600},
            author="user:olga",
        )
        audit_anchor_record()

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert verdict.ok and verdict.checked == len(history) + 1
        assert len(anchor_file_read().positions(operator.workspace.pk)) == 2

    def test_a_forged_anchor_line_fails_the_check(self, operator, history, anchors):
        audit_anchor_record()
        line = json.loads(anchors.read_text())
        line["length"] = 2
        anchors.write_text(json.dumps(line) + "\n")

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert not verdict.ok and "signature does not verify" in verdict.reason

    def test_the_commands_anchor_and_verify_against_a_named_file(self, operator, history, tmp_path):
        path = tmp_path / "kept-elsewhere.jsonl"
        out = StringIO()
        call_command("audit_anchor", "--output", str(path), stdout=out)
        assert f"team-a: anchored at event {history[-1].pk}" in out.getvalue()

        out = StringIO()
        call_command("verify_audit_chain", "--anchors", str(path), stdout=out)
        assert f"team-a: ok ({len(history)} events, 1 anchor)" in out.getvalue()

        _rewrite(history, signing_key(), author="user:mallory")
        out = StringIO()
        with pytest.raises(CommandError):
            call_command("verify_audit_chain", "--anchors", str(path), stdout=out)
        assert f"team-a: BROKEN at event {history[-1].pk}" in out.getvalue()

    def test_a_missing_named_anchor_file_is_a_clear_error(self, history, tmp_path):
        with pytest.raises(CommandError, match="Cannot read the anchor file"):
            call_command("verify_audit_chain", "--anchors", str(tmp_path / "nope"))


class SealingLegacyChainsTests:
    """Migration audit.0014: chains recorded before keys are sealed with the key, once."""

    def _seal(self) -> None:
        from importlib import import_module

        from django.apps import apps

        with database_owner():
            import_module("audit.migrations.0014_key_existing_chains").seal(apps, None)

    def test_a_legacy_chain_that_holds_is_sealed_and_verifies(self, operator, history):
        _rewrite(history, None)  # as the chain was before keys: plain SHA-256, key id ""
        assert not audit_chain_verify(workspace=operator.workspace).ok

        self._seal()

        verdict = audit_chain_verify(workspace=operator.workspace)
        assert verdict.ok and verdict.checked == len(history)
        assert set(AuditEvent.objects.values_list("key_id", flat=True)) == {signing_key().id}

    def test_a_legacy_chain_that_was_broken_is_left_broken(self, operator, history):
        _rewrite(history, None)
        owner_execute(
            "UPDATE audit_auditevent SET author = 'user:mallory' WHERE id = %s", [history[1].pk]
        )

        self._seal()

        verdict = audit_chain_verify(workspace=operator.workspace)
        assert (verdict.ok, verdict.first_broken_id) == (False, history[0].pk)
        assert "not keyed" in verdict.reason


def test_the_anchor_task_appends_an_anchor_of_every_chain(operator, outsider, history, anchors):
    """What beat sends every AUDIT_ANCHOR_SECONDS (run in process here, as without a broker)."""
    from audit.tasks import anchor

    assert anchor.apply().get() == 2  # team-a and the outsider's team-b
    assert anchor.apply().get() == 2
    assert len(anchors.read_text().splitlines()) == 4
    assert audit_chain_verify(workspace=operator.workspace).ok


def test_beat_schedules_the_anchor_only_when_a_file_is_set():
    import os
    import subprocess
    import sys

    from django.conf import settings

    script = "from django.conf import settings; print(sorted(settings.CELERY_BEAT_SCHEDULE))"
    env = {**os.environ, "AUDIT_ANCHOR_FILE": "/tmp/anchors.log", "AUDIT_ANCHOR_SECONDS": "60"}
    shown = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        env={**env, "DJANGO_SETTINGS_MODULE": "portal.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert "audit-anchor" in shown
    assert "audit-anchor" not in settings.CELERY_BEAT_SCHEDULE


class VerifyPageTests:
    def test_the_page_says_the_chain_is_keyed_and_that_no_anchor_file_is_set(
        self, operator, history, settings
    ):
        settings.AUDIT_ANCHOR_FILE = ""
        html = operator.session().get("/w/team-a/audit/verify/").content.decode()

        assert "chain intact" in html
        assert f"key <code>{signing_key().id}</code>" in html
        assert "No anchor file is set" in html

    def test_the_page_names_the_anchors_it_checked_against(self, operator, history, anchors):
        audit_anchor_record()
        audit_anchor_record()

        html = operator.session().get("/w/team-a/audit/verify/").content.decode()

        assert "chain intact" in html and "checked against 1 anchor " in html

    def test_a_rewrite_caught_by_an_anchor_shows_on_the_page(self, operator, history, anchors):
        audit_anchor_record()
        _rewrite(history, signing_key(), author="user:mallory")

        html = operator.session().get("/w/team-a/audit/verify/").content.decode()

        assert "chain broken" in html and "anchor taken at" in html
        assert f"event #{history[-1].pk}" in html


class UnreadableAnchorFileTests:
    def test_an_anchor_file_that_cannot_be_read_fails_the_check_and_says_why(
        self, operator, history, tmp_path, settings
    ):
        settings.AUDIT_ANCHOR_FILE = str(tmp_path)  # a folder

        verdict = audit_chain_verify(workspace=operator.workspace)
        page = operator.session().get("/w/team-a/audit/verify/")

        assert not verdict.ok and "AUDIT_ANCHOR_FILE cannot be read" in verdict.reason
        assert page.status_code == 200 and "chain broken" in page.content.decode()

    def test_a_line_that_is_not_utf8_fails_as_a_line(self, operator, history, anchors):
        audit_anchor_record()
        with open(anchors, "ab") as out:
            out.write(b"\xff\xfe not an anchor\n")

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert not verdict.ok and "anchor line 2 is not an anchor" in verdict.reason
