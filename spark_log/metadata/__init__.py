"""spark_log.metadata: the cluster's metadata as records — brokers, topics, partitions with their
replicas, leader, leader epoch and ISR, configs, producer-id blocks, features — and the image a
node builds by applying them in log order (Kafka's metadata records, MetadataImage and
MetadataDelta).

Pure: records in, image out. May import spark_log.records and spark_log.protocol (codecs) and the
standard library's pure modules; never storage, the broker, clients, I/O, the clock or randomness.
"""
