"""The optional native part of spark_log; everything else is declared in pyproject.toml.

`spark_log.records._native_scan` speeds up the log cleaner's walks over batches and records. It
is optional: if it does not compile, the install goes on and the pure-Python twins are used.
"""

from setuptools import Extension, setup

NATIVE = "spark_log/records/"
setup(ext_modules=[Extension("spark_log.records._native_scan",
                             [NATIVE + "_native_scan.c", NATIVE + "_native_batches.c"],
                             depends=[NATIVE + "_native_scan.h"], optional=True)])
