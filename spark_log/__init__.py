"""spark_log: a Kafka-compatible event log in Python, and the pylog PySpark data source."""

__version__ = "0.1.0"
