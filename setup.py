"""The optional native parts of spark_log; everything else is declared in pyproject.toml.

`spark_log.records._native_scan` speeds up the log cleaner's walks over batches and records, the
check of a produce request's batch and pylog's walk over the fields of a fetch's records;
`spark_log.protocol._native_wire` reads request headers, Produce and Fetch request bodies and
writes the usual Fetch response. Both are optional: if one does not compile, the install goes on
and the pure-Python twins are used.
"""

from setuptools import Extension, setup

RECORDS = "spark_log/records/"
PROTOCOL = "spark_log/protocol/"
setup(ext_modules=[
    Extension("spark_log.records._native_scan",
              [RECORDS + "_native_scan.c", RECORDS + "_native_batches.c",
               RECORDS + "_native_fields.c"],
              depends=[RECORDS + "_native_scan.h"], optional=True),
    Extension("spark_log.protocol._native_wire",
              [PROTOCOL + "_native_wire.c", PROTOCOL + "_native_fetch_response.c"],
              depends=[PROTOCOL + "_native_wire.h"], optional=True),
])
