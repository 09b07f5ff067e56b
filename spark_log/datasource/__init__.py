"""spark_log.datasource"""
