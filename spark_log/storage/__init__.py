"""spark_log.storage"""
