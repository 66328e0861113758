"""The spec's two run invariants, over random memory states on the real database:
a preview never writes a memory; an execute of a preview changes exactly the rows it listed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from maintenance import services
from maintenance.lifecycle import SWEEPS
from recall.models import MemoryRecord
from tests.maintenance.helpers import snapshot
from tests.recall import factories

pytestmark = pytest.mark.django_db

CONTENTS = [
    "Ada prefers short release notes",
    "Ada prefers short release notes.",
    "The billing export runs nightly",
    "Grace owns the on-call rotation",
]

states = st.fixed_dictionaries(
    {
        "content": st.sampled_from(CONTENTS),
        "memory_type": st.sampled_from(["insight", "fact"]),
        "lifecycle_status": st.sampled_from(["active"] * 4 + ["stale"] * 2 + ["suppressed",
                                             "inactive", "expired"]),
        "tier": st.sampled_from(["short_term", "short_term", "long_term"]),
        "is_current": st.sampled_from([True, True, True, False]),
        "confidence": st.floats(min_value=0, max_value=1),
        "hit_count": st.integers(min_value=0, max_value=30),
        "created_hours": st.floats(min_value=0, max_value=24 * 60),
        "accessed_hours": st.one_of(st.none(), st.floats(min_value=0, max_value=24 * 20)),
        "expires_hours": st.one_of(st.none(), st.floats(min_value=-48, max_value=48)),
        "stale_days": st.one_of(st.none(), st.floats(min_value=0, max_value=60)),
        "embedded": st.booleans(),
    }
)  # fmt: skip


# Two current insights saying the same thing, old enough and recalled enough to appear in
# several sweeps: every sweep meets a row it lists at least once.
DUPLICATE = {
    "content": CONTENTS[0], "memory_type": "insight", "lifecycle_status": "active",
    "tier": "short_term", "is_current": True, "confidence": 1.0, "hit_count": 20,
    "created_hours": 24 * 30.0, "accessed_hours": 24 * 10.0, "expires_hours": -1.0,
    "stale_days": None, "embedded": True,
}  # fmt: skip


class Rollback(Exception):
    pass


def _write(workspace, rows):
    now = timezone.now()
    created = factories.memories(workspace, *[{"content": r["content"]} for r in rows])
    for memory, r in zip(created, rows, strict=True):
        MemoryRecord.objects.filter(pk=memory.pk).update(
            memory_type=r["memory_type"],
            lifecycle_status=r["lifecycle_status"],
            tier=r["tier"],
            is_current=r["is_current"],
            confidence=r["confidence"],
            hit_count=r["hit_count"],
            created_at=now - timedelta(hours=r["created_hours"]),
            last_accessed_at=None
            if r["accessed_hours"] is None
            else now - timedelta(hours=min(r["accessed_hours"], r["created_hours"])),
            expires_at=None
            if r["expires_hours"] is None
            else now + timedelta(hours=r["expires_hours"]),
            stale_since=None if r["stale_days"] is None else now - timedelta(days=r["stale_days"]),
            **({} if r["embedded"] else {"embedding_model": ""}),
        )


@pytest.mark.parametrize("sweep", SWEEPS)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=st.lists(states, min_size=1, max_size=10))
@example(rows=[DUPLICATE, {**DUPLICATE, "content": CONTENTS[1], "created_hours": 1.0}])
def test_a_preview_writes_nothing_and_its_execute_changes_exactly_what_it_listed(
    workspace_a, rows, sweep
):
    try:
        with transaction.atomic():
            _write(workspace_a, rows)
            services.lifecycle_settings_patch(
                workspace=workspace_a, changes={"retentionMaxShare": 1.0}, author="system:test"
            )
            before = {row[0]: row for row in snapshot(workspace_a)}

            shown = services.maintenance_start(
                workspace=workspace_a, sweep=sweep, mode="preview", author="system:test"
            )
            assert {row[0]: row for row in snapshot(workspace_a)} == before

            listed = set(shown.items.values_list("memory_id", flat=True))
            run = services.maintenance_start(
                workspace=workspace_a, sweep=sweep, mode="execute", author="system:test",
                preview_id=shown.pk,
            )  # fmt: skip
            after = {row[0]: row for row in snapshot(workspace_a)}
            changed = {pk for pk in before if after.get(pk) != before[pk]}

            assert run.status == "succeeded", run.error
            assert (run.applied, run.skipped) == (len(listed), 0)
            assert changed == listed
            event(f"{sweep}: {'lists some' if listed else 'lists none'}")
            if sweep == "retention":
                assert set(before) - set(after) == listed
            raise Rollback
    except Rollback:
        pass
