"""Tests of spark_log.storage.cleaner: log compaction."""
