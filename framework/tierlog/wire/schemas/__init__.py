"""Kafka message schemas that the pinned codec does not ship, in Kafka's JSON schema format.

kafka-python builds a message class from ``<Name>.json`` in the package it is told to load
from; these files describe the wire layout of the APIs tierlog serves beyond that codec's
set (the KIP-848 consumer group APIs), version for version as Kafka defines them.
"""
