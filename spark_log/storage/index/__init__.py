"""spark_log.storage.index"""
