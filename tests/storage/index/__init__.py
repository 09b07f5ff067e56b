"""Tests of spark_log.storage.index: offset, time and transaction indexes."""
