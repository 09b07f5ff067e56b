"""Consumer groups (Kafka's coordinator/group): the group coordinator, the classic rebalance
protocol (membership, rebalance, timers), committed offsets and their rules, and the
`__consumer_offsets` topic — its record formats, which partition holds a group, and memory kept
as a replay of it.

May import coordinator/ (its collaborators and loader), the broker's errors and config,
storage/ types, protocol/ and records/; never transaction/, topics/, server/ or the assembly.
"""
