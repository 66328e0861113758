"""The sweeps: what each lists, and how it applies one batch.

Listing reads the workspace's memories in id order (promotion: actor by actor, so that each
actor's vectors are read once for its connections), a page at a time, narrowed in SQL by a
prefilter that can only let more rows through than the rule (``maintenance.lifecycle``)
admits; the rule then decides each row in Python, so the SQL and the rules cannot disagree
about what is listed. Each listed row carries a fingerprint of its state.

Applying locks the batch's rows (in id order, as recall's hit updates lock them), skips every
row whose fingerprint moved since it was listed, and changes the others in one statement;
the caller commits that with the items' outcomes and the run's progress, so a crash leaves
each row either before or after, never half-changed. The columns a sweep writes
(``state_columns``) are recorded on each item it applies, before and after, in the same
transaction: what a revert (``maintenance.reverts``) puts back.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import F
from django.utils import timezone

from chat.selectors import sessions_ended_before, sessions_locked
from chat.services import sessions_delete
from maintenance import lifecycle, sql
from maintenance.connections import ConnectionCounter
from maintenance.models import ArchiveChunk, MaintenanceItem, MaintenanceRun, Outcome
from recall.engine.vectors import memory_vectors_write
from recall.models import MemoryRecord
from recall.runtime import embedder

PAGE = 2_000
DEDUP_ACTORS_PER_PAGE = 200


@dataclass(frozen=True)
class Row:
    facts: lifecycle.MemoryFacts
    actor: str
    embedding_model: str
    fingerprint: str
    actor_pk: int


@dataclass
class Draft:
    """An item before it is written."""

    memory_id: int
    actor_id: str
    reason: str
    fingerprint: str
    score: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def item(self, run: MaintenanceRun) -> MaintenanceItem:
        return MaintenanceItem(
            run=run,
            memory_id=self.memory_id,
            actor_id=self.actor_id,
            reason=self.reason,
            fingerprint=self.fingerprint,
            score=self.score,
            details=self.details,
        )


def _rows(
    run: MaintenanceRun, prefilter: sql.Prefilter, params: dict[str, Any], order: sql.Order = "id"
) -> Iterator[list[Row]]:
    return _workspace_rows(run.workspace_id, prefilter, params, order)


def _workspace_rows(
    workspace_id: int, prefilter: sql.Prefilter, params: dict[str, Any], order: sql.Order = "id"
) -> Iterator[list[Row]]:
    """The workspace's rows passing ``prefilter``, a page at a time, in id order (or actor by
    actor, ``order="actor"``)."""
    after, after_actor = 0, 0
    while True:
        page = [
            _row(values)
            for values in sql.facts_page(
                workspace_id=workspace_id,
                prefilter=prefilter,
                params=params,
                order=order,
                after=after,
                after_actor=after_actor,
                page=PAGE,
            )  # fmt: skip
        ]
        if not page:
            return
        yield page
        after, after_actor = page[-1].facts.id, page[-1].actor_pk


def _row(values: Sequence[Any]) -> Row:
    (pk, actor, tier, status, current, confidence, created, accessed, hits, expires, stale,
     model, fingerprint, actor_pk, reactivated) = values  # fmt: skip
    facts = lifecycle.MemoryFacts(
        id=pk, tier=tier, lifecycle_status=status, is_current=current, confidence=confidence,
        created_at=created, last_accessed_at=accessed, hit_count=hits, expires_at=expires,
        stale_since=stale if status == "stale" else None, reactivated_at=reactivated,
    )  # fmt: skip
    return Row(facts, actor, model, fingerprint, actor_pk)


def _cutoff(now: datetime, hours: float) -> datetime:
    # One second of slack: the prefilter may admit a row the rule refuses, never the reverse.
    return now - timedelta(hours=hours) + timedelta(seconds=1)


class Sweep:
    name: str
    # The memory columns an execute writes, recorded on each item it applies (``before`` and
    # ``after``) so that the run can be reverted. Empty for the sweeps a revert cannot undo:
    # retention deletes (its archive restores them), reembed overwrites vectors it keeps no
    # copy of.
    state_columns: tuple[str, ...] = ()

    @property
    def revertible(self) -> bool:
        return bool(self.state_columns)

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        raise NotImplementedError

    def partners(self, items: Sequence[MaintenanceItem]) -> list[int]:
        """Other rows an item's change depends on, locked with the batch (dedup: the newer
        insight)."""
        return []

    def still_due(self, run: MaintenanceRun, items: Sequence[MaintenanceItem]) -> dict[int, str]:
        """Items to skip for a reason beyond their own row (dedup: its newer insight)."""
        return {}

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        raise NotImplementedError

    def current(self, run: MaintenanceRun, ids: Sequence[int]) -> dict[int, str]:
        """The fingerprints of the rows ``ids`` that still exist, locked to the end of the
        batch's transaction: memories, in id order, as recall's hit updates take them (no
        lock cycle between the two)."""
        return memories_locked(workspace_id=run.workspace_id, ids=ids)


def memories_locked(*, workspace_id: int, ids: Sequence[int]) -> dict[int, str]:
    """The fingerprints of the memories ``ids`` that still exist, locked (in id order) to the
    end of the caller's transaction."""
    return sql.fingerprints_locked(workspace_id=workspace_id, ids=ids)


class Expiry(Sweep):
    name = "expiry"
    state_columns = ("lifecycle_status", "stale_since", "updated_at")

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        now = run.as_of or timezone.now()
        for page in _rows(run, "expiry", {"now": now}):
            yield [
                Draft(
                    row.facts.id,
                    row.actor,
                    "past_expiry",
                    row.fingerprint,
                    details={"expiresAt": _iso(row.facts.expires_at)},
                )  # fmt: skip
                for row in page
                if lifecycle.expiry_due(row.facts, now)
            ]

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        _change(items, "expire", now)


class Decay(Sweep):
    name = "decay"
    state_columns = ("lifecycle_status", "stale_since", "updated_at")

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        now = run.as_of or timezone.now()
        s = run.settings
        hours_to_stale = math.log(1.0 / s["decayThreshold"]) / s["decayRatePerHour"]
        params = {
            "long": bool(s["decayLongTerm"]),
            "old_enough": _cutoff(now, s["minimumAgeHours"]),
            "untouched_since": _cutoff(now, hours_to_stale),
        }
        for page in _rows(run, "decay", params):
            drafts = []
            for row in page:
                score = lifecycle.decay_due(row.facts, s, now)
                if score is not None:
                    hours = (now - row.facts.last_touched).total_seconds() / 3600
                    drafts.append(
                        Draft(
                            row.facts.id,
                            row.actor,
                            "decayed",
                            row.fingerprint,
                            score,
                            {
                                "lastRecalledAt": _iso(row.facts.last_accessed_at),
                                "hoursSinceRecall": round(hours, 1),
                            },
                        )  # fmt: skip
                    )
            yield drafts

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        _change(items, "stale", now)


class Retention(Sweep):
    name = "retention"

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        now = run.as_of or timezone.now()
        s = run.settings
        params = {"stale_before": _cutoff(now, s["retentionDays"] * 24)}
        for page in _rows(run, "retention", params):
            yield [
                Draft(
                    row.facts.id,
                    row.actor,
                    "past_retention",
                    row.fingerprint,
                    details={"staleSince": _iso(row.facts.stale_since)},
                )  # fmt: skip
                for row in page
                if lifecycle.retention_due(row.facts, s, now)
            ]

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        ids = [item.memory_id for item in items]
        lines = archive_lines(ids)
        text = "".join(line + "\n" for line in lines)
        seq = (ArchiveChunk.objects.filter(run=run).order_by("-seq").values_list("seq", flat=True)
               .first() or 0) + 1  # fmt: skip
        ArchiveChunk.objects.create(
            run=run,
            seq=seq,
            lines=text,
            count=len(lines),
            sha256=hashlib.sha256(text.encode()).hexdigest(),
        )
        # Through the ORM: a memory another one names as superseding it is cleared there
        # (supersededBy is SET_NULL), which a plain DELETE would refuse.
        MemoryRecord.objects.filter(pk__in=ids).delete()


def archive_lines(ids: Sequence[int]) -> list[str]:
    """The memories as JSON Lines in the import's shape (sorted keys, in id order)."""
    return [
        json.dumps(
            {
                name: _iso(value) if isinstance(value, datetime) else value
                for name, value in row.items()
            },
            sort_keys=True,
            ensure_ascii=False,
        )  # fmt: skip
        for row in sql.archive_rows(ids)
    ]


class Promotion(Sweep):
    name = "promotion"
    state_columns = ("tier", "updated_at")

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        return promotion_listing(
            workspace_id=run.workspace_id,
            settings=run.settings,
            model=run.embedder,
            now=run.as_of or timezone.now(),
        )

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        memories_promote(ids=[item.memory_id for item in items], now=now)


def promotion_listing(
    *,
    workspace_id: int,
    settings: dict[str, Any],
    model: str,
    now: datetime,
    actor_pk: int | None = None,
) -> Iterator[list[Draft]]:
    """The short-term memories whose promotion score reaches the threshold (the promotion
    sweep's listing; compaction's for one actor, ``actor_pk``)."""
    s = settings
    counter = ConnectionCounter(model, s["connectionSimilarity"], s["connectionsFull"])
    prefilter: sql.Prefilter = "promotion"
    params: dict[str, Any] = {}
    if actor_pk is not None:
        prefilter = "promotion_of_actor"
        params["actor"] = actor_pk
    for page in _workspace_rows(workspace_id, prefilter, params, order="actor"):
        wanted: dict[int, list[int]] = {}
        for row in page:
            if row.embedding_model == model and lifecycle.connections_matter(row.facts, s, now):
                wanted.setdefault(row.actor_pk, []).append(row.facts.id)
        links: dict[int, int] = {}
        for pk, ids in wanted.items():  # in actor order, as the page is
            links.update(counter.counts(pk, ids))
        drafts = []
        for row in page:
            if not lifecycle.promotion_applies(row.facts):
                continue
            n = links.get(row.facts.id, 0)
            signals = lifecycle.promotion_signals(row.facts, n, s, now)
            if lifecycle.promotion_due(signals, s):
                drafts.append(
                    Draft(
                        row.facts.id,
                        row.actor,
                        "promotable",
                        row.fingerprint,
                        signals.score,
                        {"signals": _signals(signals), "connections": n},
                    )  # fmt: skip
                )
        yield drafts


def memories_promote(*, ids: Sequence[int], now: datetime) -> None:
    """Make the memories long-term (the promotion sweep's change)."""
    sql.memories_changed(ids=ids, change="promote", now=now)


def _signals(signals: lifecycle.PromotionSignals) -> dict[str, float]:
    return {
        "age": round(signals.age, 4),
        "access": round(signals.access, 4),
        "confidence": round(signals.confidence, 4),
        "connections": round(signals.connections, 4),
    }


class Dedup(Sweep):
    name = "dedup"
    state_columns = ("is_current", "superseded_by_id", "updated_at")

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        s = run.settings
        after = 0
        while True:
            actors = sql.insight_actors(
                workspace_id=run.workspace_id, after=after, limit=DEDUP_ACTORS_PER_PAGE
            )
            if not actors:
                return
            after = actors[-1]
            yield dedup_listing(
                workspace_id=run.workspace_id,
                actor_pks=actors,
                model=run.embedder,
                limit=s["dedupMaxInsights"],
                threshold=s["dedupSimilarity"],
            )

    def partners(self, items: Sequence[MaintenanceItem]) -> list[int]:
        return [int(item.details["supersededBy"]) for item in items]

    def still_due(self, run: MaintenanceRun, items: Sequence[MaintenanceItem]) -> dict[int, str]:
        """The newer insight must still be current and active (a recall hit on it is fine)."""
        newer = {item.memory_id: int(item.details["supersededBy"]) for item in items}
        return insights_gone(newer)

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        insights_supersede(
            newer={item.memory_id: int(item.details["supersededBy"]) for item in items}, now=now
        )


def dedup_listing(
    *, workspace_id: int, actor_pks: Sequence[int], model: str, limit: int, threshold: float
) -> list[Draft]:
    """Of each actor's ``limit`` most recent current, active insights (embedded by
    ``model``), each older one that repeats a newer one (cosine at or above ``threshold``,
    ``lifecycle.dedup_plan``): the dedup sweep's listing of a page of actors, and
    compaction's insight dedup of one actor."""
    insights = sql.recent_insights(
        workspace_id=workspace_id, actor_pks=actor_pks, model=model, limit=limit
    )
    pairs = sql.insight_pairs(ids=[row[0] for row in insights], max_distance=1.0 - threshold)
    by_actor: dict[str, list[tuple[int, datetime, str]]] = {}
    for pk, actor, created, fingerprint in insights:
        by_actor.setdefault(actor, []).append((pk, created, fingerprint))
    drafts = []
    for actor, rows in by_actor.items():
        prints = {pk: fingerprint for pk, _, fingerprint in rows}
        plan = lifecycle.dedup_plan(
            [lifecycle.Insight(pk, created) for pk, created, _ in rows], pairs, threshold
        )
        for step in plan:
            drafts.append(
                Draft(
                    step.older,
                    actor,
                    "duplicate_insight",
                    prints[step.older],
                    step.similarity,
                    {"supersededBy": str(step.newer), "newerFingerprint": prints[step.newer]},
                )  # fmt: skip
            )
    return drafts


def insights_gone(newer: dict[int, int]) -> dict[int, str]:
    """Of ``newer`` (older insight → the newer one superseding it), the older ones whose newer
    insight is no longer current and active, with why."""
    alive = set(
        MemoryRecord.objects.filter(
            pk__in=set(newer.values()), lifecycle_status="active", is_current=True
        ).values_list("pk", flat=True)
    )
    return {
        pk: f"its newer insight {other} is no longer current"
        for pk, other in newer.items()
        if other not in alive
    }


def insights_supersede(*, newer: dict[int, int], now: datetime) -> None:
    """Each older insight of ``newer`` is no longer current, superseded by its newer one (the
    dedup sweep's change)."""
    sql.insights_superseded(newer=newer, now=now)


class Reembed(Sweep):
    name = "reembed"

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        for page in _rows(run, "reembed", {"model": run.embedder}):
            yield [
                Draft(
                    row.facts.id,
                    row.actor,
                    "not_embedded" if not row.embedding_model else "other_embedder",
                    row.fingerprint,
                    details={"embeddingModel": row.embedding_model},
                )  # fmt: skip
                for row in page
            ]

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        ids = [item.memory_id for item in items]
        rows = list(
            MemoryRecord.objects.filter(pk__in=ids).order_by("pk").values_list("pk", "content")
        )
        model = embedder()
        if model.model_name != run.embedder:
            raise RuntimeError(
                f"This worker embeds with {model.model_name}, the run with {run.embedder}:"
                " give web and workers the same RECALL_EMBEDDER."
            )
        # The rows are locked (``current``): their content is the one just read.
        memory_vectors_write(
            model=run.embedder, rows=rows, vectors=model.embed([content for _, content in rows])
        )


class Sessions(Sweep):
    """Chat sessions, not memories: an item's ``memory_id`` holds the session's id (and its
    details say ``sessionId``); chat reads and deletes its own table."""

    name = "sessions"

    def drafts(self, run: MaintenanceRun) -> Iterator[list[Draft]]:
        now = run.as_of or timezone.now()
        days = run.settings.get("sessionRetentionDays", lifecycle.SESSION_RETENTION_DAYS)
        before = _cutoff(now, days * 24)
        after = 0
        while True:
            page = sessions_ended_before(
                workspace_id=run.workspace_id, before=before, after_id=after, limit=PAGE
            )
            if not page:
                return
            yield [
                Draft(
                    session.pk,
                    session.actor_id,
                    "past_session_retention",
                    session.fingerprint,
                    details={
                        "sessionId": str(session.pk),
                        "endedAt": _iso(session.ended_at),
                        "turns": session.turns,
                    },
                )
                for session in page
                if lifecycle.session_retention_due(session.ended_at, run.settings, now)
            ]
            after = page[-1].pk

    def current(self, run: MaintenanceRun, ids: Sequence[int]) -> dict[int, str]:
        return sessions_locked(workspace_id=run.workspace_id, ids=ids)

    def change(self, run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> None:
        sessions_delete(workspace=run.workspace, ids=[item.memory_id for item in items])


SWEEP_CLASSES: dict[str, Sweep] = {
    sweep.name: sweep
    for sweep in (Expiry(), Decay(), Retention(), Promotion(), Dedup(), Reembed(), Sessions())
}
assert tuple(SWEEP_CLASSES) == lifecycle.SWEEPS


def apply_batch(run: MaintenanceRun, items: Sequence[MaintenanceItem], now: datetime) -> int:
    """Change the batch's rows that are as they were listed; record every item's outcome.

    Runs inside the caller's transaction. Returns how many rows were changed.
    """
    sweep = SWEEP_CLASSES[run.sweep]
    ids = [item.memory_id for item in items]
    current = sweep.current(run, sorted({*ids, *sweep.partners(items)}))
    skipped: dict[int, str] = {}
    for item in items:
        if item.memory_id not in current:
            skipped[item.memory_id] = "deleted since it was listed"
        elif current[item.memory_id] != item.fingerprint:
            skipped[item.memory_id] = "changed since it was listed"
    ready = [item for item in items if item.memory_id not in skipped]
    skipped.update(sweep.still_due(run, ready))
    ready = [item for item in ready if item.memory_id not in skipped]
    if ready:
        _record_state(run, ready, "before", sweep.state_columns)
        sweep.change(run, ready, now)
        _record_state(run, ready, "after", sweep.state_columns)
    MaintenanceItem.objects.filter(run=run, memory_id__in=[i.memory_id for i in ready]).update(
        outcome=Outcome.APPLIED
    )
    for note in set(skipped.values()):
        MaintenanceItem.objects.filter(
            run=run, memory_id__in=[pk for pk, why in skipped.items() if why == note]
        ).update(outcome=Outcome.SKIPPED, note=note)
    MaintenanceRun.objects.filter(pk=run.pk).update(
        done=F("done") + len(items),
        applied=F("applied") + len(ready),
        skipped=F("skipped") + len(skipped),
        heartbeat_at=now,
    )
    return len(ready)


def _record_state(
    run: MaintenanceRun,
    items: Sequence[MaintenanceItem],
    field: Literal["before", "after"],
    columns: Sequence[str],
) -> None:
    """Write the rows' ``columns`` as they are now into the items' ``field``."""
    if columns:
        ids = [item.memory_id for item in items]
        sql.state_record(run_id=run.pk, ids=ids, field=field, columns=columns)


def _change(items: Sequence[MaintenanceItem], change: sql.Change, now: datetime) -> None:
    sql.memories_changed(ids=[item.memory_id for item in items], change=change, now=now)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
