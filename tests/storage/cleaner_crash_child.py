"""Child process for test_log_cleaner_crash: opens a data directory through a file system that
SIGKILLs this process just before a chosen step of a cleaning round, then cleans until done.
Exits 0 only if the step was never reached.

Usage: python -m tests.storage.cleaner_crash_child <data dir> <crash point> <groups to skip>
"""

from __future__ import annotations

import os
import signal
import sys

from spark_log.clock import ManualClock
from spark_log.storage.cleaner.log_cleaner import LogCleaner
from spark_log.storage.log.log_manager import LogManager

from .cleaner_support import StepFileSystem, clean_until_done, compact_config


def sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    data_dir, point, skip = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fs = StepFileSystem(point, crash=sigkill, skip_groups=skip)
    logs = LogManager(data_dir, default_config=compact_config(), clock=ManualClock(), fs=fs)
    for log in logs.logs():
        log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner(logs)
    fs.armed = True
    clean_until_done(cleaner)
    cleaner.driver.close()
    logs.close()


if __name__ == "__main__":
    main()
