/* spark_log.protocol._native_wire, the response half: the Fetch response's usual frame (no
tagged field in any partition, so no node endpoints either) written in one call, as
fetch_response.encode_plain_fetch_response writes it: the same parts, our bytes joined between
the records objects, which go out as they are, and the size prefix in the first part.

Why: the Python writer packs each partition's fields with a few calls and joins bytes objects, a
tenth of what a small fetch costs the broker.

It returns None for anything it does not write whole (a value of another type or out of its
field's range, a records object without a valid size, a version it does not write); the caller
then runs the Python writer, which defines the output and names the error.
*/
#include "_native_wire.h"

typedef struct {
    char *b;
    Py_ssize_t len, cap;
} Out;

static int out_grow(Out *o, Py_ssize_t n) {
    if (o->len + n <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap ? o->cap : 256;
    while (cap < o->len + n)
        cap *= 2;
    char *b = PyMem_Realloc(o->b, cap);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->b = b;
    o->cap = cap;
    return 0;
}

static int put(Out *o, const void *p, Py_ssize_t n) {
    if (out_grow(o, n) < 0)
        return -1;
    memcpy(o->b + o->len, p, n);
    o->len += n;
    return 0;
}

static int put_be(Out *o, int64_t v, int n) {
    uint8_t tmp[8];
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        tmp[i] = (uint8_t)(v & 0xFF);
    return put(o, tmp, n);
}

static int put_uvarint(Out *o, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    return put(o, tmp, n);
}

/* A count or length: uvarint N+1 when flexible, else int32. */
static int put_length(Out *o, int64_t n, int flexible) {
    return flexible ? put_uvarint(o, (uint64_t)(n + 1)) : put_be(o, n, 4);
}

/* The bytes written so far as one part of `parts`, emptied. */
static int flush_part(Out *o, PyObject *parts) {
    PyObject *chunk = PyBytes_FromStringAndSize(o->b, o->len);
    if (chunk == NULL)
        return -1;
    int failed = PyList_Append(parts, chunk);
    Py_DECREF(chunk);
    o->len = 0;
    return failed;
}

/* The int `dict[key]` within [lo, hi]; -1 when missing or anything else (no error
   kept: the Python writer names it). */
static int int_field(PyObject *dict, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    PyObject *v = PyDict_GetItemString(dict, key);
    if (v == NULL || !PyLong_Check(v))
        return -1;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < lo || x > hi) {
        PyErr_Clear();
        return -1;
    }
    *out = x;
    return 0;
}

/* fetch_response.records_size for what the native writer accepts: bytes, a bytearray, a
   memoryview, or an object whose `size` is an exact int in [0, 2^31 - 1]; -1 otherwise. */
static Py_ssize_t records_size(PyObject *records) {
    if (PyBytes_CheckExact(records))
        return PyBytes_GET_SIZE(records);
    if (PyByteArray_CheckExact(records))
        return PyByteArray_GET_SIZE(records);
    if (PyMemoryView_Check(records))
        return PyMemoryView_GET_BUFFER(records)->len;
    PyObject *size = PyObject_GetAttrString(records, "size");
    if (size == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t n = -1;
    if (PyLong_Check(size) && !PyBool_Check(size)) {
        n = PyLong_AsSsize_t(size);
        if (n == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (n > 0x7FFFFFFF)
            n = -1;
    }
    Py_DECREF(size);
    return n;
}

/* One partition's fields up to its records' length prefix (fetch_response._plain_partition_head). */
static int put_partition_head(Out *o, PyObject *p, int version, int flexible, Py_ssize_t size) {
    int64_t index, error, hw, lso, log_start = 0, replica = 0;
    if (int_field(p, "partition_index", INT32_MIN, INT32_MAX, &index) < 0
            || int_field(p, "error_code", INT16_MIN, INT16_MAX, &error) < 0
            || int_field(p, "high_watermark", INT64_MIN, INT64_MAX, &hw) < 0
            || int_field(p, "last_stable_offset", INT64_MIN, INT64_MAX, &lso) < 0
            || (version >= 5 && int_field(p, "log_start_offset", INT64_MIN, INT64_MAX,
                                          &log_start) < 0)
            || (version >= 11 && int_field(p, "preferred_read_replica", INT32_MIN, INT32_MAX,
                                           &replica) < 0))
        return 1;
    PyObject *aborted = PyDict_GetItemString(p, "aborted_transactions");
    if (aborted == NULL || (aborted != Py_None && !PyList_CheckExact(aborted)))
        return 1;
    if (put_be(o, index, 4) < 0 || put_be(o, error, 2) < 0 || put_be(o, hw, 8) < 0
            || put_be(o, lso, 8) < 0 || (version >= 5 && put_be(o, log_start, 8) < 0))
        return -1;
    if (aborted == Py_None) {
        if (put_length(o, -1, flexible) < 0)
            return -1;
    } else {
        Py_ssize_t n = PyList_GET_SIZE(aborted);
        if (put_length(o, n, flexible) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *t = PyList_GET_ITEM(aborted, i);
            int64_t producer_id, first_offset;
            if (!PyDict_CheckExact(t)
                    || int_field(t, "producer_id", INT64_MIN, INT64_MAX, &producer_id) < 0
                    || int_field(t, "first_offset", INT64_MIN, INT64_MAX, &first_offset) < 0)
                return 1;
            if (put_be(o, producer_id, 8) < 0 || put_be(o, first_offset, 8) < 0
                    || (flexible && put(o, "", 1) < 0))
                return -1;
        }
    }
    if (version >= 11 && put_be(o, replica, 4) < 0)
        return -1;
    return put_length(o, size, flexible) < 0 ? -1 : 0;
}

/* A topic's key: its id's 16 bytes (zeros for None) from v13, else its name. 1: undecided. */
static int put_topic_key(Out *o, PyObject *topic, int version, int flexible) {
    if (version >= 13) {
        PyObject *id = PyDict_GetItemString(topic, "topic_id");
        if (id == NULL)
            return 1;
        if (id == Py_None)
            return put(o, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) < 0 ? -1 : 0;
        PyObject *raw = PyObject_GetAttrString(id, "bytes");
        if (raw == NULL || !PyBytes_CheckExact(raw) || PyBytes_GET_SIZE(raw) != 16) {
            Py_XDECREF(raw);
            PyErr_Clear();
            return 1;
        }
        int failed = put(o, PyBytes_AS_STRING(raw), 16);
        Py_DECREF(raw);
        return failed < 0 ? -1 : 0;
    }
    PyObject *name = PyDict_GetItemString(topic, "topic");
    if (name == NULL || !PyUnicode_CheckExact(name))
        return 1;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(name, &n);
    if (utf8 == NULL || (!flexible && n > INT16_MAX)) {
        PyErr_Clear();
        return 1;
    }
    if ((flexible ? put_uvarint(o, (uint64_t)n + 1) : put_be(o, n, 2)) < 0 || put(o, utf8, n) < 0)
        return -1;
    return 0;
}

/* The topics of the response into `o` and `parts`; 1: undecided, -1: error. */
static int put_topics(Out *o, PyObject *parts, PyObject *responses, int version, int flexible,
                      Py_ssize_t *total) {
    Py_ssize_t n = PyList_GET_SIZE(responses);
    if (put_length(o, n, flexible) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *topic = PyList_GET_ITEM(responses, i);
        if (!PyDict_CheckExact(topic))
            return 1;
        PyObject *partitions = PyDict_GetItemString(topic, "partitions");
        if (partitions == NULL || !PyList_CheckExact(partitions))
            return 1;
        int r = put_topic_key(o, topic, version, flexible);
        if (r != 0)
            return r;
        Py_ssize_t m = PyList_GET_SIZE(partitions);
        if (put_length(o, m, flexible) < 0)
            return -1;
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *p = PyList_GET_ITEM(partitions, j);
            PyObject *records = PyDict_CheckExact(p) ? PyDict_GetItemString(p, "records") : NULL;
            Py_ssize_t size = records ? records_size(records) : -1;
            if (size < 0)
                return 1;
            r = put_partition_head(o, p, version, flexible, size);
            if (r != 0)
                return r;
            if (size > 0) { /* the records go out as they are, after our bytes so far */
                *total += o->len + size;
                if (flush_part(o, parts) < 0 || PyList_Append(parts, records) < 0)
                    return -1;
            }
            if (flexible && put(o, "", 1) < 0)
                return -1;
        }
        if (flexible && put(o, "", 1) < 0)
            return -1;
    }
    return 0;
}

/* fetch_response.encode_plain_fetch_response: the same parts, or None where the Python writer
   must decide (a value of another type or out of its field's range, a records object without a
   valid size, a version it does not write): it then names the error. */
PyObject *encode_plain_fetch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "encode_plain_fetch(correlation_id, version, "
                        "error_code, session_id, responses)");
        return NULL;
    }
    long long correlation_id, version, error_code, session_id;
    for (int i = 0; i < 4; i++) {
        if (!PyLong_Check(args[i]))
            Py_RETURN_NONE;
    }
    correlation_id = PyLong_AsLongLong(args[0]);
    version = PyLong_AsLongLong(args[1]);
    error_code = PyLong_AsLongLong(args[2]);
    session_id = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (version < 4 || version > 18 || !PyList_CheckExact(args[4])
            || correlation_id < INT32_MIN || correlation_id > INT32_MAX
            || error_code < INT16_MIN || error_code > INT16_MAX
            || session_id < INT32_MIN || session_id > INT32_MAX)
        Py_RETURN_NONE;
    int flexible = version >= 12;
    Out o = {NULL, 0, 0};
    Py_ssize_t total = 0;
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    int r = -1;
    if (put_be(&o, 0, 4) < 0 || put_be(&o, correlation_id, 4) < 0
            || (flexible && put(&o, "", 1) < 0) || put_be(&o, 0, 4) < 0
            || (version >= 7 && (put_be(&o, error_code, 2) < 0 || put_be(&o, session_id, 4) < 0)))
        goto done;
    r = put_topics(&o, parts, args[4], (int)version, flexible, &total);
    if (r != 0)
        goto done;
    r = -1;
    if (flexible && put(&o, "", 1) < 0)
        goto done;
    total += o.len;
    if (flush_part(&o, parts) < 0)
        goto done;
    /* the size prefix, in the first part (always ours) */
    PyObject *first = PyList_GET_ITEM(parts, 0);
    PyObject *patched = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(first));
    if (patched == NULL)
        goto done;
    char *b = PyBytes_AS_STRING(patched);
    memcpy(b, PyBytes_AS_STRING(first), PyBytes_GET_SIZE(first));
    uint32_t size = (uint32_t)(total - 4);
    b[0] = (char)(size >> 24);
    b[1] = (char)(size >> 16);
    b[2] = (char)(size >> 8);
    b[3] = (char)size;
    PyList_SET_ITEM(parts, 0, patched);
    Py_DECREF(first);
    r = 0;
done:
    PyMem_Free(o.b);
    if (r == 0)
        return parts;
    Py_DECREF(parts);
    if (r > 0)
        Py_RETURN_NONE;
    return NULL;
}

