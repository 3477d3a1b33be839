"""The Kafka wire protocol front end: brokers listen on TCP and any Kafka client talks to them.

``listener.py`` accepts connections and frames requests, ``codec.py`` decodes and encodes
them with kafka-python's ``kafka.protocol``, ``apis.py`` maps each API onto the broker's own
request types, ``endpoints.py`` parses ``listeners`` and keeps what each broker advertises, and
``metrics.py`` counts requests and connections as Kafka does. Between the brokers of a
multi-process cluster, ``inter_broker_apis.py`` serves the controller's and the brokers' own
APIs, and ``network_transport.py`` sends the broker's request types to another broker.
"""

import warnings

with warnings.catch_warnings():
    # kafka-python builds its message classes at import from JSON schemas it reads with
    # importlib.resources' legacy functions, deprecated since Python 3.11: not our users' concern.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from .apis import APIS, Api
    from .endpoints import Endpoint, EndpointDirectory
    from .listener import WireListener

__all__ = ["APIS", "Api", "Endpoint", "EndpointDirectory", "WireListener"]
