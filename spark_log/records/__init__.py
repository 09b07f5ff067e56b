"""The v2 RecordBatch format: pure functions from bytes to values and back, no I/O."""
