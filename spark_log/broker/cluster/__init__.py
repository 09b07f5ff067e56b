"""The cluster as this broker sees it and takes part in it (Kafka's KRaftMetadataCache,
BrokerMetadataPublisher and BrokerLifecycleManager).

    metadata_cache.py       the latest metadata image, as request handlers read it
    metadata_publisher.py   applies each new image to the logs and the partitions' leadership

May import storage/ (the logs it opens and deletes), metadata/ (the image), the broker's value
types below it, protocol/ and records/; never the server (handlers read the cache through the
narrow protocols of `server.services`).
"""
