"""Move the query texts of recorded contexts out of their hashed payloads, beside the events.

Until now a workspace that stores queries kept each query in its ``context.assembled``
event's payload, which the event's hash covers, so an erasure could not remove it. From
``audit.0017`` on, the text lives in ``StoredQuery`` (deletable) and the payload keeps only the
query's salted hash. Here each lane of each chain is walked as a verification would walk it;
in a lane that holds, every event with a query text loses it from its payload and gains a
seal (``audit.chain.event_seal``): its hash stays as recorded, so later events, checkpoints
and anchors still hold, and verification checks the seal instead. The text moves to
``StoredQuery``, unless its actor was erased since (then it is dropped). A lane that does not
hold is left as it is, so verification goes on reporting where it broke. Runs as the
database owner (manage.py migrate).
"""

from django.db import migrations

BATCH = 2000
ASSEMBLED = "context.assembled"
COLUMNS = ("type", "occurred_at", "author", "workload_id", "environment", "actor_id", "payload")


def _fields(slug, row):
    return {
        "type": row["type"],
        "occurredAt": row["occurred_at"].isoformat(),
        "workspace": slug,
        "author": row["author"],
        "workloadId": str(row["workload_id"]) if row["workload_id"] else None,
        "environment": row["environment"],
        "actorId": row["actor_id"],
        "payload": row["payload"],
    }


def _lane_holds(events, slug, head, keys):
    """The ids of the lane's events that carry a query text, if the whole lane holds."""
    from audit.chain import GENESIS_HASH, event_hash, event_seal, lane_fields

    tip, count, carrying = GENESIS_HASH, 0, []
    rows = events.values_list("id", "prev_hash", "hash", "key_id", "seal", *COLUMNS)
    for pk, prev, digest, key_id, seal, *values in rows.iterator(chunk_size=BATCH):
        row = dict(zip(COLUMNS, values))
        key = keys.get(key_id)
        if prev != tip or key is None:
            return None
        fields = lane_fields(_fields(slug, row), head.lane)
        expected = event_seal(prev, fields, digest, key) if seal else event_hash(prev, fields, key)
        if expected != (seal or digest):
            return None
        payload = row["payload"]
        if row["type"] == ASSEMBLED and isinstance(payload, dict) and "query" in payload:
            carrying.append(pk)
        tip, count = digest, count + 1
    if tip != head.last_hash or count != head.length:
        return None
    return carrying


def move_queries_out(apps, schema_editor):
    from audit.chain import event_seal, lane_fields
    from audit.keys import chain_keys

    AuditEvent = apps.get_model("audit", "AuditEvent")
    AuditChainHead = apps.get_model("audit", "AuditChainHead")
    StoredQuery = apps.get_model("audit", "StoredQuery")
    Actor = apps.get_model("recall", "Actor")
    if not AuditEvent.objects.filter(type=ASSEMBLED, payload__has_key="query").exists():
        return
    keys = chain_keys()
    for head in AuditChainHead.objects.select_related("workspace").order_by("id"):
        slug = head.workspace.slug
        lane = AuditEvent.objects.filter(workspace_id=head.workspace_id, lane=head.lane)
        carrying = _lane_holds(lane.order_by("id"), slug, head, keys)
        if not carrying:
            continue
        erased = {
            f"{kind}:{name}"
            for kind, name in Actor.objects.filter(
                workspace_id=head.workspace_id, erased_at__isnull=False
            ).values_list("kind", "name")
        }
        for start in range(0, len(carrying), BATCH):
            sealed, kept = [], []
            batch = lane.filter(id__in=carrying[start : start + BATCH]).order_by("id")
            for event in batch:
                payload = dict(event.payload)
                text = payload.pop("query")
                before = {column: getattr(event, column) for column in COLUMNS}
                fields = lane_fields(_fields(slug, {**before, "payload": payload}), head.lane)
                event.seal = event_seal(event.prev_hash, fields, event.hash, keys[event.key_id])
                event.payload = payload
                sealed.append(event)
                if isinstance(text, str) and event.actor_id not in erased:
                    kept.append(
                        StoredQuery(
                            event_id=event.id,
                            workspace_id=event.workspace_id,
                            actor_id=event.actor_id,
                            text=text,
                        )
                    )
            AuditEvent.objects.bulk_update(sealed, ["payload", "seal"])
            StoredQuery.objects.bulk_create(kept, ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0017_stored_queries"),
        ("recall", "0017_hit_fold"),
    ]

    operations = [migrations.RunPython(move_queries_out, migrations.RunPython.noop, elidable=True)]
