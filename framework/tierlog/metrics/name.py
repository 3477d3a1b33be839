"""Metric names: a group, a name and tags, as Kafka's ``MetricName``.

A Kafka operator knows ``kafka.server:type=BrokerTopicMetrics,name=RemoteCopyBytesPerSec,topic=t``.
tierlog keeps the same parts: the ``type`` is the group, the ``name`` is the name, and the other
key properties are tags. Names are values (frozen, hashable, ordered) so they key the registry and
sort the same way in every export.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

TagValue = str | int
#: Tags as given by callers; values are checked at run time (strings or ints only), so a
#: literal such as ``{"topic": t, "partition": 0}`` type-checks without annotations.
TagsLike = Mapping[str, object] | Iterable[tuple[str, object]]


def freeze_tags(tags: TagsLike | None) -> tuple[tuple[str, str], ...]:
    """Tags as a sorted tuple of ``(key, value)`` string pairs, so equal tag sets compare equal.

    Integer values (partition numbers, broker ids) become strings, as Kafka tags are strings.
    """
    if tags is None:
        return ()
    pairs = list(tags.items()) if isinstance(tags, Mapping) else list(tags)
    frozen: dict[str, str] = {}
    for key, value in pairs:
        if not isinstance(key, str) or not key:
            raise ValueError(f"metric tag keys must be non-empty strings, got {key!r}")
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError(f"metric tag {key!r} must be a string or an int, got {value!r}")
        if key in frozen:
            raise ValueError(f"metric tag {key!r} given twice")
        frozen[key] = str(value)
    return tuple(sorted(frozen.items()))


def _non_empty(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"metric {attribute.name} must be a non-empty string, got {value!r}")


@attrs.frozen(order=True)
class MetricName:
    """The identity of one metric: ``MetricName("BrokerTopicMetrics", "RemoteCopyBytesPerSec",
    {"topic": "t"})``.

    ``tags`` accepts a mapping or ``(key, value)`` pairs and is stored as a sorted tuple of pairs.
    """

    group: str = attrs.field(validator=_non_empty)
    name: str = attrs.field(validator=_non_empty)
    tags: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=freeze_tags)

    @property
    def tag_dict(self) -> dict[str, str]:
        """The tags as a new dict, for lookups and labels."""
        return dict(self.tags)

    def with_tags(self, tags: TagsLike) -> MetricName:
        """This name with ``tags`` added; a tag already present takes the new value."""
        return attrs.evolve(self, tags={**self.tag_dict, **dict(freeze_tags(tags))})

    def matches(
        self,
        *,
        group: str | None = None,
        name: str | None = None,
        tags: TagsLike | None = None,
    ) -> bool:
        """Whether this name has the given group, name and (at least) the given tags."""
        if group is not None and self.group != group:
            return False
        if name is not None and self.name != name:
            return False
        return set(freeze_tags(tags)) <= set(self.tags)

    def __str__(self) -> str:
        """The JMX-style key list an operator would recognise: ``type=G,name=N,k=v``."""
        parts = [f"type={self.group}", f"name={self.name}"]
        parts.extend(f"{key}={value}" for key, value in self.tags)
        return ",".join(parts)
