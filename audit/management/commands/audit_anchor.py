from __future__ import annotations

import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.anchors import anchor_line, anchors_append, anchors_take
from audit.keys import signing_key


class Command(BaseCommand):
    help = (
        "Append a signed anchor of every workspace's audit chain head to AUDIT_ANCHOR_FILE"
        " (or --output; '-' prints them). Keep the file where the database's administrators"
        " cannot write; verify_audit_chain --anchors checks the chains against it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--output", help="File to append to (default AUDIT_ANCHOR_FILE)")

    def handle(self, *args: Any, **options: Any) -> None:
        target = options["output"] or settings.AUDIT_ANCHOR_FILE
        if not target:
            raise CommandError("Set AUDIT_ANCHOR_FILE or give --output FILE ('-' to print).")
        anchors = anchors_take()
        if target == "-":
            key = signing_key()
            for anchor in anchors:
                sys.stdout.write(anchor_line(anchor, key) + "\n")
            return
        try:
            anchors_append(target, anchors)
        except OSError as exc:
            raise CommandError(f"Cannot append to {target}: {exc.strerror}") from None
        for anchor in anchors:
            self.stdout.write(
                f"{anchor.workspace}{f' lane {anchor.lane}' if anchor.lane else ''}:"
                f" anchored at event {anchor.event_id} ({anchor.length} events)"
            )
        if not anchors:
            self.stdout.write("No chain has events yet; nothing anchored.")
