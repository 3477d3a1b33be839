"""DescribeCluster answers from the image, listing brokers exactly as Metadata does."""

from __future__ import annotations

from tierlog.cluster import EmbeddedCluster
from tierlog.errors import MismatchedEndpointTypeError, UnsupportedEndpointTypeError
from tierlog.server import protocol as p

from .conftest import Client


def describe(cluster: EmbeddedCluster, broker_id: int, **fields: int) -> p.DescribeClusterResponse:
    return cluster.transport.send(broker_id, p.DescribeClusterRequest(**fields))


def test_the_live_brokers_as_metadata_lists_them(cluster: EmbeddedCluster, client: Client) -> None:
    answer = describe(cluster, 1)

    assert answer.error_code == p.NONE and answer.error_message is None
    assert answer.cluster_id == cluster.controller.cluster_id
    assert answer.controller_id == 0
    assert answer.endpoint_type == p.EndpointType.BROKER
    assert answer.cluster_authorized_operations == p.CLUSTER_AUTHORIZED_OPERATIONS_OMITTED
    listed = [(b.node_id, b.host, b.port, b.rack) for b in client.metadata().brokers]
    assert [(b.broker_id, b.host, b.port, b.rack) for b in answer.brokers] == listed
    assert [b.broker_id for b in answer.brokers] == [0, 1, 2]

    cluster.stop_broker(0)

    after = describe(cluster, 2)
    assert [b.broker_id for b in after.brokers] == [1, 2]
    assert after.controller_id == 1


def test_a_broker_serves_no_controller_endpoints(cluster: EmbeddedCluster) -> None:
    controllers = describe(cluster, 0, endpoint_type=p.EndpointType.CONTROLLER)
    unknown = describe(cluster, 0, endpoint_type=9)

    assert controllers.error_code == MismatchedEndpointTypeError.code
    assert controllers.brokers == ()
    assert unknown.error_code == UnsupportedEndpointTypeError.code
    assert unknown.error_message == "Unsupported endpoint type 9"
