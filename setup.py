"""The optional native part of spark_log; everything else is declared in pyproject.toml.

`spark_log.records._native_scan` speeds up the log cleaner's per-record walks. It is optional:
if it does not compile, the install goes on and the pure-Python twins are used.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("spark_log.records._native_scan",
                             ["spark_log/records/_native_scan.c"], optional=True)])
