"""Tests of spark_log.storage.log: segments, the partition log, loading and recovery."""
