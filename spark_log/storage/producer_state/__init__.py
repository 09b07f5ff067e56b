"""spark_log.storage.producer_state.producer_state"""
