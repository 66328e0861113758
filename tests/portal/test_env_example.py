"""``.env.example`` lists every variable the portal reads (STYLE.md: the file documents every
variable), so an operator finds each one there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'(?:env_\w+\(|os\.environ\.get\(|os\.environ\[|getenv\()\s*"([A-Z][A-Z0-9_]+)"')
APPS = ("portal", "audit", "policies", "recall", "maintenance", "chat", "team", "console")


def variables_read() -> dict[str, str]:
    found: dict[str, str] = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for name in READ.findall(path.read_text()):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


class EnvExampleTests:
    def test_every_variable_the_portal_reads_is_in_env_example(self) -> None:
        listed = set(re.findall(r"\b([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text()))
        read = variables_read()

        missing = {name: where for name, where in read.items() if name not in listed}
        assert not missing, f"read but not in .env.example: {missing}"

    def test_the_scan_finds_the_settings_variables(self) -> None:
        assert {"DATABASE_URL", "API_RATE_PER_MINUTE", "CACHE_URL"} <= set(variables_read())
