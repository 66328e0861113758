"""Impact previews: what a proposed floor, or a proposed workload policy, would take out of
recall.

Per workload and environment, the memories the current effective policy lets through and how
many of those the proposed floor would stop, with how the workload policy would stand against
it (``floor_change_impact``); for a workload policy being edited, the same for the
environments it applies to, and how many it would let in (``workload_change_impact``).

The policies are this app's; the memories are recall's, and recall sits above policies: so
recall registers the counter at start-up (``recall.apps``: ``recall.engine.impact``) and this
module calls whatever was registered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from policies import algebra, labels
from policies.axes import PolicyDocument
from policies.conflicts import Conflict
from policies.models import Workload, WorkloadPolicyVersion, WorkspacePolicyVersion
from policies.selectors import workload_compliance, workspace_policy_current
from portal.models import Workspace
from portal.registry import registry_put

# (current policy, proposed policy)
Pairs = list[tuple[PolicyDocument, PolicyDocument]]


class ImpactCounter(Protocol):
    """Per pair of policies: the memories recallable under the first, and how many of those
    the second would stop."""

    def __call__(
        self, *, workspace: Workspace, pairs: Pairs, now: datetime
    ) -> list[tuple[int, int]]: ...


_COUNTER: dict[str, ImpactCounter] = {}


def impact_counter_register(counter: ImpactCounter) -> ImpactCounter:
    """Set the function that counts memories under pairs of policies (there is one)."""
    return registry_put(_COUNTER, "counter", counter, what="impact counter")


def _count(workspace: Workspace, pairs: Pairs, now: datetime) -> list[tuple[int, int]]:
    if not _COUNTER:
        raise RuntimeError("no impact counter is registered (recall registers one when ready)")
    return _COUNTER["counter"](workspace=workspace, pairs=pairs, now=now)


@dataclass(frozen=True)
class ImpactRow:
    """What a floor change would do to one workload/environment: the memories it would take
    out of recall, and how the workload policy would stand against the proposed floor."""

    workload: Workload | None  # None: the floor alone (no workload policy)
    environment: str
    version: WorkloadPolicyVersion | None
    recallable_now: int
    would_stop: int
    relaxing_axes: list[str]  # axes the policy would relax under the proposed floor
    conflicts: list[Conflict]  # where the proposed floor would overrule it (the floor wins)
    # The similarity floor (``similarityMin``) now and under the proposed floor: it depends on
    # each query, so the counts above cannot include it; the page says so instead.
    similarity_now: float | None = None
    similarity_proposed: float | None = None
    # Memories the proposed policy would let through that the current one does not (a
    # workload policy widened up to the floor); the floor's preview does not count them.
    would_start: int = 0

    @property
    def recallable_after(self) -> int:
        return self.recallable_now - self.would_stop + self.would_start

    @property
    def similarity_words(self) -> str:
        """The proposed similarity floor in words, "" without one: "depends on each query:
        similarity floor 0.4 (now 0.3)"."""
        words = labels.query_dependent(self.similarity_proposed)
        if words and self.similarity_now != self.similarity_proposed:
            words += f" (now {labels.axis_value('similarityMin', self.similarity_now)})"
        return words


def floor_change_impact(
    *,
    workspace: Workspace,
    proposed: Any,
    current: WorkspacePolicyVersion | None = None,
    now: datetime | None = None,
) -> list[ImpactRow]:
    """What a proposed floor (raw document) would take out of recall, per workload × environment.

    Raises ``PolicyError`` if the proposed floor is not valid. Environments are the
    workspace's real ones: the all-environments default only matters through them.
    """
    new_floor, _ = algebra.normalize_floor(proposed)
    old_floor = (current or workspace_policy_current(workspace=workspace)).document
    environments, compliance = workload_compliance(workspace=workspace, floor=old_floor)
    targets: list[tuple[Workload | None, str, WorkloadPolicyVersion | None]] = [(None, "", None)]
    for row in compliance:
        for cell in row.cells:
            if cell.environment:
                targets.append((row.workload, cell.environment, cell.version))
    pairs = []
    standing: list[tuple[list[str], list[Conflict]]] = []
    for _, _, version in targets:
        document = version.document if version else {}
        proposed_policy, found = algebra.narrow_settled(new_floor, document)
        pairs.append((algebra.narrow(old_floor, document), proposed_policy))
        standing.append((algebra.check_workload(new_floor, document), found))
    counts = _count(workspace, pairs, now or datetime.now(tz=UTC))
    return [
        ImpactRow(
            workload,
            environment,
            version,
            now_count,
            stop,
            relaxing,
            found,
            similarity_now=current["similarityMin"],
            similarity_proposed=proposed["similarityMin"],
        )  # fmt: skip
        for (workload, environment, version), (now_count, stop), (relaxing, found), (
            current,
            proposed,
        ) in zip(targets, counts, standing, pairs, strict=True)
    ]


def workload_change_impact(
    *,
    workload: Workload,
    environment: str,
    proposed: Mapping[str, Any],
    floor: Mapping[str, Any],
    latest: Mapping[str, WorkloadPolicyVersion],
    environments: Sequence[str],
    now: datetime | None = None,
) -> list[ImpactRow]:
    """What saving ``proposed`` (a parsed workload policy) as the workload's policy for
    ``environment`` would change in recall: one row per environment it would apply to (its
    own; for the all-environments default, each environment without a policy of its own),
    with the memories recallable now, those it would stop and those it would let in.

    ``latest``: the workload's newest policy per environment (``""``: the default). A policy
    wider than the floor is clamped to it, as recall would: its rows say which axes.
    """
    targets = [environment] if environment else [e for e in environments if e not in latest]
    proposed_policy, found = algebra.narrow_settled(floor, proposed)
    relaxing = algebra.check_workload(floor, proposed)
    pairs: Pairs = []
    versions = []
    for target in targets:
        version = latest.get(target) or latest.get("")
        current = algebra.narrow(floor, version.document if version else {})
        pairs += [(current, proposed_policy), (proposed_policy, current)]
        versions.append(version)
    counts = _count(workload.workspace, pairs, now or datetime.now(tz=UTC))
    return [
        ImpactRow(
            workload,
            target,
            version,
            now_count,
            stop,
            relaxing,
            found,
            similarity_now=current["similarityMin"],
            similarity_proposed=proposed_policy["similarityMin"],
            would_start=start,
        )  # fmt: skip
        for target, version, (now_count, stop), (_, start), (current, _) in zip(
            targets, versions, counts[::2], counts[1::2], pairs[::2], strict=True
        )
    ]
