"""spark_log.cli"""
