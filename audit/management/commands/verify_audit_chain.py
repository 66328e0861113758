from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.template.defaultfilters import pluralize

from audit.anchors import AnchorFile, anchor_file_read
from audit.services import audit_chain_check
from portal.models import Workspace


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain of one workspace or of all, against the anchors of"
        " --anchors FILE (default AUDIT_ANCHOR_FILE); exits 1 on a broken chain."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Workspace slug (default: every workspace)")
        parser.add_argument(
            "--anchors", help="Anchor file to check the chains against (default AUDIT_ANCHOR_FILE)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspaces = Workspace.objects.order_by("slug")
        if options["workspace"]:
            workspaces = workspaces.filter(slug=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace {options['workspace']!r}.")
        anchors = self._anchors(options["anchors"])
        broken = []
        for workspace in workspaces:
            check = audit_chain_check(workspace=workspace, full=True, anchors=anchors)
            verdict = check.verdict
            if verdict.ok:
                against = f", {check.anchors} anchor{pluralize(check.anchors)}"
                self.stdout.write(
                    f"{workspace.slug}: ok ({verdict.checked} events"
                    f"{against if check.anchors else ''})"
                )
            else:
                broken.append(workspace.slug)
                at = f"at event {verdict.first_broken_id} " if verdict.first_broken_id else ""
                self.stdout.write(
                    f"{workspace.slug}: BROKEN {at}after {verdict.checked} checked:"
                    f" {verdict.reason}"
                )
        if broken:
            raise CommandError(f"Broken audit chain in: {', '.join(broken)}", returncode=1)

    def _anchors(self, path: str | None) -> AnchorFile:
        if not path and not settings.AUDIT_ANCHOR_FILE:
            return AnchorFile()
        try:
            return anchor_file_read(path)
        except OSError as exc:
            raise CommandError(f"Cannot read the anchor file {path}: {exc.strerror}") from None
