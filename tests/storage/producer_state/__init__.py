"""Tests of spark_log.storage.producer_state: idempotent and transactional producer state."""
