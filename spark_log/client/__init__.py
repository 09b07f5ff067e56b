"""spark_log.client: small protocol clients for what librdkafka cannot do from Python (raw fetches,
transaction control from another process, group offsets, log directories, the controller
quorum's description).

May import protocol/ and records/ only: a client reaches a broker through the wire.
"""
