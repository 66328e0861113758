"""Lanes of a workspace's audit chain: recalls append to lanes of their own so that they do
not race for one tip, while verification stays as exact as with one chain.

The walk over interleaved lanes is checked on generated chains (any interleaving of intact
lanes holds; any one event edited, dropped, moved to another lane or swapped within its lane
is named), then on the real trail: recalls over the API, concurrent appends, anchors per
lane, checkpoints, and an event appended while a check is walking.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from hypothesis import assume, given
from hypothesis import strategies as st

from audit.anchors import anchors_parse, anchors_take, audit_anchor_record
from audit.chain import (
    GENESIS_HASH,
    AnchorPoint,
    ChainKey,
    ChainLink,
    event_hash,
    lane_fields,
    verify_links,
)
from audit.keys import signing_key
from audit.models import AuditChainHead, AuditCheckpoint, AuditEvent
from audit.services import (
    ChainTip,
    append_lane,
    audit_chain_check,
    audit_chain_verify,
    audit_event_append,
    audit_event_record,
)
from tests.helpers import (
    once_the_walk_begins,
    owner_execute,
    recall,
    release_once_blocked,
    run_in_threads,
)
from tests.recall import factories

KEY = ChainKey("k1", b"a secret of the chain, never in the database")
KEYS = {KEY.id: KEY}


def interleaved(lanes_of: list[int]) -> list[ChainLink]:
    """A trail whose n-th event (id n + 1) is appended to lane ``lanes_of[n]``."""
    tips: dict[int, str] = {}
    links = []
    for n, lane in enumerate(lanes_of, start=1):
        fields = {"type": "context.assembled", "author": "token:bot", "payload": {"n": n}}
        prev = tips.get(lane, GENESIS_HASH)
        digest = event_hash(prev, lane_fields(fields, lane), KEY)
        links.append(ChainLink(n, prev, digest, fields, key_id=KEY.id, lane=lane))
        tips[lane] = digest
    return links


lane_sequences = st.lists(st.integers(min_value=0, max_value=3), min_size=2, max_size=30)


@pytest.fixture(autouse=True)
def eight_lanes(settings: Any) -> None:
    """The default, whatever the environment says: the tests name lanes 1 to 8."""
    settings.AUDIT_RECALL_LANES = 8


class InterleavedLanesTests:
    @given(lane_sequences)
    def test_any_interleaving_of_intact_lanes_holds(self, lanes_of):
        links = interleaved(lanes_of)

        verdict = verify_links(links, keys=KEYS)

        assert verdict.ok, verdict
        assert verdict.checked == len(links)
        assert {lane: tip.count for lane, tip in verdict.tips.items()} == {
            lane: lanes_of.count(lane) for lane in set(lanes_of)
        }
        assert verdict.last_id == links[-1].id
        # each lane's tip: its last event
        assert {lane: (tip.id, tip.hash) for lane, tip in verdict.tips.items()} == {
            link.lane: (link.id, link.hash) for link in links
        }

    @given(lane_sequences, st.data())
    def test_an_edited_event_is_named(self, lanes_of, data):
        links = interleaved(lanes_of)
        n = data.draw(st.integers(0, len(links) - 1))
        links[n] = dataclasses.replace(links[n], fields={**links[n].fields, "author": "x"})

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.first_broken_id) == (False, links[n].id)

    @given(lane_sequences, st.data())
    def test_an_event_moved_to_another_lane_is_named(self, lanes_of, data):
        """Its hash covers its lane, so it breaks even where the new lane's links would fit."""
        links = interleaved(lanes_of)
        n = data.draw(st.integers(0, len(links) - 1))
        other = data.draw(st.integers(0, 3).filter(lambda lane: lane != links[n].lane))
        links[n] = dataclasses.replace(links[n], lane=other)

        verdict = verify_links(links, keys=KEYS)

        assert not verdict.ok
        assert verdict.first_broken_id == links[n].id

    @given(lane_sequences, st.data())
    def test_a_dropped_event_is_named_by_the_next_of_its_lane(self, lanes_of, data):
        links = interleaved(lanes_of)
        n = data.draw(st.integers(0, len(links) - 1))
        later = [link for link in links[n + 1 :] if link.lane == links[n].lane]
        del links[n]

        verdict = verify_links(links, keys=KEYS)

        if later:
            assert (verdict.ok, verdict.first_broken_id) == (False, later[0].id)
        else:  # a lane's tail: its head tells (tested on the real trail below)
            assert verdict.ok

    @given(lane_sequences, st.data())
    def test_two_events_of_a_lane_swapped_are_named(self, lanes_of, data):
        links = interleaved(lanes_of)
        lane = data.draw(st.sampled_from(sorted(set(lanes_of))))
        positions = [i for i, link in enumerate(links) if link.lane == lane]
        assume(len(positions) >= 2)
        a, b = positions[0], positions[-1]
        links[a], links[b] = (
            dataclasses.replace(links[b], id=links[a].id),
            dataclasses.replace(links[a], id=links[b].id),
        )

        verdict = verify_links(links, keys=KEYS)

        assert (verdict.ok, verdict.first_broken_id) == (False, links[a].id)

    @given(lane_sequences, st.data())
    def test_a_walk_resumed_from_each_lanes_tip_agrees_with_a_whole_walk(self, lanes_of, data):
        links = interleaved(lanes_of)
        cut = data.draw(st.integers(0, len(links)))
        first = verify_links(links[:cut], keys=KEYS)

        resumed = verify_links(links[cut:], keys=KEYS, after=first.tips)

        whole = verify_links(links, keys=KEYS)
        assert resumed.ok and whole.ok
        assert (resumed.checked, dict(resumed.tips)) == (whole.checked, dict(whole.tips))

    def test_an_anchor_pins_the_position_of_its_own_lane(self):
        links = interleaved([0, 1, 1, 0, 1])
        second_of_lane_1 = links[2]
        anchored = {
            (1, 2): AnchorPoint(
                second_of_lane_1.id, second_of_lane_1.hash, "2026-12-04T00:00:00+00:00"
            )
        }
        assert verify_links(links, keys=KEYS, anchored=anchored).ok

        # The same position in lane 0 is another event: the anchor of lane 1 does not apply.
        wrong_lane = {(0, 2): anchored[(1, 2)]}
        verdict = verify_links(links, keys=KEYS, anchored=wrong_lane)
        assert (verdict.ok, verdict.first_broken_id) == (False, links[3].id)


def _recall_lane(trail: list[AuditEvent]) -> int:
    return next(event.lane for event in trail if event.type == "context.assembled")


@pytest.fixture
def trail(editor: Any, workload_a: Any) -> list[AuditEvent]:
    """Changes on the main chain and recalls on lanes, interleaved."""
    factories.memory(editor.workspace, content="ada prefers short answers")
    for n in range(3):
        recall(editor, workload_a, query=f"query {n}", topK=5)
        with transaction.atomic():
            audit_event_record(
                workspace=editor.workspace, type="memory.changed", author="user:x",
                payload={"n": n},
            )  # fmt: skip
    return list(AuditEvent.objects.filter(workspace=editor.workspace).order_by("id"))


@pytest.mark.django_db
class RecallLanesTests:
    def test_recalls_append_to_a_lane_and_changes_to_the_main_chain(self, editor, trail):
        recalls = [event for event in trail if event.type == "context.assembled"]
        changes = [event for event in trail if event.type != "context.assembled"]

        assert {event.lane for event in changes} == {0}
        assert all(1 <= event.lane <= 8 for event in recalls)
        # One thread, no race lost: every recall went to the same lane, chained one after another.
        assert len({event.lane for event in recalls}) == 1
        assert [event.prev_hash for event in recalls[1:]] == [event.hash for event in recalls[:-1]]
        heads = dict(
            AuditChainHead.objects.filter(workspace=editor.workspace).values_list("lane", "length")
        )
        assert heads[recalls[0].lane] == len(recalls)
        assert heads[0] == len(changes)
        assert audit_chain_verify(workspace=editor.workspace).ok

    def test_the_api_names_each_events_lane(self, editor, trail):
        response = editor.api().get("/v1/audit/events/")

        lanes = {event["id"]: event["lane"] for event in response.json()["results"]}
        assert lanes == {event.pk: event.lane for event in trail}

    def test_without_lanes_recalls_join_the_main_chain(self, editor, workload_a, settings):
        settings.AUDIT_RECALL_LANES = 0
        factories.memory(editor.workspace, content="ada prefers short answers")

        recall(editor, workload_a, query="lanes", topK=5)

        assert AuditEvent.objects.get(type="context.assembled").lane == 0
        assert audit_chain_verify(workspace=editor.workspace).ok

    def test_a_lost_race_draws_another_lane_for_the_next_recall(self, editor, trail):
        lane = append_lane()
        tip = AuditChainHead.objects.get(workspace=editor.workspace, lane=lane)
        stale = ChainTip("f" * 64, lane)

        event = audit_event_append(
            workspace=editor.workspace, tip=stale, type="context.assembled",
            author="token:agent", payload={"n": "raced"},
        )  # fmt: skip

        assert (event.lane, event.prev_hash) == (lane, tip.last_hash)  # retried on its lane
        assert append_lane() != lane
        assert audit_chain_verify(workspace=editor.workspace).ok

    def test_a_lane_without_a_head_yet_is_created_on_first_append(self, editor, trail):
        quiet = next(n for n in range(1, 9) if n != _recall_lane(trail))
        assert not AuditChainHead.objects.filter(workspace=editor.workspace, lane=quiet).exists()
        event = audit_event_append(
            workspace=editor.workspace, tip=ChainTip.of(None, quiet), type="context.assembled",
            author="token:agent", payload={},
        )  # fmt: skip

        head = AuditChainHead.objects.get(workspace=editor.workspace, lane=quiet)
        assert (event.lane, event.prev_hash, head.length) == (quiet, GENESIS_HASH, 1)
        assert audit_chain_verify(workspace=editor.workspace).ok


@pytest.mark.django_db
class LaneTamperingTests:
    def test_an_event_moved_to_another_lane_is_named(self, editor, trail):
        recall = next(event for event in trail if event.type == "context.assembled")
        owner_execute("UPDATE audit_auditevent SET lane = 0 WHERE id = %s", [recall.pk])

        verdict = audit_chain_verify(workspace=editor.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, recall.pk)

    def test_a_lanes_deleted_tail_is_noticed_by_its_head(self, editor, trail):
        last = [event for event in trail if event.type == "context.assembled"][-1]
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [last.pk])

        verdict = audit_chain_verify(workspace=editor.workspace)

        assert not verdict.ok
        assert verdict.reason == f"events are missing from the end (lane {last.lane})"

    def test_a_lanes_tail_deleted_with_its_head_moved_back_is_caught_by_its_anchor(
        self, editor, trail, tmp_path: Path, settings: Any
    ):
        settings.AUDIT_ANCHOR_FILE = str(tmp_path / "anchors.jsonl")
        anchors = audit_anchor_record()
        recalls = [event for event in trail if event.type == "context.assembled"]
        main = sum(1 for event in trail if event.lane == 0)
        assert {(a.lane, a.length) for a in anchors} == {(0, main), (recalls[0].lane, 3)}
        owner_execute("DELETE FROM audit_auditevent WHERE id = %s", [recalls[-1].pk])
        owner_execute(
            "UPDATE audit_auditchainhead SET length = 2, last_hash = %s"
            " WHERE workspace_id = %s AND lane = %s",
            [recalls[-2].hash, editor.workspace.pk, recalls[-1].lane],
        )

        verdict = audit_chain_verify(workspace=editor.workspace)

        assert not verdict.ok
        assert verdict.reason.startswith(
            f"events are missing from the end (lane {recalls[-1].lane}): the anchor taken at"
        )

    def test_lane_events_without_a_head_are_named(self, editor, trail):
        recall = next(event for event in trail if event.type == "context.assembled")
        owner_execute(
            "DELETE FROM audit_auditchainhead WHERE workspace_id = %s AND lane = %s",
            [editor.workspace.pk, recall.lane],
        )

        verdict = audit_chain_verify(workspace=editor.workspace)

        assert not verdict.ok
        # the check settles the trail, which gives a configured lane its head again, empty
        assert verdict.reason == (
            f"the chain (lane {recall.lane}) goes on past its head: an event was added without"
            " moving it"
        )


@pytest.mark.django_db
class LaneAnchorTests:
    def test_an_anchor_line_names_its_lane_under_its_signature(self, editor, trail):
        from audit.anchors import anchor_line

        lines = [anchor_line(anchor, signing_key()) for anchor in anchors_take()]
        parsed = anchors_parse(lines)
        lanes = {lane for lane, _ in parsed.positions(editor.workspace.pk)}
        assert lanes == {0, _recall_lane(trail)}

        # The lane of a signed line cannot be changed: its signature no longer verifies.
        forged = next(line for line in lines if '"lane"' in line).replace(
            '"lane": ', '"lane": 1', 1
        )
        assert anchors_parse([forged]).problems_for(editor.workspace.pk)

    def test_a_line_without_a_lane_is_the_main_chains(self, editor, trail):
        from audit.anchors import Anchor, anchor_line

        old = Anchor(editor.workspace.pk, "x", 1, trail[0].pk, trail[0].hash, "t", KEY.id)
        assert '"lane"' not in anchor_line(old, KEY)
        assert set(anchors_parse([anchor_line(old, KEY)], keys=KEYS).positions(
            editor.workspace.pk
        )) == {(0, 1)}  # fmt: skip


@pytest.mark.django_db
class LaneCheckpointTests:
    def test_a_routine_check_walks_only_what_each_lane_appended_since(
        self, editor, workload_a, trail
    ):
        assert audit_chain_check(workspace=editor.workspace, full=True).verdict.ok
        recall(editor, workload_a, query="after the checkpoint", topK=5)

        check = audit_chain_check(workspace=editor.workspace, full=False)

        assert check.verdict.ok, check.verdict
        assert (check.full, check.walked) == (False, 1)
        checkpoint = AuditCheckpoint.objects.get(workspace=editor.workspace)
        assert set(checkpoint.lanes) == {"0", str(_recall_lane(trail))}

    def test_a_checkpoint_written_before_lanes_resumes_the_main_chain(self, operator):
        for n in range(3):
            with transaction.atomic():
                audit_event_record(
                    workspace=operator.workspace, type="memory.changed", author="user:x",
                    payload={"n": n},
                )  # fmt: skip
        events = list(AuditEvent.objects.filter(workspace=operator.workspace).order_by("id"))
        AuditCheckpoint.objects.create(
            workspace=operator.workspace, event_id=events[-2].pk, event_hash=events[-2].hash,
            length=len(events) - 1, lanes={},
        )  # fmt: skip

        check = audit_chain_check(workspace=operator.workspace, full=False)

        assert check.verdict.ok, check.verdict
        assert (check.full, check.walked) == (False, 1)

    def test_events_appended_while_a_check_walks_are_left_for_the_next_one(
        self, editor, workload_a, trail
    ):
        """Appended after the check settled the trail (so with greater ids than any it
        covers): left out, and walked by the next check."""
        quiet_lane = 8 if _recall_lane(trail) != 8 else 7

        def append_late_events() -> None:
            audit_event_append(
                workspace=editor.workspace, tip=ChainTip.of(None, quiet_lane),
                type="context.assembled", author="token:late", payload={},
            )  # fmt: skip
            with transaction.atomic():
                audit_event_record(
                    workspace=editor.workspace, type="memory.changed", author="user:x",
                    payload={"after": "the late one"},
                )  # fmt: skip

        with once_the_walk_begins(append_late_events) as started:
            first = audit_chain_check(workspace=editor.workspace, full=True)

        assert started
        assert first.verdict.ok, first.verdict
        assert first.walked == len(trail)  # neither late event

        second = audit_chain_check(workspace=editor.workspace, full=False)

        assert second.verdict.ok, second.verdict
        assert second.walked == 2

    def test_an_event_past_its_lanes_head_is_named(self, editor, trail):
        """An event that links and hashes as an append would, but whose lane's head was not
        moved (written by someone with the owner's access): not taken for an append in
        flight, since a check settles the trail before it walks."""
        last = [event for event in trail if event.type == "context.assembled"][-1]
        owner_execute(
            "UPDATE audit_auditchainhead SET length = length - 1, last_hash = %s"
            " WHERE workspace_id = %s AND lane = %s",
            [last.prev_hash, editor.workspace.pk, last.lane],
        )

        verdict = audit_chain_verify(workspace=editor.workspace)

        assert (verdict.ok, verdict.first_broken_id) == (False, last.pk)
        assert verdict.reason == (
            f"the chain (lane {last.lane}) goes on past its head: an event was added without"
            " moving it"
        )


@pytest.mark.django_db(transaction=True)
class InFlightCheckTests:
    def test_a_check_waits_for_an_event_in_flight_on_the_main_chain(self, operator):
        """A change's event is appended inside its transaction; recalls on other lanes commit
        meanwhile with greater ids. The check waits for the change, so that neither it nor
        the routine check after it leaves the change's event behind."""
        workspace = operator.workspace
        recorded, release = threading.Event(), threading.Event()
        failures: list[BaseException] = []

        def slow_change() -> None:
            try:
                with transaction.atomic():
                    audit_event_record(
                        workspace=workspace, type="memory.changed", author="user:slow",
                        payload={"slow": True},
                    )  # fmt: skip
                    recorded.set()
                    release.wait(30)
            except BaseException as exc:  # noqa: BLE001 - surfaced below
                failures.append(exc)
            finally:
                connection.close()

        change = threading.Thread(target=slow_change)
        change.start()
        assert recorded.wait(10), failures
        # later ids than the change's, committed before it
        audit_event_append(
            workspace=workspace, tip=ChainTip.of(None, 3), type="context.assembled",
            author="token:fast", payload={"n": 1},
        )  # fmt: skip
        last = AuditChainHead.objects.get(workspace=workspace, lane=3).last_hash
        releaser = release_once_blocked(release, failures)

        first = audit_chain_check(workspace=workspace, full=True)
        change.join(30)
        releaser.join(30)
        assert not change.is_alive() and not releaser.is_alive()
        assert failures == []  # the check did wait for the change's lock
        audit_event_append(
            workspace=workspace, tip=ChainTip(last, 3), type="context.assembled",
            author="token:fast", payload={"n": "after"},
        )  # fmt: skip
        second = audit_chain_check(workspace=workspace, full=False)

        assert first.verdict.ok, first.verdict
        slow = AuditEvent.objects.get(author="user:slow")
        assert first.verdict.tips[0].id == slow.pk  # walked: the check waited for it
        assert second.verdict.ok, second.verdict
        assert second.walked == 1


@pytest.mark.django_db(transaction=True)
class ConcurrentLanesTests:
    @pytest.mark.parametrize("lanes", [0, 3], ids=["main-chain-only", "three-lanes"])
    def test_threads_appending_keep_every_lane_whole(self, workspace_a, settings, lanes):
        settings.AUDIT_RECALL_LANES = lanes
        before = AuditEvent.objects.filter(workspace=workspace_a).count()

        def worker(n: int) -> None:
            for i in range(10):
                lane = append_lane()
                head = AuditChainHead.objects.filter(workspace=workspace_a, lane=lane).first()
                audit_event_append(
                    workspace=workspace_a,
                    tip=ChainTip.of(head.last_hash if head else None, lane),
                    type="context.assembled", author=f"token:t{n}", payload={"i": i},
                )  # fmt: skip

        assert run_in_threads(worker, 4) == [None] * 4
        events = AuditEvent.objects.filter(workspace=workspace_a)
        assert events.count() == before + 40
        used = set(events.filter(type="context.assembled").values_list("lane", flat=True))
        assert used <= ({0} if lanes == 0 else set(range(1, lanes + 1)))
        verdict = audit_chain_verify(workspace=workspace_a)
        assert verdict.ok, verdict
        assert verdict.checked == before + 40
