"""InitProducerId: a producer's id and epoch, from this broker's block of producer ids.

Kafka answers InitProducerId in its transaction coordinator. For an idempotent producer (no
``transactional_id``) it gives a fresh id with epoch 0 on every call, also when the request
names the id and epoch the producer already has (KIP-360's bump): a new id starts every
sequence afresh just as a new epoch would. tierlog does the same.

tierlog has no transaction coordinator yet, so a ``transactional_id`` is answered
INVALID_REQUEST with a message saying so. COORDINATOR_NOT_AVAILABLE, Kafka's answer while a
coordinator loads, would make clients retry for ever; INVALID_REQUEST fails them at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidRequestError, TierlogError, error_code_of
from . import protocol as p
from .request_validation import check_init_producer_id

if TYPE_CHECKING:
    from .broker import Broker


def init_producer_id(broker: Broker, request: p.InitProducerIdRequest) -> p.InitProducerIdResponse:
    try:
        check_init_producer_id(request)
        if request.transactional_id is not None:
            raise InvalidRequestError(
                f"transactional id {request.transactional_id!r}: tierlog has no transaction "
                "coordinator; only idempotent producers (no transactional.id) are supported"
            )
        producer_id = broker.producer_id_manager.generate_producer_id()
    except TierlogError as err:
        return p.InitProducerIdResponse(error_code_of(err))
    return p.InitProducerIdResponse(producer_id=producer_id, producer_epoch=0)
