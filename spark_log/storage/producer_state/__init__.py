"""Producer state (Kafka's ProducerStateManager): each producer's epoch, last sequences and
open transaction, the checks an append must pass (idempotence, fencing, transaction rules), and
the snapshot files that save it. The log feeds it (`log.partition_producers`,
`log.producer_state_loader`).

May import append_info, errors, filesystem and records/; never log/, cleaner/ or index/.
"""
