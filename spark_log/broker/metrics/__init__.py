"""spark_log.broker.metrics.broker_metrics"""
