"""spark_log.broker.replication"""
