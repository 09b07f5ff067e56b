/* What the files of spark_log.records._native_scan share: the KeyOffsets table's layout, the
   section walks of `_native_scan.c` that `_native_batches.c` runs on each batch, and the walks
   of `_native_batches.c` and `_native_fields.c` that the method lists name. */
#ifndef SPARK_LOG_NATIVE_SCAN_H
#define SPARK_LOG_NATIVE_SCAN_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

extern PyObject *corrupt_error; /* spark_log.records.errors.CorruptRecordError */
/* CorruptRecordError "record <index>: <what>"; returns -1. */
int corrupt(Py_ssize_t index, const char *what);
/* -1 with CorruptRecordError set unless `count` records ended exactly at `limit`. */
int check_filled(Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t count);

typedef struct {
    Py_ssize_t start, end;    /* the record's bytes, length prefix included */
    int64_t offset_delta;
    Py_ssize_t key_pos;       /* meaningful when key_len >= 0 */
    int64_t key_len;          /* negative: null key */
    Py_ssize_t value_pos;     /* the value length varint */
} RecordHead;

typedef struct {
    uint64_t hash;
    int64_t offset;
    Py_ssize_t key_pos; /* in the arena */
    Py_ssize_t key_len; /* -1: empty slot */
} Slot;

struct Parsed {
    RecordHead head;
    uint64_t hash; /* of its key, if it has one */
};

typedef struct {
    PyObject_HEAD
    Slot *slots;
    size_t mask;        /* slots - 1, a power of two minus one */
    Py_ssize_t used;
    char *arena;
    Py_ssize_t arena_len, arena_cap;
    uint64_t seed;
    struct Parsed *parsed; /* one section's records, reused across calls */
    Py_ssize_t parsed_cap;
} KeyOffsets;

/* A records section: `len` bytes at `b`. Both return -1 with CorruptRecordError set (or
   MemoryError) if it does not hold exactly `count` records. */
int map_section(KeyOffsets *t, const uint8_t *b, Py_ssize_t len, Py_ssize_t count,
                long long base, long long start_offset);
/* Leaves the kept records first in t->parsed: *kept of them. */
int kept_section(KeyOffsets *t, const uint8_t *b, Py_ssize_t len, Py_ssize_t count,
                 long long base, long long latest, int keep_deletes, Py_ssize_t *kept,
                 int *tombstones);

PyObject *KeyOffsets_map_batches(KeyOffsets *t, PyObject *args);
PyObject *KeyOffsets_filter_batches(KeyOffsets *t, PyObject *args);
PyObject *whole_batches(PyObject *module, PyObject *buf);
PyObject *client_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *record_fields(PyObject *module, PyObject *args); /* _native_fields.c */
int init_batches(void); /* at import: looks up what the batch walks call */

#endif
