"""Publish benchmark results: copy them from ``bench/results/latest/`` (where every run writes,
git-ignored) to ``bench/results/`` (tracked, cited by the docs), then rewrite the recall
tables of ``docs/performance.md`` from the published ``recall-*.json``.

    python bench/update_docs.py                          # everything in bench/results/latest/
    python bench/update_docs.py recall-100k.json 'provenance-*.json'   # names or patterns

``make bench-docs`` runs it alone; ``make bench UPDATE_DOCS=1`` (and ``bench-maintenance``,
``bench-provenance``) run it on what they just measured.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.common import PUBLISHED, RESULTS  # noqa: E402
from bench.recall_bench import markdown  # noqa: E402

PAGE = ROOT / "docs" / "performance.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def main() -> None:
    patterns = sys.argv[1:] or ["*.json"]
    latest = sorted({path for pattern in patterns for path in RESULTS.glob(pattern)})
    if not latest:
        raise SystemExit(
            f"Nothing matches {' '.join(patterns)} in {RESULTS.relative_to(ROOT)}/: "
            "run the benchmark first."
        )
    for path in latest:
        shutil.copyfile(path, PUBLISHED / path.name)
        print(f"published {(PUBLISHED / path.name).relative_to(ROOT)}")
    recall_tables_rewritten()


def recall_tables_rewritten() -> None:
    sections = []
    for path in sorted(PUBLISHED.glob("recall-*.json")):
        data = json.loads(path.read_text())
        sections.append(
            f"Measured {data['when']} (`{path.relative_to(ROOT)}`).\n\n{markdown(data)}"
        )
    text = PAGE.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has lost its {START} ... {END} markers.")
    body = "\n\n".join(sections) if sections else "(not yet measured)"
    text = re.sub(
        re.escape(START) + ".*?" + re.escape(END),
        lambda _: f"{START}\n{body}\n{END}",
        text,
        flags=re.S,
    )
    PAGE.write_text(text)
    print(f"rewrote the recall tables of {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
