"""The Python client of a tierlog cluster: producer, consumer and admin, as in Kafka's clients.

Each client talks to brokers through a :class:`~tierlog.server.transport.Transport` (an
embedded cluster's ``transport``, or a network front end's) and takes its settings under
Kafka's names (``linger.ms``, ``auto.offset.reset``...)::

    with Producer(cluster.transport, {"compression.type": "zstd"}) as producer:
        producer.send("events", b"value", key=b"user-1").result()
    consumer = Consumer(cluster.transport, {"auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("events", 0)])
    records = consumer.poll(timeout_ms=1000)
"""

from __future__ import annotations

from .admin import (
    Admin,
    AlterConfig,
    ConfigResource,
    ConfigResourceType,
    ListedOffset,
    NewPartitions,
    NewTopic,
    PartitionReassignment,
)
from .config import AdminConfig, ConsumerConfig, ProducerConfig
from .consumer import Consumer
from .errors import ClientClosedError, DeliveryTimeoutError, NoOffsetForPartitionError
from .metadata import PartitionInfo, TopicInfo
from .producer import Producer
from .records import ConsumerRecord, RecordMetadata

__all__ = [
    "Admin",
    "AdminConfig",
    "AlterConfig",
    "ClientClosedError",
    "ConfigResource",
    "ConfigResourceType",
    "Consumer",
    "ConsumerConfig",
    "ConsumerRecord",
    "DeliveryTimeoutError",
    "ListedOffset",
    "NewPartitions",
    "NewTopic",
    "NoOffsetForPartitionError",
    "PartitionInfo",
    "PartitionReassignment",
    "Producer",
    "ProducerConfig",
    "RecordMetadata",
    "TopicInfo",
]
