"""spark_log.client"""
