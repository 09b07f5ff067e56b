"""The errors pylog raises on the driver, each naming the option or address a user can fix.

They subclass `ValueError` (Spark reports a Python data source's ValueError with its message,
as it reports IllegalArgumentException for its own Kafka source) or `ConnectionError`.
"""

from __future__ import annotations


class PylogError(Exception):
    """Base class of every error pylog raises on purpose."""


class PylogOptionError(PylogError, ValueError):
    """An option is unknown, malformed, or conflicts with another option."""


class PylogTopicError(PylogError, ValueError):
    """A topic or partition named by an option does not exist."""


class PylogConnectionError(PylogError, ConnectionError):
    """The Kafka cluster (or the embedded sidecar broker) cannot be reached."""


class PylogDataLossError(PylogError, RuntimeError):
    """Offsets the query still had to read are gone (retention, DeleteRecords, deleted topic)
    while failOnDataLoss is true."""
