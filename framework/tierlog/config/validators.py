"""Value validators for configuration keys.

Each validator carries a human description ("at least 1", "one of 'delete', 'compact'") that is
used both in the generated documentation (``tierlog config``) and in error messages
(``... must be at least 1``), so the two can never disagree. Validators only see already-typed
values; type conversion happens before them, and null values of nullable keys skip them.
"""

from __future__ import annotations

import abc

import attrs

from .secrets import show_value


class Validator(abc.ABC):
    """Accepts or rejects one typed value; ``description`` completes the phrase "must be ..."."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """What is allowed, phrased to follow "must be"."""

    @abc.abstractmethod
    def accepts(self, value: object) -> bool:
        """Whether ``value`` is allowed."""


def _as_number(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


@attrs.frozen
class AtLeast(Validator):
    minimum: int | float

    @property
    def description(self) -> str:
        return f"at least {show_value(self.minimum)}"

    def accepts(self, value: object) -> bool:
        number = _as_number(value)
        return number is not None and number >= self.minimum


@attrs.frozen
class AtMost(Validator):
    maximum: int | float

    @property
    def description(self) -> str:
        return f"at most {show_value(self.maximum)}"

    def accepts(self, value: object) -> bool:
        number = _as_number(value)
        return number is not None and number <= self.maximum


@attrs.frozen
class Between(Validator):
    minimum: int | float
    maximum: int | float

    @property
    def description(self) -> str:
        return f"between {show_value(self.minimum)} and {show_value(self.maximum)} inclusive"

    def accepts(self, value: object) -> bool:
        number = _as_number(value)
        return number is not None and self.minimum <= number <= self.maximum


@attrs.frozen
class OneOf(Validator):
    choices: tuple[object, ...]

    @property
    def description(self) -> str:
        if len(self.choices) == 1:
            return show_value(self.choices[0])
        return "one of " + ", ".join(show_value(choice) for choice in self.choices)

    def accepts(self, value: object) -> bool:
        return any(type(value) is type(choice) and value == choice for choice in self.choices)


@attrs.frozen
class ListOf(Validator):
    item: Validator

    @property
    def description(self) -> str:
        return f"a list whose items are each {self.item.description}"

    def accepts(self, value: object) -> bool:
        return isinstance(value, tuple) and all(self.item.accepts(item) for item in value)


@attrs.frozen
class NonEmpty(Validator):
    @property
    def description(self) -> str:
        return "non-empty"

    def accepts(self, value: object) -> bool:
        return isinstance(value, (str, tuple)) and len(value) > 0


@attrs.frozen
class AnyOf(Validator):
    options: tuple[Validator, ...]

    @property
    def description(self) -> str:
        return " or ".join(option.description for option in self.options)

    def accepts(self, value: object) -> bool:
        return any(option.accepts(value) for option in self.options)


def at_least(minimum: int | float) -> Validator:
    """Numbers greater than or equal to ``minimum``."""
    return AtLeast(minimum)


def at_most(maximum: int | float) -> Validator:
    """Numbers less than or equal to ``maximum``."""
    return AtMost(maximum)


def between(minimum: int | float, maximum: int | float) -> Validator:
    """Numbers in the closed range ``[minimum, maximum]``."""
    return Between(minimum, maximum)


def one_of(*choices: object) -> Validator:
    """Exactly one of the given values (same type, so ``1`` never matches ``True``)."""
    if not choices:
        raise ValueError("one_of() needs at least one choice")
    return OneOf(choices)


def list_of(item: Validator) -> Validator:
    """A list whose every item passes ``item``."""
    return ListOf(item)


def non_empty() -> Validator:
    """A string or list with at least one element."""
    return NonEmpty()


def any_of(*options: Validator) -> Validator:
    """Values that pass at least one of ``options``."""
    if not options:
        raise ValueError("any_of() needs at least one validator")
    return AnyOf(options)
