"""The exceptions of the controller quorum's driver: a metadata log that cannot be trusted, a
driver that stopped, a proposal that a later leader replaced."""

from __future__ import annotations


class MetadataLogError(Exception):
    """The metadata log directory holds something that must not be guessed (a damaged or
    missing quorum-state, no usable snapshot below the log's start): the replica refuses to
    start. The message names the file and what to do."""


class DriverStoppedError(Exception):
    """The raft driver is closed, or stopped after an error it could not carry on from."""


class ProposalLostError(Exception):
    """Records proposed by a leader were not committed: a later leader wrote other records at
    their offsets (the proposing leader lost its epoch first)."""
