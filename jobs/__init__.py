"""Runnable PySpark jobs on pylog: `demo`, `generate_events`, `stream_etl`, `backfill`.

Each job is a script (`python jobs/NAME.py --help`) and an importable module whose `run`
function takes parsed arguments (and a Spark session where it needs one), so tests and other
jobs call it in-process.
"""
