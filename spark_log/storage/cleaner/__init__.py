"""spark_log.storage.cleaner.cleaner"""
