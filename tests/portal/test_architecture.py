"""The structure of the house, enforced (docs/architecture.md draws it).

- Every import points down: an app imports only the apps on the floors below its own, so
  the ground floor (tenancy, access, errors, database helpers, hashing) imports no app.
  A higher app that adds to a lower one registers (panels, event presenters, erasure of
  copies, the impact counter): the lower one names the extension point, never the app.
- The domain rules are plain Python: no Django, no DRF, no module that imports them.
- No file is a room of several concepts: none passes 800 lines (tests and migrations aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Bottom to top. A module may import its own app and the apps listed before it.
FLOORS = ("portal", "audit", "policies", "recall", "chat", "maintenance", "team", "console")
# The domain rules (STYLE.md): dataclasses in and out, no framework.
PURE = (
    "portal/canonical.py",
    "portal/permissions.py",
    "policies/axes.py",
    "policies/algebra.py",
    "policies/conflicts.py",
    "policies/vocabulary.py",
    "policies/labels.py",
    "policies/axis_fields.py",
    "recall/planner.py",
    "recall/scoring.py",
    "recall/envelope.py",
    "recall/compare.py",
    "recall/actor_ids.py",
    "recall/embedding.py",
    "recall/embedding_onnx.py",
    "recall/query_vectors.py",
    "recall/layout/vocabulary.py",
    "recall/layout/config.py",
    "recall/layout/request.py",
    "recall/layout/budget.py",
    "recall/layout/estimate.py",
    "recall/layout/sections.py",
    "recall/layout/cascade.py",
    "recall/layout/planner.py",
    "recall/layout/monitor.py",
    "maintenance/lifecycle.py",
    "chat/context.py",
    "chat/compaction/rules.py",
    "chat/compaction/service_config.py",
)
FRAMEWORKS = ("django", "rest_framework", "drf_spectacular", "django_filters", "celery")
MOST_LINES = 800


def _sources() -> list[Path]:
    found = []
    for floor in (*FLOORS, "bench"):
        for path in sorted((ROOT / floor).rglob("*.py")):
            if "migrations" not in path.parts:
                found.append(path)
    return found


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute import of the module, at any depth (function-local ones too); a
    ``from package import module`` names the module itself."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            package = ROOT / node.module.replace(".", "/")
            found.extend(
                (node.lineno, f"{node.module}.{alias.name}")
                for alias in node.names
                if (package / f"{alias.name}.py").exists()
            )
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def _file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


class ArchitectureTests:
    def test_every_import_points_down_a_floor(self):
        upward = []
        for path in _sources():
            floor = path.relative_to(ROOT).parts[0]
            if floor not in FLOORS:
                continue
            for line, module in _imports(path):
                target = module.split(".")[0]
                if target in FLOORS and FLOORS.index(target) > FLOORS.index(floor):
                    upward.append(f"{_name(path)}:{line} imports {module}")
        assert upward == [], "imports that run up a floor:\n" + "\n".join(upward)

    @pytest.mark.parametrize("module", PURE)
    def test_the_domain_rules_are_plain_python(self, module):
        path = ROOT / module
        assert path.exists(), f"{module} is listed as a domain module but is not there"
        reached: set[str] = set()
        pending = [path]
        while pending:  # the module and every project module it imports, transitively
            current = pending.pop()
            if _name(current) in reached:
                continue
            reached.add(_name(current))
            for line, imported in _imports(current):
                top = imported.split(".")[0]
                assert top not in FRAMEWORKS, f"{_name(current)}:{line} imports {imported}"
                if top not in FLOORS:
                    continue
                # Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
                parts = imported.split(".")
                for depth in range(1, len(parts) + 1):
                    target = _file(".".join(parts[:depth]))
                    if target is not None:
                        pending.append(target)

    def test_no_file_passes_800_lines(self):
        long = [
            f"{_name(path)}: {n} lines"
            for path in _sources()
            if (n := len(path.read_text().splitlines())) > MOST_LINES
        ]
        assert long == []

    def test_the_rules_see_the_whole_house(self):
        # A floor renamed or a folder added must be placed here, not silently skipped.
        apps = {
            p.name
            for p in ROOT.iterdir()
            if p.is_dir() and (p / "__init__.py").exists() and (p / "apps.py").exists()
        }
        assert apps == set(FLOORS)
