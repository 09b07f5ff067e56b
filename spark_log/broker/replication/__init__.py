"""Replication (Kafka's ReplicaManager): the partitions this broker leads — appends, reads,
last stable offsets, aborted transactions of a read — and fetches parked until an append
arrives; the leader epoch and KIP-320's epoch check. Replica fetchers, the ISR and the high
watermark of a replicated cluster come here.

May import the broker's errors, storage/ and protocol/; never the coordinators, topics/,
server/ or the assembly.
"""
