#!/usr/bin/env python
from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    from django.core.management import execute_from_command_line

    if sys.argv[1:2] != ["runserver"]:
        # Commands act for the operator on every workspace; the development server's requests
        # are scoped to their caller's workspaces, as in production (portal/db/scope.py).
        from portal.db.scope import scope_all_by_default

        scope_all_by_default()

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
