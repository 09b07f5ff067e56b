"""Partition replication as pure state machines (offsets, times and messages in, decisions out;
no I/O): the leader's view of its followers — their log end offsets, when each last caught up,
the in-sync replica set (ISR) and its changes proposed to the controller, and the high
watermark (`leader_partition`). The broker drives them from its request handlers and the
metadata; a simulator drives the same code with seeded faults.

May import records/ and protocol/ only (see the import contracts in pyproject.toml).
"""
