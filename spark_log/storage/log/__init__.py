"""spark_log.storage.log"""
