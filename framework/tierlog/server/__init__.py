"""The broker node: partitions, request handling, controller, transport and delayed operations."""
