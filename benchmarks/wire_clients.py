"""The Kafka clients of ``wire_bench``, run in a child process so that a client's own Python
work never competes for the GIL with the server it measures: ``python -m
benchmarks.wire_clients '{"job": ..., ...}'`` prints one JSON object, the job's figures.

Every job takes ``bootstrap`` and ``topic``. Producers first send :data:`WARMUP` records and wait
for them (connections, metadata and the producer id are then in place), consumers first load the
topic's metadata: a figure is the steady rate, not the set-up.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

#: Distinct values cycled through, so the producer loop does not generate data.
_POOL = 256
#: Records each producer sends, and waits for, before its clock starts.
WARMUP = 1


def _values(size: int) -> list[bytes]:
    return [os.urandom(size) for _ in range(_POOL)]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- confluent-kafka ---------------------------------------------------------------------------


def confluent_produce(
    bootstrap: str, topic: str, count: int, size: int, idempotent: bool
) -> dict[str, Any]:
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_error(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            "linger.ms": 5,
            "delivery.report.only.error": True,
            "on_delivery": on_error,
        }
    )
    values = _values(size)
    for n in range(WARMUP):
        producer.produce(topic, values[n])
    producer.flush(30)
    produce, poll = producer.produce, producer.poll
    start = time.perf_counter()
    for n in range(count):
        while True:
            try:
                produce(topic, values[n % _POOL])
                break
            except BufferError:
                poll(0.001)
    left = producer.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} records undelivered, errors: {errors[:3]}")
    return {"seconds": elapsed, "records": count}


def confluent_consume(bootstrap: str, topic: str, partitions: int, count: int) -> dict[str, Any]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "wire-bench",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            # librdkafka pauses a partition's fetching for this long whenever its local queue
            # is full (1 s by default): the figure would then count the client's pauses.
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.list_topics(topic, timeout=30)
    got = 0
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    deadline = time.monotonic() + 600
    while got < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is not None:
                raise RuntimeError(f"consumer error: {message.error()}")
            got += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return {"seconds": elapsed, "records": got}


def confluent_latency(
    bootstrap: str, topic: str, rate: int, seconds: float, size: int, idempotent: bool
) -> dict[str, Any]:
    """Per-record produce latency (``produce()`` to acknowledgement) at a steady rate."""
    from confluent_kafka import Producer

    latencies: list[float] = []
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append(msg.latency())

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": idempotent,
            "linger.ms": 0,
            "on_delivery": on_delivery,
        }
    )
    values = _values(size)
    for n in range(100):
        producer.produce(topic, values[n])
    producer.flush(30)
    latencies.clear()
    total = int(rate * seconds)
    tick = 0.001  # records go out in 1 ms steps, rate/1000 at a time
    per_tick = max(1, rate // 1000)
    start = time.perf_counter()
    sent = 0
    while sent < total:
        due = start + (sent // per_tick) * tick
        delay = due - time.perf_counter()
        if delay > 0:
            producer.poll(delay)
            continue
        for _ in range(min(per_tick, total - sent)):
            producer.produce(topic, values[sent % _POOL])
            sent += 1
        producer.poll(0)
    achieved = total / (time.perf_counter() - start)
    left = producer.flush(60)
    if left or errors:
        raise RuntimeError(f"{left} records undelivered, errors: {errors[:3]}")
    return {
        "p50_ms": _quantile(latencies, 0.50) * 1000,
        "p99_ms": _quantile(latencies, 0.99) * 1000,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "records": len(latencies),
        "rate": achieved,
    }


# --- kafka-python ------------------------------------------------------------------------------


def kafka_python_produce(
    bootstrap: str, topic: str, count: int, size: int, idempotent: bool
) -> dict[str, Any]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent, linger_ms=5
    )
    values = _values(size)
    for n in range(WARMUP):
        producer.send(topic, values[n])
    producer.flush(30)
    send = producer.send
    start = time.perf_counter()
    futures = [send(topic, values[n % _POOL]) for n in range(count)]
    producer.flush(120)
    elapsed = time.perf_counter() - start
    failed = sum(1 for future in futures if not future.succeeded())
    producer.close()
    if failed:
        raise RuntimeError(f"{failed} records undelivered")
    return {"seconds": elapsed, "records": count}


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, count: int) -> dict[str, Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.partitions_for_topic(topic)
    assigned = [TopicPartition(topic, p) for p in range(partitions)]
    got = 0
    start = time.perf_counter()
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    deadline = time.monotonic() + 600
    while got < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000, max_records=10_000).values():
            got += len(records)
    elapsed = time.perf_counter() - start
    consumer.close()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return {"seconds": elapsed, "records": got}


# --- aiokafka ----------------------------------------------------------------------------------


async def _aiokafka_produce(
    bootstrap: str, topic: str, count: int, size: int, idempotent: bool
) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=idempotent, linger_ms=5
    )
    await producer.start()
    try:
        values = _values(size)
        for n in range(WARMUP):
            await (await producer.send(topic, values[n]))
        start = time.perf_counter()
        futures = [await producer.send(topic, values[n % _POOL]) for n in range(count)]
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - start
    finally:
        await producer.stop()
    return {"seconds": elapsed, "records": count}


async def _aiokafka_consume(
    bootstrap: str, topic: str, partitions: int, count: int
) -> dict[str, Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        got = 0
        start = time.perf_counter()
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        deadline = time.monotonic() + 600
        while got < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000, max_records=10_000)
            got += sum(len(records) for records in batches.values())
        elapsed = time.perf_counter() - start
    finally:
        await consumer.stop()
    if got < count:
        raise RuntimeError(f"consumed {got} of {count} records")
    return {"seconds": elapsed, "records": got}


def aiokafka_produce(**kwargs: Any) -> dict[str, Any]:
    return asyncio.run(_aiokafka_produce(**kwargs))


def aiokafka_consume(**kwargs: Any) -> dict[str, Any]:
    return asyncio.run(_aiokafka_consume(**kwargs))


JOBS: dict[str, Callable[..., dict[str, Any]]] = {
    "confluent_produce": confluent_produce,
    "confluent_consume": confluent_consume,
    "confluent_latency": confluent_latency,
    "kafka_python_produce": kafka_python_produce,
    "kafka_python_consume": kafka_python_consume,
    "aiokafka_produce": aiokafka_produce,
    "aiokafka_consume": aiokafka_consume,
}


def main() -> None:
    args = json.loads(sys.argv[1])
    job = JOBS[args.pop("job")]
    print(json.dumps(job(**args)))


if __name__ == "__main__":
    main()
