"""How the kit words a broken contract: the hook, the rule it breaks, and what happened instead.

A plugin author reading a failed run should learn which promise of ``tierlog.hookspecs`` their
plugin does not keep without reading the kit's source, so every check names the hook and the rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class ContractViolation(AssertionError):
    """A plugin did not do what a hook's contract says."""

    def __init__(self, hook: str, rule: str, got: object) -> None:
        self.hook = hook
        self.rule = rule
        self.got = got
        super().__init__(f"contract {hook}: {rule}; got {got}")


def check(condition: object, hook: str, rule: str, got: object) -> None:
    """Raise ContractViolation unless ``condition`` holds."""
    if not condition:
        raise ContractViolation(hook, rule, got)


def check_equal(actual: object, expected: object, hook: str, rule: str) -> None:
    """Raise ContractViolation, showing both values, unless ``actual == expected``."""
    if actual != expected:
        raise ContractViolation(hook, rule, f"{_short(actual)}, expected {_short(expected)}")


@contextmanager
def expect_error(error: type[BaseException], hook: str, rule: str) -> Iterator[None]:
    """The block must raise ``error``; nothing, or another exception, breaks the contract."""
    try:
        yield
    except error:
        return
    except Exception as err:
        raise ContractViolation(hook, rule, f"{type(err).__name__}: {err}") from err
    raise ContractViolation(hook, rule, "no error")


def _short(value: object, limit: int = 300) -> str:
    if isinstance(value, bytes | bytearray):
        text = f"{len(value)} bytes {bytes(value[:24])!r}{'...' if len(value) > 24 else ''}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
