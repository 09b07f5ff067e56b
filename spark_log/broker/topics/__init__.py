"""Topics: the registry of the broker's topics kept in topics.json (`topic_metadata`) and their
lifecycle — create, auto-create, delete, add partitions, configure, delete records — with each
partition's log kept in step (`topic_manager`).

May import group/ (what `__consumer_offsets` is created with), the broker's errors and config,
and storage/; never server/, transaction/ or the assembly.
"""
