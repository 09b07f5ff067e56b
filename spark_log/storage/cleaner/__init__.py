"""Log compaction (Kafka's log/cleaner): choosing the dirtiest log (`cleaner_manager`,
`log_to_clean`), the offset map of latest keys, filtering and rewriting batches, what happens to
transactional and control batches, the cleaner threads and their config.

May import log/, index/, producer_state/, checkpoint, errors, filesystem, records/ and the
clock; never data_dir/ or anything outside storage but records/.
"""
