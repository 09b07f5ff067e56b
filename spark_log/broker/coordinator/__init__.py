"""spark_log.broker.coordinator"""
