"""The layouts of a consumer-protocol group's records in ``__consumer_offsets``, in Kafka's JSON
schema format, read by the codec's message machinery so the bytes are Kafka's."""

from __future__ import annotations

import warnings
from typing import Any


def load_data(name: str) -> Any:
    """The codec's class for the data schema ``<name>.json`` here (a record key or value)."""
    with warnings.catch_warnings():
        # The codec reads schema files with importlib's deprecated read_text.
        warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
        from kafka.protocol.api_data import ApiData

        return type(name, (ApiData,), {}, load_json=__name__)
