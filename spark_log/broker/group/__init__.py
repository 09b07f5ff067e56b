"""spark_log.broker.group.group"""
