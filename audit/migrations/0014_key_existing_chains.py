"""Seal the chains recorded before the chain was keyed with the current key.

Each workspace's chain is walked under the old rule (plain SHA-256) first; a chain that
holds is rehashed, event by event, as an HMAC under ``AUDIT_HMAC_KEY_ID``, and its head
moved to the new tip. A chain that does not hold is left as it is, so verification goes on
reporting where it broke. Runs as the database owner (manage.py migrate).
"""

from django.db import migrations

BATCH = 2000


def seal(apps, schema_editor):
    from audit.chain import GENESIS_HASH, event_hash
    from audit.keys import signing_key

    AuditEvent = apps.get_model("audit", "AuditEvent")
    AuditChainHead = apps.get_model("audit", "AuditChainHead")
    AuditCheckpoint = apps.get_model("audit", "AuditCheckpoint")
    if not AuditEvent.objects.filter(key_id="").exists():
        return
    key = signing_key()
    columns = ("type", "occurred_at", "author", "workload_id", "environment", "actor_id",
               "payload")
    for head in AuditChainHead.objects.select_related("workspace"):
        events = (
            AuditEvent.objects.filter(workspace_id=head.workspace_id)
            .order_by("id")
            .values_list("id", "prev_hash", "hash", "key_id", *columns)
        )
        old_prev, new_prev, rehashed, holds = GENESIS_HASH, GENESIS_HASH, [], True
        for pk, prev, digest, key_id, *values in events.iterator(chunk_size=BATCH):
            row = dict(zip(columns, values, strict=True))
            fields = {
                "type": row["type"],
                "occurredAt": row["occurred_at"].isoformat(),
                "workspace": head.workspace.slug,
                "author": row["author"],
                "workloadId": str(row["workload_id"]) if row["workload_id"] else None,
                "environment": row["environment"],
                "actorId": row["actor_id"],
                "payload": row["payload"],
            }
            if key_id or prev != old_prev or event_hash(prev, fields) != digest:
                holds = False
                break
            new_hash = event_hash(new_prev, fields, key)
            rehashed.append((pk, new_prev, new_hash))
            old_prev, new_prev = digest, new_hash
        if not holds or old_prev != head.last_hash:
            continue
        for start in range(0, len(rehashed), BATCH):
            AuditEvent.objects.bulk_update(
                [
                    AuditEvent(pk=pk, prev_hash=prev, hash=digest, key_id=key.id)
                    for pk, prev, digest in rehashed[start : start + BATCH]
                ],
                ["prev_hash", "hash", "key_id"],
            )
        head.last_hash = new_prev
        head.save(update_fields=["last_hash"])
        # Checkpoints name old hashes: the next check walks the chain in full.
        AuditCheckpoint.objects.filter(workspace_id=head.workspace_id).delete()


class Migration(migrations.Migration):
    dependencies = [("audit", "0013_event_key_id")]

    operations = [migrations.RunPython(seal, migrations.RunPython.noop, elidable=True)]
