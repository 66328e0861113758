"""Layout values as plain data: what ``json.dumps`` and a JSONField take.

Plain Python, no Django import. Dataclasses become dicts of their fields (recursively), enums
their values, tuples lists; an infinite or NaN float becomes None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any


def plain_data(value: Any) -> Any:
    """``value`` with every dataclass, enum and tuple inside it made plain (see the module)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no infinity; a zero budget is also flagged as overage
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value
