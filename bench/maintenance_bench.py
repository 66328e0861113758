"""Maintenance benchmark: each sweep's preview and execute on a benchmark dataset, against the
bare SQL statement that makes the same change, in the same run.

    python bench/generate.py --memories 100000 --large-actor 20000 --label 100k
    python bench/maintenance_bench.py --label 100k

Every sweep runs in a transaction that is rolled back afterwards, so the dataset is left as
it was and each sweep sees the same rows. (Inside that transaction an execute's batches are
savepoints rather than commits: the WAL flush of each batch's commit is not counted.) The
bare SQL is one UPDATE/DELETE with the rule written in SQL: what the sweep costs beyond the
change itself is listing, fingerprints, items, archives and progress. Writes
``bench/results/latest/maintenance-<label>.json`` (git-ignored; ``bench/update_docs.py``
publishes it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import RESULTS, configure  # noqa: E402

# The sweeps' rules in plain SQL, for the default settings (maintenance.lifecycle).
HOURS_TO_STALE = math.log(1 / 0.2) / 0.01
BARE = {
    "decay": (
        "UPDATE recall_memoryrecord SET lifecycle_status = 'stale', stale_since = now(),"
        " updated_at = now() WHERE workspace_id = %(ws)s AND lifecycle_status = 'active'"
        " AND is_current AND tier = 'short_term'"
        " AND created_at <= now() - interval '24 hours'"
        f" AND coalesce(last_accessed_at, created_at) <= now() - interval '{HOURS_TO_STALE} hours'"
    ),
    "retention": (
        "DELETE FROM recall_memoryrecord WHERE workspace_id = %(ws)s AND lifecycle_status ="
        " 'stale' AND coalesce(stale_since, updated_at) < now() - interval '30 days'"
    ),
    "expiry": (
        "UPDATE recall_memoryrecord SET lifecycle_status = 'expired', updated_at = now()"
        " WHERE workspace_id = %(ws)s AND lifecycle_status IN ('active', 'inactive')"
        " AND expires_at <= now()"
    ),
}


class Rollback(Exception):
    pass


def timed(run: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = run()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="100k")
    parser.add_argument("--sweeps", default="expiry,decay,retention,promotion,dedup")
    args = parser.parse_args()
    configure(args.label)

    from django.conf import settings
    from django.db import connection, transaction

    from maintenance import services
    from maintenance.models import MaintenanceRun
    from portal.models import Workspace
    from recall.models import MemoryRecord

    workspace = Workspace.objects.order_by("pk").first()
    assert workspace is not None, "generate the dataset first (bench/generate.py)"
    services.lifecycle_settings_patch(
        workspace=workspace, changes={"retentionMaxShare": 1.0}, author="system:bench"
    )
    memories = MemoryRecord.objects.filter(workspace=workspace).count()
    results: dict[str, Any] = {}
    for sweep in args.sweeps.split(","):
        row: dict[str, Any] = {}
        try:
            with transaction.atomic():
                seconds, preview = timed(
                    lambda s=sweep: services.maintenance_start(
                        workspace=workspace, sweep=s, mode="preview", author="system:bench"
                    )
                )
                row["previewSeconds"] = round(seconds, 3)
                row["listed"] = preview.total
                seconds, run = timed(
                    lambda s=sweep, p=preview: services.maintenance_start(
                        workspace=workspace, sweep=s, mode="execute", author="system:bench",
                        preview_id=p.pk, confirm=p.total,
                    )
                )  # fmt: skip
                assert run.status == "succeeded", run.error
                row["executeSeconds"] = round(seconds, 3)
                row["applied"] = run.applied
                raise Rollback
        except Rollback:
            pass
        if sweep in BARE:
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    started = time.perf_counter()
                    cursor.execute(BARE[sweep], {"ws": workspace.pk})
                    row["bareSeconds"] = round(time.perf_counter() - started, 3)
                    row["bareRows"] = cursor.rowcount
                    raise Rollback
            except Rollback:
                pass
            if row["bareSeconds"] > 0:
                row["executeVsBare"] = round(row["executeSeconds"] / row["bareSeconds"], 1)
        per_row = (
            row["applied"] and (row["previewSeconds"] + row["executeSeconds"]) / row["applied"]
        )
        row["msPerChangedMemory"] = round(1000 * per_row, 3) if per_row else None
        results[sweep] = row
        print(sweep, row, flush=True)
    MaintenanceRun.objects.filter(workspace=workspace, author="system:bench").delete()
    out = {
        "label": args.label,
        "measuredAt": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "memories": memories,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "batchSize": settings.MAINTENANCE_BATCH_SIZE,
        "sweeps": results,
        "note": "each sweep in a rolled-back transaction; bare SQL = one statement, same rule",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"maintenance-{args.label}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
