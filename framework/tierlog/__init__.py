"""tierlog: Kafka-style tiered log storage for Python.

Plugin authors need only ``hookimpl`` (to mark hook implementations) and the domain model.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "tierlog"
#: The entry point group plugins register under: ``[project.entry-points.tierlog]``.
ENTRY_POINT_GROUP = "tierlog"

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = ["ENTRY_POINT_GROUP", "PROJECT_NAME", "hookimpl"]
