"""The audit hash chain: the pure link checker, then the database, endpoint and command."""

from __future__ import annotations

import dataclasses
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import given
from hypothesis import strategies as st

from audit.chain import (
    GENESIS_HASH,
    AnchorPoint,
    ChainKey,
    ChainLink,
    event_hash,
    verify_links,
)
from audit.models import AuditChainHead, AuditCheckpoint, AuditEvent
from audit.services import audit_chain_check, audit_chain_verify
from policies.services import workload_create, workload_policy_save
from tests.helpers import once_the_walk_begins, owner_execute
from tests.module_personas import module_scoped

# The personas the tests here act as, made once per module.
workspace_a, operator, made_first = module_scoped("workspace_a", "operator")

KEY = ChainKey("k1", b"a secret of the chain, never in the database")
KEYS = {KEY.id: KEY}


def chain(length: int) -> list[ChainLink]:
    links = []
    prev = GENESIS_HASH
    for n in range(1, length + 1):
        fields = {"type": "context.assembled", "author": "token:bot", "payload": {"n": n}}
        digest = event_hash(prev, fields, KEY)
        links.append(ChainLink(id=n, prev_hash=prev, hash=digest, fields=fields, key_id=KEY.id))
        prev = digest
    return links


class EventHashTests:
    def test_it_is_a_sha256_hex_digest(self):
        digest = event_hash(GENESIS_HASH, {"type": "x"})

        assert len(digest) == 64
        assert int(digest, 16) >= 0

    def test_it_ignores_key_order(self):
        assert event_hash(GENESIS_HASH, {"a": 1, "b": {"c": 2, "d": 3}}) == event_hash(
            GENESIS_HASH, {"b": {"d": 3, "c": 2}, "a": 1}
        )

    def test_it_reads_an_integral_float_as_the_integer_jsonb_returns(self):
        assert event_hash(GENESIS_HASH, {"payload": {"tokens": 1e3}}) == event_hash(
            GENESIS_HASH, {"payload": {"tokens": 1000}}
        )
        assert event_hash(GENESIS_HASH, {"payload": {"c": 0.5}}) != event_hash(
            GENESIS_HASH, {"payload": {"c": 1}}
        )

    def test_it_keeps_booleans_apart_from_numbers(self):
        assert event_hash(GENESIS_HASH, {"reused": True}) != event_hash(GENESIS_HASH, {"reused": 1})

    def test_it_depends_on_the_previous_hash(self):
        assert event_hash(GENESIS_HASH, {"type": "x"}) != event_hash("1" * 64, {"type": "x"})


class VerifyLinksTests:
    def test_an_intact_chain_is_ok(self):
        verdict = verify_links(chain(5), keys=KEYS)

        assert (verdict.ok, verdict.checked, verdict.first_broken_id) == (True, 5, None)

    def test_an_empty_chain_is_ok(self):
        verdict = verify_links([])

        assert (verdict.ok, verdict.checked, verdict.first_broken_id) == (True, 0, None)

    def test_it_detects_an_edited_field(self):
        links = chain(5)
        links[2] = dataclasses.replace(
            links[2], fields={**links[2].fields, "author": "token:someone-else"}
        )

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.checked, verdict.first_broken_id) == (False, 3, 3)
        assert "content" in verdict.reason

    def test_an_edit_whose_hash_was_recomputed_without_the_key_is_caught_at_that_row(self):
        links = chain(5)
        forged_fields = {**links[1].fields, "payload": {"n": 99}}
        for guess in (None, ChainKey(KEY.id, b"a guess at the secret")):
            forged = dataclasses.replace(
                links[1],
                fields=forged_fields,
                hash=event_hash(links[1].prev_hash, forged_fields, guess),
            )

            verdict = verify_links([links[0], forged, *links[2:]], keys=KEYS)

            assert (verdict.ok, verdict.first_broken_id) == (False, 2)
            assert "content" in verdict.reason

    def test_an_edit_recomputed_with_the_key_itself_breaks_the_next_link(self):
        links = chain(5)
        forged_fields = {**links[1].fields, "payload": {"n": 99}}
        links[1] = dataclasses.replace(
            links[1], fields=forged_fields, hash=event_hash(links[1].prev_hash, forged_fields, KEY)
        )

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.first_broken_id) == (False, 3)
        assert "prevHash" in verdict.reason

    def test_an_unkeyed_event_is_never_accepted(self):
        links = chain(3)
        fields = links[2].fields
        links[2] = dataclasses.replace(
            links[2], key_id="", hash=event_hash(links[2].prev_hash, fields)
        )

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.first_broken_id) == (False, 3)
        assert "not keyed" in verdict.reason

    def test_an_event_keyed_with_a_key_not_held_is_reported(self):
        verdict = verify_links(chain(2), keys={})

        assert (verdict.ok, verdict.first_broken_id) == (False, 1)
        assert "'k1'" in verdict.reason

    def test_a_rewrite_with_the_key_is_caught_at_the_first_anchored_position(self):
        links = chain(6)
        anchored = {(0, 4): AnchorPoint(links[3].id, links[3].hash, "2026-12-01T00:00:00+00:00")}
        rewritten, prev = [], GENESIS_HASH
        for link in links:
            fields = {**link.fields, "author": "user:mallory"}
            digest = event_hash(prev, fields, KEY)
            rewritten.append(dataclasses.replace(link, fields=fields, prev_hash=prev, hash=digest))
            prev = digest

        assert verify_links(rewritten, keys=KEYS).ok  # the key alone lets it pass
        verdict = verify_links(rewritten, keys=KEYS, anchored=anchored)
        assert (verdict.ok, verdict.first_broken_id) == (False, 4)
        assert "anchor taken at 2026-12-01" in verdict.reason

    def test_it_detects_reordered_rows(self):
        links = chain(5)
        links[1], links[2] = links[2], links[1]

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.first_broken_id) == (False, 3)

    def test_it_detects_a_deleted_row(self):
        links = chain(5)
        del links[1]

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.checked, verdict.first_broken_id) == (False, 2, 3)

    def test_it_detects_a_wrong_prev_hash(self):
        links = chain(3)
        links[0] = dataclasses.replace(links[0], prev_hash="f" * 64)

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.checked, verdict.first_broken_id) == (False, 1, 1)
        assert "prevHash" in verdict.reason

    def test_it_reports_the_first_of_several_breaks(self):
        links = chain(6)
        for index in (1, 4):
            links[index] = dataclasses.replace(links[index], fields={"type": "forged"})

        assert verify_links(links, keys=KEYS).first_broken_id == 2

    @given(
        length=st.integers(min_value=1, max_value=12),
        data=st.data(),
        value=st.one_of(st.integers(), st.text(max_size=8), st.booleans()),
    )
    def test_any_change_to_any_row_is_caught_at_that_row(self, length, data, value):
        links = chain(length)
        index = data.draw(st.integers(min_value=0, max_value=length - 1))
        edited = {**links[index].fields, "payload": {"n": index + 1, "extra": value}}
        links[index] = dataclasses.replace(links[index], fields=edited)

        verdict = verify_links(links, keys=KEYS)

        assert not verdict.ok
        assert verdict.first_broken_id == index + 1


@pytest.fixture
def history(operator: Any, workload_a: Any) -> list[AuditEvent]:
    """A workspace with several audited changes (floor, the operator's token, workload, three
    policy saves)."""
    for budget in (3000, 2900, 2800):
        workload_policy_save(
            workload=workload_a,
            environment="prod",
            document={"totalTokenBudget": budget, "confidenceMin": 0.25},
            author="user:olga",
            comment=f"budget {budget}",
        )
    return list(AuditEvent.objects.filter(workspace=operator.workspace).order_by("id"))


class AuditChainVerificationTests:
    def test_a_fresh_history_verifies(self, operator, history):
        response = operator.api().get("/v1/audit/verify")

        assert response.status_code == 200
        assert response.json() == {
            "ok": True,
            "checked": len(history),
            "firstBrokenId": None,
            "reason": "",
        }
        assert len(history) == 6

    def test_a_session_caller_verifies_a_named_workspace(self, viewer, history):
        response = viewer.session().get("/v1/audit/verify?workspace=team-a")

        assert response.json()["ok"] is True

    def test_a_row_edited_in_the_database_is_reported(self, operator, history):
        tampered = history[2]
        owner_execute(
            "UPDATE audit_auditevent SET payload = jsonb_set(payload, '{comment}', '\"forged\"') "
            "WHERE id = %s",
            [tampered.pk],
        )

        body = operator.api().get("/v1/audit/verify").json()

        assert body["ok"] is False
        assert body["firstBrokenId"] == tampered.pk
        assert body["checked"] == 3

    def test_an_edited_author_is_reported(self, operator, history):
        owner_execute(
            "UPDATE audit_auditevent SET author = 'user:mallory' WHERE id = %s", [history[1].pk]
        )

        assert operator.api().get("/v1/audit/verify").json()["firstBrokenId"] == history[1].pk

    def test_a_deleted_middle_row_breaks_the_next_link(self, operator, history):
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[2].pk])

        body = operator.api().get("/v1/audit/verify").json()

        assert body["ok"] is False
        assert body["firstBrokenId"] == history[3].pk

    def test_a_deleted_last_row_is_reported(self, operator, history):
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[-1].pk])

        body = operator.api().get("/v1/audit/verify").json()

        assert body["ok"] is False
        assert body["checked"] == len(history) - 1
        assert "missing" in body["reason"]

    def test_a_verified_chain_can_keep_growing(self, operator, history, workload_a):
        workload_create(workspace=operator.workspace, name="second", author="user:olga")

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert (verdict.ok, verdict.checked) == (True, len(history) + 1)

    def test_each_workspace_has_its_own_chain(self, operator, outsider, history, workload_b):
        workload_policy_save(workload=workload_b, environment="", document={}, author="b")
        owner_execute("UPDATE audit_auditevent SET author = 'x' WHERE id = %s", [history[0].pk])

        assert outsider.api().get("/v1/audit/verify").json()["ok"] is True
        assert operator.api().get("/v1/audit/verify").json()["ok"] is False

    def test_events_appended_during_a_walk_are_not_reported_missing(self, operator, history):
        """The chain checked is the one the heads described when the check began."""

        def append() -> None:
            workload_create(workspace=operator.workspace, name="later", author="user:olga")

        with once_the_walk_begins(append) as appended:
            verdict = audit_chain_verify(workspace=operator.workspace)

        assert appended

        assert (verdict.ok, verdict.checked, verdict.last_id) == (True, 6, history[-1].pk)

    def test_a_head_that_names_another_tip_is_reported(self, operator, history):
        AuditChainHead.objects.filter(workspace=operator.workspace, lane=0).update(
            last_hash="f" * 64
        )

        verdict = audit_chain_verify(workspace=operator.workspace)

        assert not verdict.ok
        assert verdict.first_broken_id == history[-1].pk
        assert "tip" in verdict.reason


class ChainCheckpointTests:
    def test_a_full_walk_that_holds_leaves_a_checkpoint(self, operator, history):
        check = audit_chain_check(workspace=operator.workspace, full=True)

        point = AuditCheckpoint.objects.get(workspace=operator.workspace)
        assert check.full and check.walked == 6
        assert (point.event_id, point.event_hash, point.length) == (
            history[-1].pk, history[-1].hash, 6
        )  # fmt: skip
        assert point.full_at is not None and check.full_at == point.full_at

    def test_a_routine_check_walks_only_the_events_appended_since(self, operator, history):
        first = audit_chain_check(workspace=operator.workspace, full=False)
        workload_create(workspace=operator.workspace, name="second", author="user:olga")
        workload_create(workspace=operator.workspace, name="third", author="user:olga")

        check = audit_chain_check(workspace=operator.workspace, full=False)

        assert first.full  # no checkpoint yet: everything was walked
        assert not check.full and check.walked == 2
        assert (check.verdict.ok, check.verdict.checked) == (True, 8)
        assert check.full_at == first.full_at
        assert AuditCheckpoint.objects.get(workspace=operator.workspace).length == 8

    def test_a_routine_check_finds_a_forged_event_after_the_checkpoint(self, operator, history):
        audit_chain_check(workspace=operator.workspace, full=False)
        workload_create(workspace=operator.workspace, name="second", author="user:olga")
        forged = AuditEvent.objects.filter(workspace=operator.workspace).latest("id")
        owner_execute(
            "UPDATE audit_auditevent SET author = 'user:mallory' WHERE id = %s", [forged.pk]
        )

        check = audit_chain_check(workspace=operator.workspace, full=False)

        assert not check.verdict.ok and check.verdict.first_broken_id == forged.pk
        # a broken walk never moves the checkpoint
        assert AuditCheckpoint.objects.get(workspace=operator.workspace).length == 6

    def test_an_edit_behind_the_checkpoint_needs_the_full_walk(self, operator, history):
        """The documented limit of the routine check, and why the page offers the full one."""
        audit_chain_check(workspace=operator.workspace, full=True)
        owner_execute(
            "UPDATE audit_auditevent SET author = 'user:mallory' WHERE id = %s", [history[1].pk]
        )

        routine = audit_chain_check(workspace=operator.workspace, full=False)
        full = audit_chain_check(workspace=operator.workspace, full=True)

        assert routine.verdict.ok
        assert not full.verdict.ok and full.verdict.first_broken_id == history[1].pk

    def test_a_chain_shorter_than_its_checkpoint_is_walked_in_full(self, operator, history):
        audit_chain_check(workspace=operator.workspace, full=True)
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[-1].pk])
        AuditChainHead.objects.filter(workspace=operator.workspace, lane=0).update(
            length=5, last_hash=history[-2].hash
        )

        check = audit_chain_check(workspace=operator.workspace, full=False)

        assert check.full and check.verdict.ok and check.verdict.checked == 5


class VerifyAuditChainCommandTests:
    def test_it_reports_every_workspace_ok(self, history, workspace_b):
        out = StringIO()

        call_command("verify_audit_chain", stdout=out)

        assert out.getvalue().splitlines() == [
            f"team-a: ok ({len(history)} events)",
            "team-b: ok (1 events)",
        ]

    def test_it_fails_and_names_the_first_broken_event(self, history, workspace_b):
        tampered = history[1]
        owner_execute(
            "UPDATE audit_auditevent SET payload = payload || '{\"version\": 99}' WHERE id = %s",
            [tampered.pk],
        )
        out = StringIO()

        with pytest.raises(CommandError, match="team-a") as caught:
            call_command("verify_audit_chain", stdout=out)

        assert caught.value.returncode == 1
        assert f"team-a: BROKEN at event {tampered.pk}" in out.getvalue()
        assert "team-b: ok" in out.getvalue()

    def test_it_fails_on_a_deleted_last_row(self, history):
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [history[-1].pk])

        with pytest.raises(CommandError):
            call_command("verify_audit_chain", "--workspace", "team-a", stdout=StringIO())

    def test_it_checks_one_named_workspace(self, history, workspace_b):
        out = StringIO()

        call_command("verify_audit_chain", "--workspace", "team-b", stdout=out)

        assert out.getvalue().strip() == "team-b: ok (1 events)"

    def test_an_unknown_workspace_is_an_error(self, db):
        with pytest.raises(CommandError, match="no-such"):
            call_command("verify_audit_chain", "--workspace", "no-such", stdout=StringIO())
