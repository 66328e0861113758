"""``manage.py migrate`` as the database owner, then the application role's grants.

The application connects as a role that owns nothing (``portal.db.roles``); the schema is
the owner's to change. After every migration the application role is granted what it may
do on the tables that exist now, the audit trail's append-only ones excepted.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrate

from portal.db.roles import as_owner, grant_application_role


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " Runs as the database owner and grants the application role."

    def handle(self, *args: Any, **options: Any) -> None:
        alias = options["database"]
        with as_owner(alias):
            super().handle(*args, **options)
            if not options.get("plan") and not options.get("check_unapplied"):
                role = grant_application_role(alias)
                if role and options["verbosity"] >= 2:
                    self.stdout.write(f"Granted the application role {role!r} its privileges.")
