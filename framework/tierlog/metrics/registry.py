"""The registry of named metrics, and the tagged views plugins get of it.

Creation is get-or-create, as in Kafka's metrics groups: every component asks for
``registry.meter(name)`` when it needs the meter, and the first call creates it. Asking for a
name that exists as another kind is a programming error and fails loudly (``MetricKindError``).

Plugins never see the registry itself. Each gets a ``MetricsView`` (KIP-877's ``PluginMetrics``)
that adds its own tags to every metric it creates and refuses names that would set those tags to
something else, so one plugin cannot overwrite or remove another's metrics; closing the view
removes exactly the metrics it created.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from tierlog.errors import LifecycleError, MetricKindError

from .kinds import Clock, Counter, Gauge, Histogram, Meter, Metric, MetricValue, Number, Timer
from .name import MetricName, TagsLike, TagValue, freeze_tags

M = TypeVar("M", bound=Metric)


class MetricsScope(Protocol):
    """What a component needs to create and drop metrics: a registry or a view of one."""

    def counter(self, name: MetricName) -> Counter: ...
    def meter(self, name: MetricName) -> Meter: ...
    def gauge(self, name: MetricName, fn: Callable[[], Number] | None = None) -> Gauge: ...
    def histogram(self, name: MetricName) -> Histogram: ...
    def timer(self, name: MetricName) -> Timer: ...
    def remove(self, name: MetricName) -> bool: ...
    def view(self, **tags: TagValue) -> MetricsView: ...


class MetricsRegistry:
    """All metrics of one runtime, keyed by ``MetricName``; safe to use from many threads.

    ``clock`` (seconds, ``time.monotonic`` by default) drives meter rates and timers; tests pass
    a fake one. A metric removed from the registry keeps working for whoever still holds it but
    is no longer read or exported; asking for its name again creates a fresh one.

    Deliberately not a container (no ``len``): an empty registry must stay truthy, so
    ``metrics or MetricsRegistry()`` never swaps a caller's registry for a new one.
    """

    def __init__(self, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._metrics: dict[MetricName, Metric] = {}

    @property
    def clock(self) -> Clock:
        return self._clock

    # --- creation (get-or-create) -------------------------------------------------------------

    def _get_or_create(self, name: MetricName, kind: type[M], factory: Callable[[], M]) -> M:
        if not isinstance(name, MetricName):
            raise TypeError(f"metrics are named by MetricName, got {name!r}")
        with self._lock:
            existing = self._metrics.get(name)
            if existing is None:
                created = factory()
                self._metrics[name] = created
                return created
        if type(existing) is not kind:
            raise MetricKindError(name, existing.kind, kind.kind)
        return existing

    def counter(self, name: MetricName) -> Counter:
        return self._get_or_create(name, Counter, Counter)

    def meter(self, name: MetricName) -> Meter:
        return self._get_or_create(name, Meter, lambda: Meter(self._clock))

    def gauge(self, name: MetricName, fn: Callable[[], Number] | None = None) -> Gauge:
        """The gauge ``name``; when ``fn`` is given it becomes the gauge's function.

        The latest function wins, so a partition that regains leadership can register its gauge
        again over fresh state.
        """
        gauge = self._get_or_create(name, Gauge, Gauge)
        if fn is not None:
            gauge.set_function(fn)
        return gauge

    def histogram(self, name: MetricName) -> Histogram:
        return self._get_or_create(name, Histogram, Histogram)

    def timer(self, name: MetricName) -> Timer:
        return self._get_or_create(name, Timer, lambda: Timer(self._clock))

    # --- removal ------------------------------------------------------------------------------

    def remove(self, name: MetricName) -> bool:
        """Drop one metric; False if it was not registered."""
        with self._lock:
            return self._metrics.pop(name, None) is not None

    def remove_matching(
        self,
        *,
        group: str | None = None,
        name: str | None = None,
        tags: TagsLike | None = None,
    ) -> int:
        """Drop every metric with this group, name and (at least) these tags; returns how many.

        A partition leaving leadership drops its metrics with ``tags={"topic": t, "partition":
        p}``. At least one criterion is required, so a forgotten argument cannot drop everything.
        """
        if group is None and name is None and not freeze_tags(tags):
            raise ValueError("remove_matching needs a group, a name or tags")
        with self._lock:
            doomed = [n for n in self._metrics if n.matches(group=group, name=name, tags=tags)]
            for metric_name in doomed:
                del self._metrics[metric_name]
        return len(doomed)

    # --- reading ------------------------------------------------------------------------------

    def get(self, name: MetricName) -> Metric | None:
        with self._lock:
            return self._metrics.get(name)

    def items(self) -> list[tuple[MetricName, Metric]]:
        """Every metric with its name, sorted by name; a copy, safe to use while others update."""
        with self._lock:
            return sorted(self._metrics.items(), key=lambda item: item[0])

    def names(self) -> list[MetricName]:
        return [name for name, _ in self.items()]

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._metrics

    def snapshot(self) -> dict[MetricName, MetricValue]:
        """Every metric's current value: a number, or a dict for meters, histograms and timers.

        Gauge functions run here, outside the registry's lock, and their errors propagate.
        """
        return {name: metric.snapshot() for name, metric in self.items()}

    def value(self, group: str, name: str, /, **tags: TagValue) -> MetricValue:
        """The current value of one metric, for assertions: ``value("G", "N", topic="t")``."""
        metric_name = MetricName(group, name, tags)
        metric = self.get(metric_name)
        if metric is None:
            raise KeyError(f"no metric {metric_name}")
        return metric.snapshot()

    # --- views --------------------------------------------------------------------------------

    def view(self, **tags: TagValue) -> MetricsView:
        """A view that adds ``tags`` to every metric created through it."""
        return MetricsView(self, freeze_tags(tags))

    def for_plugin(self, plugin: str, *roles: str) -> MetricsView:
        """The view handed to one plugin: tags ``plugin=<plugin>`` and, when the plugin fills
        roles, ``role=<roles, sorted, comma-separated>`` (KIP-877's ``config``/``class`` tags).
        """
        tags: dict[str, TagValue] = {"plugin": plugin}
        if roles:
            tags["role"] = ",".join(sorted(set(roles)))
        return MetricsView(self, freeze_tags(tags))


class MetricsView:
    """A registry seen through fixed tags: the metrics one plugin (or component) owns.

    Every metric created through the view carries the view's tags; a name that sets one of them
    to another value is refused. ``close()`` removes every metric the view created (and those of
    its child views) and makes further creation fail, so a closed plugin cannot leak metrics.
    """

    def __init__(self, registry: MetricsRegistry, tags: tuple[tuple[str, str], ...]) -> None:
        self._registry = registry
        self._tags = tags
        self._lock = threading.Lock()
        self._owned: set[MetricName] = set()
        self._children: list[MetricsView] = []
        self._closed = False

    @property
    def tags(self) -> dict[str, str]:
        return dict(self._tags)

    @property
    def closed(self) -> bool:
        return self._closed

    def names(self) -> list[MetricName]:
        """The full names (with this view's tags) of the metrics created through this view."""
        with self._lock:
            return sorted(self._owned)

    def scoped(self, name: MetricName) -> MetricName:
        """``name`` with this view's tags added; refuses a tag that contradicts the view's."""
        own = name.tag_dict
        for key, value in self._tags:
            if own.get(key, value) != value:
                raise ValueError(
                    f"metric {name} sets tag {key}={own[key]!r}, but this view owns {key}={value!r}"
                )
        return name.with_tags(self._tags)

    def _claim(self, name: MetricName, create: Callable[[MetricName], M]) -> M:
        full = self.scoped(name)
        with self._lock:
            if self._closed:
                raise LifecycleError(f"metrics view {self._tags} is closed; cannot create {name}")
            metric = create(full)
            self._owned.add(full)
            return metric

    def counter(self, name: MetricName) -> Counter:
        return self._claim(name, self._registry.counter)

    def meter(self, name: MetricName) -> Meter:
        return self._claim(name, self._registry.meter)

    def gauge(self, name: MetricName, fn: Callable[[], Number] | None = None) -> Gauge:
        return self._claim(name, lambda full: self._registry.gauge(full, fn))

    def histogram(self, name: MetricName) -> Histogram:
        return self._claim(name, self._registry.histogram)

    def timer(self, name: MetricName) -> Timer:
        return self._claim(name, self._registry.timer)

    def remove(self, name: MetricName) -> bool:
        """Drop one of this view's metrics, named without or with the view's tags."""
        full = self.scoped(name)
        with self._lock:
            if full not in self._owned:
                return False
            self._owned.discard(full)
        return self._registry.remove(full)

    def view(self, **tags: TagValue) -> MetricsView:
        """A child view with more tags (e.g. a topic); closed together with this one."""
        extra = freeze_tags(tags)
        mine = dict(self._tags)
        for key, value in extra:
            if mine.get(key, value) != value:
                raise ValueError(f"this view already owns tag {key}={mine[key]!r}")
        child = MetricsView(self._registry, freeze_tags({**mine, **dict(extra)}))
        with self._lock:
            if self._closed:
                raise LifecycleError(f"metrics view {self._tags} is closed")
            self._children.append(child)
        return child

    def close(self) -> None:
        """Remove every metric created through this view and its children. Idempotent."""
        with self._lock:
            self._closed = True
            owned, self._owned = self._owned, set()
            children, self._children = self._children, []
        for child in children:
            child.close()
        for name in owned:
            self._registry.remove(name)

    def __enter__(self) -> MetricsView:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._owned)} metrics"
        return f"MetricsView({self.tags}, {state})"
