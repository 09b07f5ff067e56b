"""spark_log.broker.server"""
