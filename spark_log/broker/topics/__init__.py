"""spark_log.broker.topics"""
