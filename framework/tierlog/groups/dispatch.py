"""Which function answers each group request, and what a failed one is answered.

Handlers register here by request type (the classic protocol, offsets, administration, and any
other group type's requests); the coordinator looks them up. A handler answers every error it
expects with Kafka's codes itself; ``error`` builds the answer for one it did not expect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

Handler = Callable[["GroupCoordinator", Any], Any]
ErrorAnswer = Callable[[Any, int, str], Any]


@attrs.frozen
class Route:
    handle: Handler
    error: ErrorAnswer


ROUTES: dict[type[Any], Route] = {}


def register_handler(request_type: type[Any], handle: Handler, error: ErrorAnswer) -> None:
    """``handle(coordinator, request)`` answers ``request_type``; ``error(request, code,
    message)`` answers one whose handler failed unexpectedly."""
    ROUTES[request_type] = Route(handle, error)
