"""FindCoordinator: which broker coordinates a group (batched keys from v4).

The coordinator of a group is the leader of its partition of ``__consumer_offsets``, which is
created on the first lookup. The broker answers with the node id; the wire front end fills in
the address that node advertises on the listener the client used. Transaction coordinators
(key type 1) do not exist in tierlog: COORDINATOR_NOT_AVAILABLE, as a Kafka cluster answers
while its coordinator is unavailable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CoordinatorNotAvailableError, InvalidRequestError, TierlogError
from ..model import TopicPartition
from ..server.internal_topics import CONSUMER_OFFSETS_TOPIC
from . import protocol as gp
from .dispatch import register_handler

if TYPE_CHECKING:
    from .runtime import GroupCoordinator

_NOT_AVAILABLE = CoordinatorNotAvailableError.code or 15
_INVALID_REQUEST = InvalidRequestError.code or 42
NO_TRANSACTION_COORDINATOR = "tierlog has no transaction coordinator"


def find_coordinator(
    coordinator: GroupCoordinator, request: gp.FindCoordinatorRequest
) -> gp.FindCoordinatorResponse:
    if request.key_type == gp.CoordinatorType.TRANSACTION:
        return _all(request, _NOT_AVAILABLE, NO_TRANSACTION_COORDINATOR)
    if request.key_type != gp.CoordinatorType.GROUP:
        return _all(request, _INVALID_REQUEST, f"unknown coordinator key type {request.key_type}")
    try:
        coordinator.ensure_offsets_topic()
    except TierlogError as err:
        return _all(request, _NOT_AVAILABLE, str(err))
    image = coordinator.broker.controller.image()
    answers = []
    for key in request.coordinator_keys:
        if not key:
            answers.append(
                gp.Coordinator(key, error_code=_INVALID_REQUEST, error_message="empty group id")
            )
            continue
        tp = TopicPartition(CONSUMER_OFFSETS_TOPIC, coordinator.partition_for(key))
        registration = image.registration(tp)
        leader = registration.leader if registration is not None else -1
        if leader < 0 or leader not in image.live_brokers:
            answers.append(
                gp.Coordinator(key, error_code=_NOT_AVAILABLE, error_message=f"{tp} has no leader")
            )
        else:
            answers.append(gp.Coordinator(key, node_id=leader))
    return gp.FindCoordinatorResponse(answers)


def _all(request: gp.FindCoordinatorRequest, code: int, message: str) -> gp.FindCoordinatorResponse:
    return gp.FindCoordinatorResponse(
        [
            gp.Coordinator(k, error_code=code, error_message=message)
            for k in request.coordinator_keys
        ]
    )


register_handler(gp.FindCoordinatorRequest, find_coordinator, _all)
