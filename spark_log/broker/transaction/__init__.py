"""Transactions (Kafka's coordinator/transaction): the transaction coordinator and its state
machine, `__transaction_state` (record formats, memory kept as a replay of it), COMMIT/ABORT
markers, and producer ids that are never handed out twice.

May import group/ (the `__consumer_offsets` partitioning, value types), coordinator/, the
broker's errors and config, storage/ types, protocol/ and records/; the group coordinator
itself is reached through `collaborators.TransactionalOffsets`.
"""
