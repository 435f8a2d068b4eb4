"""The runner as a method sees it: through its family's context protocol, and nothing more.

The runner provides every service of both families; a method receives a view that reaches only the
members of its family's context (`coevo.context`), so a method that leans on a service its family
does not offer fails at once, in its tests on a fake context too, instead of on someone else's workload.
"""

from __future__ import annotations

from typing import Any

from coevo.family import protocol_members


class ContextView:
    """`provider` narrowed to the members of the context protocol `protocol`."""

    def __init__(self, provider: object, protocol: type) -> None:
        object.__setattr__(self, "_provider", provider)
        object.__setattr__(self, "_protocol", protocol)
        object.__setattr__(self, "_members", protocol_members(protocol))

    def __getattr__(self, name: str) -> Any:
        if name not in self._members:
            raise AttributeError(f"{self._protocol.__name__} offers no {name!r}")
        return getattr(self._provider, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a method cannot replace the context's {name!r}")
