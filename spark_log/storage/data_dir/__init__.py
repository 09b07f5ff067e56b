"""The files a data directory holds besides its partition logs: the directory's checks at start
(`prepare`), its `.lock`, `meta.properties` (which cluster and node it belongs to) and its
formatting (`formatter`, for `spark-log storage`), `topics.json` (the topics and their configs),
`producer-id-block`, and the atomic rewrite they share. The broker and `spark-log dump-log
--verify` read them with the same readers.

May import log/ (a topic's log config), errors, `spark_log.properties` and the standard
library; never the broker.
"""
