"""DescribeCluster: the cluster id, the controller and the live brokers, from the image.

The brokers are listed exactly as Metadata lists them (``metadata.broker_endpoints``). A broker
serves only broker endpoints: asking it for the controllers' is MISMATCHED_ENDPOINT_TYPE and an
unknown endpoint type UNSUPPORTED_ENDPOINT_TYPE, as Kafka's ``KafkaApis.handleDescribeCluster``
answers. tierlog has no authorizer, so ``cluster_authorized_operations`` is never reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import MismatchedEndpointTypeError, UnsupportedEndpointTypeError
from . import protocol as p
from .metadata import broker_endpoints

if TYPE_CHECKING:
    from .broker import Broker


def describe_cluster(
    broker: Broker, request: p.DescribeClusterRequest
) -> p.DescribeClusterResponse:
    if request.endpoint_type == p.EndpointType.CONTROLLER:
        return p.DescribeClusterResponse(
            MismatchedEndpointTypeError.code or -1,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            "type CONTROLLER",
            request.endpoint_type,
        )
    if request.endpoint_type != p.EndpointType.BROKER:
        return p.DescribeClusterResponse(
            UnsupportedEndpointTypeError.code or -1,
            f"Unsupported endpoint type {request.endpoint_type}",
            request.endpoint_type,
        )
    image = broker.controller.image()
    return p.DescribeClusterResponse(
        endpoint_type=request.endpoint_type,
        cluster_id=image.cluster_id,
        controller_id=image.controller_id,
        brokers=[
            p.DescribeClusterBroker(b.node_id, b.host, b.port, b.rack)
            for b in broker_endpoints(broker, image)
        ],
    )
