"""A real fsspec filesystem, registered under its own protocol, that fails when told to.

It is an in-memory filesystem with a script of failures (``FlakyFileSystem.plan``) and a record
of every write, so tests can drive transient and permanent backend errors, and check the order
of writes, through the plugin's ordinary "any registered fsspec protocol" support.
"""

from __future__ import annotations

import fnmatch
import uuid
from typing import Any, ClassVar

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

PROTOCOL = "tierlogflaky"


class FlakyFileSystem(MemoryFileSystem):
    protocol = PROTOCOL
    store: ClassVar[dict[str, Any]] = {}  # type: ignore[misc]
    pseudo_dirs: ClassVar[list[str]] = [""]  # type: ignore[misc]
    #: (pattern, exception) pairs, consumed in order: the first call whose "<operation> <path>"
    #: matches the next pattern (fnmatch, e.g. "put *.rsm-manifest") raises the exception.
    plan: ClassVar[list[tuple[str, BaseException]]] = []
    #: (operation, path) of every write and delete, in order.
    log: ClassVar[list[tuple[str, str]]] = []

    def _maybe_fail(self, operation: str, path: str) -> None:
        path = self._strip_protocol(path)
        if operation != "get":
            FlakyFileSystem.log.append((operation, path))
        if self.plan and fnmatch.fnmatchcase(f"{operation} {path}", self.plan[0][0]):
            raise self.plan.pop(0)[1]

    def cat_file(
        self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any
    ) -> bytes:
        self._maybe_fail("get", path)
        return super().cat_file(path, start=start, end=end, **kwargs)  # type: ignore[no-any-return]

    def open(self, path: str, mode: str = "rb", *args: Any, **kwargs: Any) -> Any:
        """Every write (pipe_file, put_file, open) comes through here."""
        if "w" in mode:
            self._maybe_fail("put", path)
        return super().open(path, mode, *args, **kwargs)

    def rm_file(self, path: str) -> None:
        self._maybe_fail("delete", path)
        super().rm_file(path)

    @classmethod
    def reset(cls) -> None:
        cls.store.clear()
        cls.pseudo_dirs[:] = [""]
        cls.plan.clear()
        cls.log.clear()


def register() -> str:
    """Register the protocol and return a fresh URL on it."""
    fsspec.register_implementation(PROTOCOL, FlakyFileSystem, clobber=True)
    FlakyFileSystem.reset()
    return f"{PROTOCOL}://run-{uuid.uuid4().hex}/tiered"
