"""A policy save and a recall's audit append never deadlock.

The append moves the chain head, then inserts its event, whose foreign key takes KEY SHARE on
the workspace row. A save locks the workspace row, then waits for the chain head. If the
save's lock conflicted with KEY SHARE, each would wait for the other: PostgreSQL would kill
one as a deadlock (found by the load test: 503s on recall and policy saves). The save locks
FOR NO KEY UPDATE, which still excludes other saves but lets the insert through.

Deterministic: the "recall" holds the chain head in a transaction of its own, the save runs
in a thread until PostgreSQL shows that very backend waiting for a lock, then the recall
inserts its event. Both must finish.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from django.db import connection

from audit.models import AuditChainHead, AuditEvent
from policies.algebra import default_floor
from policies.services import workload_create, workload_policy_save, workspace_policy_save
from portal.db.scope import SETTING
from tests.helpers import waiting_for_a_lock

pytestmark = pytest.mark.django_db(transaction=True)

DEADLINE_S = 60.0


@pytest.mark.parametrize("target", ["floor", "workload"])
def test_a_save_waiting_for_the_chain_head_lets_the_appends_insert_through(target, workspace_a):
    workload = workload_create(workspace=workspace_a, name="locks", author="x")
    head_table = AuditChainHead._meta.db_table
    recall = psycopg.connect(**connection.get_connection_params())
    monitor = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    outcome: list[Any] = []
    save_pid: list[int] = []

    def save() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '30s'")
                cursor.execute("SELECT pg_backend_pid()")
                save_pid.append(cursor.fetchone()[0])
            if target == "floor":
                workspace_policy_save(
                    workspace=workspace_a,
                    document={**default_floor(), "relaxableAxes": [], "totalTokenBudget": 2500},
                    author="user:olga",
                    comment="Test floor",
                )
            else:
                workload_policy_save(
                    workload=workload, environment="", document={"confidenceMin": 0.3},
                    author="user:olga",
                )  # fmt: skip
            outcome.append("saved")
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            outcome.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=save)
    try:
        recall.execute("SET lock_timeout = '30s'")
        recall.execute("SELECT set_config(%s, %s, false)", [SETTING, str(workspace_a.pk)])
        recall.execute(
            f"UPDATE {head_table} SET length = length WHERE workspace_id = %s", [workspace_a.pk]
        )
        thread.start()
        deadline = time.monotonic() + DEADLINE_S
        while not (save_pid and waiting_for_a_lock(monitor, save_pid[0])):
            assert thread.is_alive(), f"the save finished without waiting: {outcome}"
            assert time.monotonic() < deadline, "the save never waited for the chain head"
            time.sleep(0.02)
        # The save holds the workspace row and waits for the head; the append's insert needs
        # KEY SHARE on that row (its foreign key).
        event = AuditEvent.objects.filter(workspace=workspace_a).order_by("id").first()
        assert event is not None
        # Django's foreign keys are checked at commit (the append commits at once, on its
        # own); checked at the insert here, so the stand-in event can be rolled back after.
        recall.execute("SET CONSTRAINTS ALL IMMEDIATE")
        recall.execute(
            f"INSERT INTO {AuditEvent._meta.db_table} (workspace_id, type, occurred_at, author,"
            " environment, actor_id, payload, prev_hash, hash, key_id)"
            " SELECT workspace_id, type, occurred_at, author, environment, actor_id, payload,"
            " prev_hash, 'lock-order-test', key_id FROM audit_auditevent WHERE id = %s",
            [event.pk],
        )
        recall.rollback()  # the test's stand-in event is not kept
    finally:
        thread.join(timeout=DEADLINE_S)
        recall.close()
        monitor.close()

    assert outcome == ["saved"]
