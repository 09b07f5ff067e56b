"""A segment's index files: the sparse offset index (`.index`), the time index (`.timeindex`),
the memory-mapped file they share (`index_file`) and the transaction index of aborted
transactions (`.txnindex`).

May import storage's errors and filesystem only.
"""
