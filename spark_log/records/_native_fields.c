/* spark_log.records._native_scan, the reader's half: every field position of the records of
v2 records sections, for a reader that decodes a whole fetch into columns.

  record_fields(buf, sections, out) -> with_headers: `sections` is a sequence of
      (lo, hi, count), each the records section buf[lo:hi] of a batch holding `count`
      records. `out`, a writable buffer of FIELD_COUNT * (the counts' sum) int64s, receives
      FIELD_COUNT columns of one value per record (all sections' records in order), column
      after column, in the order of the enum below. The caller allocates it: a numpy array
      of megabytes comes in huge pages, where a new buffer here would be faulted in and
      cleared 4 KiB at a time. `with_headers` says whether any record has headers (their
      bytes are left to the caller: they are rare and built into Python objects anyway).

Why: pylog's reader found these with numpy, one vector step per varint byte per field after a
sequential scan of the record lengths: ~80 ns a record, the largest part of decoding a fetch.
Here it is one pass of a few ns a record.

The numpy walk in `spark_log.datasource.columnar` defines the behaviour and stands in when
this is not built; the tests hold the two to the same columns, or CorruptRecordError for the
same input. A section holds exactly `count` records ending exactly at `hi`; every varint, key
and value lies inside its record; a record without headers ends right after its header count.
Nothing is read outside buf[lo:hi].
*/
#include "_native_scan.h"

/* The columns, in the order they are laid out. */
enum { TS_DELTA, OFFSET_DELTA, KEY_START, KEY_LEN, VALUE_START, VALUE_LEN, HEADERS_START,
       HEADER_COUNT, RECORD_END, FIELD_COUNT };

/* A zigzag varint of at most ten bytes at *pos, all of it before `limit`, whose value fits 64
   bits (a tenth byte of 0 or 1), as the numpy walk requires. */
static inline int zigzag_before(const uint8_t *b, Py_ssize_t limit, Py_ssize_t *pos,
                                int64_t *out) {
    Py_ssize_t p = *pos;
    if (p < limit && b[p] < 0x80) {
        *pos = p + 1;
        *out = (int64_t)(b[p] >> 1) ^ -(int64_t)(b[p] & 1);
        return 0;
    }
    uint64_t u = 0;
    for (int i = 0; i < 10 && p < limit; i++, p++) {
        uint8_t byte = b[p];
        if (i == 9 && byte > 1)
            return -1;
        u |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *pos = p + 1;
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return -1;
}

/* Skips a key or value of length n (negative: null) at *pos, inside the record. */
static inline int skip_field(Py_ssize_t *pos, int64_t n, Py_ssize_t end) {
    if (n > 0) {
        if (n > end - *pos)
            return -1;
        *pos += (Py_ssize_t)n;
    }
    return 0;
}

/* The records of buf[lo:hi]: `count` of them into row `row` on of each column. */
static int walk_section(const uint8_t *b, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t count,
                        int64_t **col, Py_ssize_t row, int *with_headers) {
    Py_ssize_t pos = lo;
    for (Py_ssize_t i = 0; i < count; i++, row++) {
        int64_t length, v;
        if (zigzag_before(b, hi, &pos, &length) < 0)
            return corrupt(i, "record length runs past its section");
        if (length < 0 || length > hi - pos)
            return corrupt(i, "record length runs past its section");
        Py_ssize_t end = pos + (Py_ssize_t)length, p = pos + 1; /* past the attributes */
        if (p > end || zigzag_before(b, end, &p, &col[TS_DELTA][row]) < 0
                || zigzag_before(b, end, &p, &col[OFFSET_DELTA][row]) < 0
                || zigzag_before(b, end, &p, &v) < 0)
            return corrupt(i, "record fields run past the record");
        col[KEY_START][row] = p;
        col[KEY_LEN][row] = v;
        if (skip_field(&p, v, end) < 0 || zigzag_before(b, end, &p, &v) < 0)
            return corrupt(i, "record fields run past the record");
        col[VALUE_START][row] = p;
        col[VALUE_LEN][row] = v;
        if (skip_field(&p, v, end) < 0 || zigzag_before(b, end, &p, &v) < 0)
            return corrupt(i, "record fields run past the record");
        if (v < 0)
            return corrupt(i, "negative header count");
        if (v == 0 && p != end)
            return corrupt(i, "record does not end where its length says");
        *with_headers |= v != 0;
        col[HEADERS_START][row] = p;
        col[HEADER_COUNT][row] = v;
        col[RECORD_END][row] = end;
        pos = end;
    }
    return check_filled(pos, hi, count);
}

/* The (lo, hi, count) of each section, checked against the buffer; their record total. */
static Py_ssize_t *read_sections(PyObject *seq, Py_ssize_t len, Py_ssize_t *n,
                                 Py_ssize_t *total) {
    Py_ssize_t *out = PyMem_Malloc(sizeof(Py_ssize_t) * 3 * (size_t)(*n ? *n : 1));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    *total = 0;
    for (Py_ssize_t i = 0; i < *n; i++) {
        Py_ssize_t *s = out + 3 * i;
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyArg_ParseTuple(item, "nnn:record_fields section", &s[0], &s[1], &s[2]))
            goto fail;
        if (s[0] < 0 || s[1] < s[0] || s[1] > len || s[2] < 0 || s[2] > s[1] - s[0]) {
            PyErr_Format(corrupt_error, "section %zd: bounds [%zd, %zd) of %zd records do "
                         "not fit a buffer of %zd bytes", i, s[0], s[1], s[2], len);
            goto fail;
        }
        *total += s[2];
    }
    return out;
fail:
    PyMem_Free(out);
    return NULL;
}

PyObject *record_fields(PyObject *module, PyObject *args) {
    PyObject *obj, *sections, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO:record_fields", &obj, &sections, &out_obj))
        return NULL;
    PyObject *seq = PySequence_Fast(sections, "record_fields: sections must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_buffer view, out;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&view);
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    Py_ssize_t *bounds = read_sections(seq, view.len, &n, &total);
    int with_headers = 0, failed = bounds == NULL;
    if (!failed && out.len != total * FIELD_COUNT * 8) {
        PyErr_Format(PyExc_ValueError, "record_fields: out holds %zd bytes, not the %zd of "
                     "%d columns of %zd records", out.len, total * FIELD_COUNT * 8,
                     FIELD_COUNT, total);
        failed = 1;
    }
    if (!failed) {
        int64_t *base = out.buf, *col[FIELD_COUNT];
        for (int f = 0; f < FIELD_COUNT; f++)
            col[f] = base + f * total;
        Py_ssize_t row = 0;
        for (Py_ssize_t i = 0; i < n && !failed; i++) {
            Py_ssize_t *s = bounds + 3 * i;
            failed = walk_section(view.buf, s[0], s[1], s[2], col, row, &with_headers) < 0;
            row += s[2];
        }
    }
    PyMem_Free(bounds);
    PyBuffer_Release(&out);
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    if (failed)
        return NULL;
    return Py_NewRef(with_headers ? Py_True : Py_False);
}
