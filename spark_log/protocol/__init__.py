"""spark_log.protocol"""
