"""spark_log.storage.data_dir"""
