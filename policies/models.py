from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from portal.models import Workspace


class Workload(models.Model):
    """An agent or application; has at most one policy per environment plus a default."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Archived, not deleted: the audit trail and replays read its policy versions; recall for
    # an archived workload is refused (409 WORKLOAD_ARCHIVED).
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # Among live workloads: an archived one's name may be used again.
            models.UniqueConstraint(
                fields=["workspace", "name"],
                condition=Q(archived_at__isnull=True),
                name="workload_unique_name",
            )
        ]

    def __str__(self) -> str:
        return self.name


class PolicyVersionBase(models.Model):
    """An immutable saved policy document. A save always adds a row; rows are never edited."""

    version = models.PositiveIntegerField()
    document = models.JSONField()
    comment = models.CharField(max_length=500, blank=True, default="")
    author = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class WorkspacePolicyVersion(PolicyVersionBase):
    workspace = models.ForeignKey(
        Workspace, on_delete=models.CASCADE, related_name="policy_versions"
    )
    relaxable_axes = models.JSONField(default=list)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "version"], name="workspace_policy_unique_version"
            )
        ]

    def __str__(self) -> str:
        return f"floor v{self.version} of workspace {self.workspace_id}"


class WorkloadPolicyVersion(PolicyVersionBase):
    """A workload's partial policy for one environment; environment '' = all environments."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="policy_versions")
    environment = models.CharField(max_length=50, blank=True, default="")

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["workload", "environment", "version"],
                name="workload_policy_unique_version",
            ),
            models.CheckConstraint(
                condition=Q(version__gte=1), name="workload_policy_version_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"policy v{self.version} of workload {self.workload_id} [{self.environment or '*'}]"
