from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import audit_chain_verify
from policies.models import Workspace


class Command(BaseCommand):
    help = "Verify the audit hash chain of one workspace or of all; exits 1 on a broken chain."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--workspace", help="Workspace slug (default: every workspace)")

    def handle(self, *args: Any, **options: Any) -> None:
        workspaces = Workspace.objects.order_by("slug")
        if options["workspace"]:
            workspaces = workspaces.filter(slug=options["workspace"])
            if not workspaces.exists():
                raise CommandError(f"No workspace {options['workspace']!r}.")
        broken = []
        for workspace in workspaces:
            verdict = audit_chain_verify(workspace=workspace)
            if verdict.ok:
                self.stdout.write(f"{workspace.slug}: ok ({verdict.checked} events)")
            else:
                broken.append(workspace.slug)
                self.stdout.write(
                    f"{workspace.slug}: BROKEN at event {verdict.first_broken_id} "
                    f"after {verdict.checked} checked: {verdict.reason}"
                )
        if broken:
            raise CommandError(f"Broken audit chain in: {', '.join(broken)}", returncode=1)
