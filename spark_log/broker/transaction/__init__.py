"""spark_log.broker.transaction"""
