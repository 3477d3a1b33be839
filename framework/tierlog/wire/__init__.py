"""The Kafka wire protocol front end: brokers listen on TCP and any Kafka client talks to them.

``listener.py`` accepts connections and frames requests, ``codec.py`` decodes and encodes
them with kafka-python's ``kafka.protocol``, ``apis.py`` maps each API onto the broker's own
request types, ``endpoints.py`` parses ``listeners`` and keeps what each broker advertises, and
``metrics.py`` counts requests and connections as Kafka does.
"""

from .apis import APIS, Api
from .endpoints import Endpoint, EndpointDirectory
from .listener import WireListener

__all__ = ["APIS", "Api", "Endpoint", "EndpointDirectory", "WireListener"]
