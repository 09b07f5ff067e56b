/* What the two files of spark_log.protocol._native_wire share: the writer that
   `_native_fetch_response.c` defines and `_native_wire.c`'s method table names. */
#ifndef SPARK_LOG_NATIVE_WIRE_H
#define SPARK_LOG_NATIVE_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

PyObject *encode_plain_fetch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
