"""Which module answers which request: the broker's one table of request types to handlers.

Kept apart from ``broker.py`` so the broker's life cycle and the list of what it answers can be
read separately; every handler is a function of the broker and the request, in its own module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BrokerNotAvailableError
from ..groups.protocol import GroupRequest
from . import configs as config_ops
from . import protocol as p
from .controller_apis import allocate_producer_ids, alter_partition, controlled_shutdown
from .delete_records import delete_records
from .describe_cluster import describe_cluster
from .fetch_request import fetch
from .hosting import leader_and_isr, stop_replica
from .init_producer_id import init_producer_id
from .list_offsets import list_offsets
from .metadata import metadata
from .offsets_for_leader_epoch import offsets_for_leader_epoch
from .produce import produce
from .update_metadata import receive_update_metadata
from .write_txn_markers import write_txn_markers

if TYPE_CHECKING:
    from .broker import Broker


def dispatch(broker: Broker, request: p.Request | GroupRequest) -> p.Response:
    """The answer of the handler for ``request``'s type (topic and config changes go to the
    controller, group requests to the group coordinator)."""
    controller = broker.controller
    match request:
        case GroupRequest():
            coordinator = broker.group_coordinator
            if coordinator is None:
                raise BrokerNotAvailableError(f"broker {broker.broker_id} is not serving")
            answer: p.Response = coordinator.handle(request)
            return answer
        case p.ProduceRequest():
            return produce(broker, request)
        case p.FetchRequest():
            return fetch(broker, request)
        case p.ListOffsetsRequest():
            return list_offsets(broker, request)
        case p.MetadataRequest():
            return metadata(broker, request)
        case p.CreateTopicsRequest():
            return controller.create_topics(request)
        case p.DeleteTopicsRequest():
            return controller.delete_topics(request)
        case p.CreatePartitionsRequest():
            return controller.create_partitions(request)
        case p.ElectLeadersRequest():
            return controller.elect_leaders(request)
        case p.AlterPartitionReassignmentsRequest():
            return controller.alter_partition_reassignments(request)
        case p.ListPartitionReassignmentsRequest():
            return controller.list_partition_reassignments(request)
        case p.DeleteRecordsRequest():
            return delete_records(broker, request)
        case p.InitProducerIdRequest():
            return init_producer_id(broker, request)
        case p.OffsetsForLeaderEpochRequest():
            return offsets_for_leader_epoch(broker, request)
        case p.WriteTxnMarkersRequest():
            return write_txn_markers(broker, request)
        case p.DescribeConfigsRequest():
            return config_ops.describe_configs(request, broker.broker_id, broker.config, controller)
        case p.IncrementalAlterConfigsRequest():
            return config_ops.alter_configs(request, broker.broker_id, broker.config, controller)
        case p.DescribeClusterRequest():
            return describe_cluster(broker, request)
        case p.LeaderAndIsrRequest():
            return leader_and_isr(broker, request)
        case p.StopReplicaRequest():
            return stop_replica(broker, request)
        case p.UpdateMetadataRequest():
            return receive_update_metadata(broker, request)
        case p.AlterPartitionRequest():
            return alter_partition(broker, request)
        case p.AllocateProducerIdsRequest():
            return allocate_producer_ids(broker, request)
        case p.ControlledShutdownRequest():
            return controlled_shutdown(broker, request)
    raise AssertionError(f"no handler for {type(request).__name__}")
