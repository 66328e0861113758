from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.anchors import AnchorFile, anchor_file_read
from audit.services import audit_chain_verify
from policies.models import Workspace


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
            positions = anchors.positions(workspace.pk)
            problems = anchors.problems_for(workspace.pk)
            verdict = audit_chain_verify(workspace=workspace, anchors=positions)
            if verdict.ok and not problems:
                against = f", {len(positions)} anchors" if positions else ""
                self.stdout.write(f"{workspace.slug}: ok ({verdict.checked} events{against})")
            elif verdict.ok:
                broken.append(workspace.slug)
                self.stdout.write(f"{workspace.slug}: BROKEN anchors: {'; '.join(problems)}")
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
