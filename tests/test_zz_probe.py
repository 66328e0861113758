from __future__ import annotations

import pytest

from audit.models import AuditEvent


@pytest.mark.django_db
def test_relaxable_diff(operator):
    c = operator.api()
    floor = c.get("/v1/workspaces/team-a/policy").json()
    r = c.put("/v1/workspaces/team-a/policy", {**floor["policy"], "relaxableAxes": ["confidenceMin", "sensitivityCeiling"]}, format="json")
    assert r.status_code == 200
    ev = AuditEvent.objects.filter(type="context.workspace_policy_set").order_by("-id").first()
    print("\nDIFF", ev.payload["diff"], "before.relax", ev.payload["before"]["relaxableAxes"], "after.relax", ev.payload["after"]["relaxableAxes"])


@pytest.mark.django_db
def test_patch_noop_writes_event(editor):
    from tests.recall.factories import memories
    m = memories(editor.workspace, {"content": "hello"})[0]
    n = AuditEvent.objects.count()
    r = editor.api().patch(f"/v1/memory/memories/{m.pk}", {}, format="json")
    print("\nnoop patch", r.status_code, "events added", AuditEvent.objects.count() - n)


@pytest.mark.django_db
def test_lost_hit_update(editor, workload_a):
    from recall.models import MemoryRecord
    from recall.api.views import _memory
    from recall import services
    from portal.access import Caller
    from tests.recall.factories import memories
    m = memories(editor.workspace, {"content": "release summary"})[0]
    caller = Caller(user=None, token=editor.workspace.api_tokens.first())
    loaded = _memory(caller, m.pk)
    r = editor.api().post(f"/v1/memory/actors/user:ada/recall", {"workloadId": str(workload_a.id), "environment": "prod", "query": "release"}, format="json")
    assert r.status_code == 200
    print("\nhits after recall", MemoryRecord.objects.get(pk=m.pk).hit_count)
    services.memory_update(memory=loaded, changes={"confidence": 0.8}, author="x")
    print("hits after concurrent patch", MemoryRecord.objects.get(pk=m.pk).hit_count)
