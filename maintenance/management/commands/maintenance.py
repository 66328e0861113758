"""``manage.py maintenance SWEEP --workspace SLUG [--execute]``: preview (default) or execute
one sweep, and print what it listed or changed."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from maintenance import services
from maintenance.lifecycle import SWEEP_SUMMARY, SWEEPS
from maintenance.models import MaintenanceRun, Mode
from portal.errors import DomainError
from portal.models import Workspace
from portal.tasks import eager


class Command(BaseCommand):
    help = "Preview (default) or execute a maintenance sweep: " + ", ".join(SWEEPS) + "."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("sweep", choices=SWEEPS)
        parser.add_argument("--workspace", required=True, help="Workspace slug")
        parser.add_argument(
            "--execute", action="store_true", help="Change the memories (default: preview)"
        )
        parser.add_argument(
            "--preview", type=int, help="With --execute: the preview run to carry out"
        )
        parser.add_argument("--confirm", type=int, help="With --execute: the count you expect")
        parser.add_argument(
            "--wait", action="store_true", help="With a broker: wait for the run to finish"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workspace = Workspace.objects.filter(slug=options["workspace"]).first()
        if workspace is None:
            raise CommandError(f"No workspace {options['workspace']!r}.")
        mode = Mode.EXECUTE if options["execute"] else Mode.PREVIEW
        if options["preview"] and mode != Mode.EXECUTE:
            raise CommandError("--preview needs --execute.")
        try:
            run = services.maintenance_start(
                workspace=workspace,
                sweep=options["sweep"],
                mode=mode,
                author="system:cli",
                preview_id=options["preview"],
                confirm=options["confirm"],
            )
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        if not eager() and options["wait"]:
            while not run.finished:
                time.sleep(1)
                run.refresh_from_db()
        self._report(run)

    def _report(self, run: MaintenanceRun) -> None:
        write = self.stdout.write
        write(f"{run.sweep} {run.mode} run {run.pk}: {run.status}")
        write(f"  {SWEEP_SUMMARY[run.sweep]}")
        if not run.finished:
            write("  Queued for a worker; follow it on the Maintenance page or with --wait.")
            return
        if run.error:
            write(f"  {run.error_code}: {run.error}")
        if run.mode == Mode.PREVIEW:
            write(f"  Would change {run.total} memor{'y' if run.total == 1 else 'ies'}.")
            for item in run.items.order_by("memory_id")[:20]:
                score = f" score {item.score:.3f}" if item.score is not None else ""
                write(f"    memory {item.memory_id} ({item.actor_id}): {item.reason}{score}")
            if run.total > 20:
                write(f"    … and {run.total - 20} more.")
            if run.total:
                write(
                    f"  Execute it: manage.py maintenance {run.sweep} --workspace"
                    f" {run.workspace.slug} --execute --preview {run.pk}"
                )
        else:
            write(f"  Changed {run.applied} of {run.total}; skipped {run.skipped}.")
        if run.event_id:
            write(f"  Audit event {run.event_id}.")
        if run.status != "succeeded":
            raise CommandError(f"The run ended {run.status}.")
