"""Rewrite the README's benchmark section from the JSON files in bench/results/."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.recall_bench import markdown  # noqa: E402

START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def main() -> None:
    results = sorted((ROOT / "bench" / "results").glob("recall-*.json"))
    sections = []
    for path in results:
        data = json.loads(path.read_text())
        sections.append(
            f"Measured {data['when']} (`{path.relative_to(ROOT)}`).\n\n{markdown(data)}"
        )
    readme = ROOT / "README.md"
    text = readme.read_text()
    body = "\n\n".join(sections) if sections else "(not yet measured)"
    text = re.sub(
        re.escape(START) + ".*?" + re.escape(END), f"{START}\n{body}\n{END}", text, flags=re.S
    )
    readme.write_text(text)


if __name__ == "__main__":
    main()
