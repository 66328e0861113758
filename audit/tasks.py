"""Audit tasks: beat anchors every chain's head to ``AUDIT_ANCHOR_FILE``."""

from __future__ import annotations

from audit.anchors import audit_anchor_record
from portal.tasks import task


@task(name="audit.anchor")
def anchor() -> int:
    return len(audit_anchor_record())
