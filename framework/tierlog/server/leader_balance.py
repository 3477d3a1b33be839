"""Automatic preferred leader election: leadership goes back where placement put it.

After a broker crashes or shuts down, its leaderships move to other replicas and stay there
when it comes back, so a few brokers end up leading most partitions. As Kafka's controller
does (``auto.leader.rebalance.enable``, default on), the controller checks every
``leader.imbalance.check.interval.seconds`` how many of
the partitions each broker is the preferred replica of (the first of the assignment) it does
not lead. Where that share is over ``leader.imbalance.per.broker.percentage``, the broker is
elected leader again of every such partition it can lead without losing data: it is alive and
in the ISR, and the partition is not being reassigned.

Unlike Kafka's, whose first check comes 5 s after it takes office, a new controller waits one
whole interval: the failover that made it controller has just moved leaders, and the brokers it
moved them from are rarely back in sync that soon.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from ..config import BrokerConfig
from ..model import TopicPartition
from . import protocol as p
from .image import ClusterImage

log = logging.getLogger(__name__)


def imbalance(image: ClusterImage) -> dict[int, tuple[int, list[TopicPartition]]]:
    """Per preferred broker: how many partitions prefer it, and those it does not lead."""
    preferred: dict[int, int] = defaultdict(int)
    not_led: dict[int, list[TopicPartition]] = defaultdict(list)
    for name, topic in image.topics.items():
        for index, reg in enumerate(topic.partitions):
            if not reg.replicas or reg.reassigning:
                continue
            first = reg.replicas[0]
            preferred[first] += 1
            if reg.leader != first:
                not_led[first].append(TopicPartition(name, index))
    return {broker: (total, not_led.get(broker, [])) for broker, total in preferred.items()}


def partitions_to_rebalance(image: ClusterImage, percentage: int) -> list[TopicPartition]:
    """The partitions to hand back to their preferred replica, Kafka's way: only for brokers
    whose imbalance ratio is over ``percentage``, and only where that replica is alive and in
    sync (electing it loses nothing)."""
    chosen: list[TopicPartition] = []
    for broker, (total, not_led) in sorted(imbalance(image).items()):
        if broker not in image.live_brokers or not not_led:
            continue
        if len(not_led) / total <= percentage / 100:
            continue
        for tp in not_led:
            topic = image.topic(tp.topic)
            reg = None if topic is None else topic.partition(tp.partition)
            if reg is not None and broker in reg.isr:
                chosen.append(tp)
    return sorted(chosen)


def rebalance_request(partitions: list[TopicPartition]) -> p.ElectLeadersRequest:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return p.ElectLeadersRequest(
        p.ElectionType.PREFERRED,
        tuple(p.TopicPartitions(topic, tuple(ps)) for topic, ps in sorted(by_topic.items())),
    )


class LeaderBalancer:
    """The controller's periodic check; runs from :meth:`start` until :meth:`stop`.

    ``image`` reads the controller's current image and ``elect`` is its ElectLeaders; both
    are called on the balancer's own thread, never under a lock of the caller's.
    """

    def __init__(
        self,
        image: Callable[[], ClusterImage],
        elect: Callable[[p.ElectLeadersRequest], p.ElectLeadersResponse],
        *,
        interval_s: float,
        percentage: int,
    ) -> None:
        self._image = image
        self._elect = elect
        self.interval_s = interval_s
        self.percentage = percentage
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-balancer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10)

    def check(self) -> list[TopicPartition]:
        """One check: the partitions whose preferred replica was elected."""
        partitions = partitions_to_rebalance(self._image(), self.percentage)
        if not partitions:
            return []
        response = self._elect(rebalance_request(partitions))
        elected = [
            TopicPartition(result.topic, answer.partition_id)
            for result in response.replica_election_results
            for answer in result.partition_result
            if answer.error_code == p.NONE
        ]
        if elected:
            log.info(
                "auto leader rebalance: preferred replicas lead %d partition(s) again", len(elected)
            )
        return elected

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:
                log.exception("auto leader rebalance failed; trying again in %ss", self.interval_s)


def leader_balancer(
    config: BrokerConfig,
    image: Callable[[], ClusterImage],
    elect: Callable[[p.ElectLeadersRequest], p.ElectLeadersResponse],
) -> LeaderBalancer | None:
    """The balancer ``config`` asks for, not yet started; None with the feature off."""
    if not config.get_bool("auto.leader.rebalance.enable"):
        return None
    return LeaderBalancer(
        image,
        elect,
        interval_s=float(config.get_int("leader.imbalance.check.interval.seconds")),
        percentage=config.get_int("leader.imbalance.per.broker.percentage"),
    )
