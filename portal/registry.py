"""The one rule of the registries the apps fill from their ``AppConfig.ready`` (the extension
points of docs/architecture.md): a key registered twice is a programming error, raised at
start-up, unless it is registered again with the same value, which changes nothing (a module
imported again, a ``ready`` run again).

A registry of functions keys each by where it is defined (``function_key``): the same
function twice is registered once; another function of the same name is refused.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class RegisteredTwice(RuntimeError):
    """A key registered again with another value."""


def registry_put(
    registry: MutableMapping[K, V],
    key: K,
    value: V,
    *,
    what: str,
    same: Callable[[V, V], bool] = lambda present, value: present == value,
) -> V:
    """Register ``value`` under ``key`` (``what`` names the registry in the error)."""
    if key in registry and not same(registry[key], value):
        raise RegisteredTwice(
            f"{what}: {key!r} is registered already ({registry[key]!r}), not again ({value!r})."
        )
    registry[key] = value
    return value


def function_key(function: Callable[..., Any]) -> str:
    """A function's key in a registry of functions: its module and qualified name."""
    return f"{function.__module__}.{function.__qualname__}"
