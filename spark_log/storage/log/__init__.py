"""The partition log (Kafka's storage log package): segments and their file names, the
segment list, the local log, loading and recovering a log, swap recovery, the partition log
with its offsets, retention, truncation and leader epochs, the producer side of a partition log,
appends' validation, offset lookups, reads' file slices and batch checks, the log manager of a
data directory, and the per-topic log config.

May import index/, producer_state/, checkpoint, append_info, errors, filesystem, records/ and
the clock; never cleaner/, data_dir/ or anything outside storage but records/.
"""
