"""spark_log.broker"""
