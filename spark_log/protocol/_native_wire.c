/* spark_log.protocol._native_wire, the request half (the response half is
_native_fetch_response.c): the request header and the Produce and Fetch request bodies read in
one C call each, for the broker's hottest paths.

  parse_request(frame, header_type, header_version) -> (header, body view) | None
  read_produce(body, flexible, request_type, topic_type, partition_type) -> request | None
  read_fetch(body, version, request_type, topic_type, partition_type, replica_state_type,
             uuid_of) -> request | None

Why: the Python readers take a call per field, about 5 us for a header, 8 us for a
one-partition Produce body and as much for a one-partition Fetch, a fifth of what a one-record
produce request or a small fetch costs the broker.

Each returns None for anything it does not read whole: a truncated or malformed frame, an
over-long count, a string that is not UTF-8. The caller then runs the pure-Python reader
(request_header.parse_request, produce_request._decode, fetch_request._decode), which defines
the behaviour and names the error; read_fetch also leaves it every request with a tagged field
(a follower's replica state, a cluster id, a partition's directory or high watermark). What these accept, they read exactly as those readers do: the same lengths, counts,
null markers and varints (at most 5 bytes, 32 bits), tagged fields skipped, trailing bytes
ignored, records handed out as views of the body. Every read is checked against the end.
*/
#include "_native_wire.h"

typedef struct {
    const uint8_t *b;
    Py_ssize_t pos, end;
    int flexible;
} Cursor;

static int take_be(Cursor *c, int n, int64_t *out) {
    if (c->end - c->pos < n)
        return -1;
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | c->b[c->pos + i];
    c->pos += n;
    /* sign-extend the n-byte value */
    int shift = 64 - 8 * n;
    *out = (int64_t)(v << shift) >> shift;
    return 0;
}

/* wire.read_uvarint: at most 5 bytes, the fifth no more than 0x0F. */
static int uvarint(Cursor *c, int64_t *out) {
    uint64_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (c->pos >= c->end)
            return -1;
        uint8_t byte = c->b[c->pos++];
        value |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (!(byte & 0x80)) {
            if (i == 4 && byte > 0x0F)
                return -1;
            *out = (int64_t)value;
            return 0;
        }
    }
    return -1;
}

/* body_reader's _length: a classic int16/int32 or, flexible, a uvarint N+1; -1 is null. */
static int length(Cursor *c, int classic_bytes, int64_t *out) {
    if (!c->flexible)
        return take_be(c, classic_bytes, out);
    if (uvarint(c, out) < 0)
        return -1;
    *out -= 1;
    return 0;
}

/* body_reader's count: not null, and no more elements than bytes left. */
static int count(Cursor *c, int64_t *out) {
    if (length(c, 4, out) < 0 || *out < 0 || *out > c->end - c->pos)
        return -1;
    return 0;
}

/* A tagged-field section (none before the flexible versions): every field skipped. */
static int skip_tags(Cursor *c) {
    if (!c->flexible)
        return 0;
    int64_t n, tag, size;
    if (uvarint(c, &n) < 0)
        return -1;
    for (int64_t i = 0; i < n; i++) {
        if (uvarint(c, &tag) < 0 || uvarint(c, &size) < 0 || size > c->end - c->pos)
            return -1;
        c->pos += size;
    }
    return 0;
}

/* A nullable string: a new reference (Py_None for null), NULL with no error set when it is
   malformed (not UTF-8 included). */
static PyObject *nullable_string(Cursor *c, int classic_bytes) {
    int64_t n;
    if (length(c, classic_bytes, &n) < 0 || n < -1 || n > c->end - c->pos)
        return NULL;
    if (n == -1)
        return Py_NewRef(Py_None);
    PyObject *s = PyUnicode_DecodeUTF8((const char *)c->b + c->pos, n, NULL);
    if (s == NULL)
        PyErr_Clear();
    c->pos += n;
    return s;
}

/* A view of `n` bytes of `owner` (a memoryview) from `pos`. */
static PyObject *subview(PyObject *owner, Py_ssize_t pos, Py_ssize_t n) {
    PyObject *start = PyLong_FromSsize_t(pos), *stop = PyLong_FromSsize_t(pos + n);
    PyObject *slice = (start && stop) ? PySlice_New(start, stop, NULL) : NULL;
    Py_XDECREF(start);
    Py_XDECREF(stop);
    if (slice == NULL)
        return NULL;
    PyObject *view = PyObject_GetItem(owner, slice);
    Py_DECREF(slice);
    return view;
}

/* A `type` (a tuple subclass: a NamedTuple) holding `items`, whose references it steals;
   NULL (every item released) if any is NULL or memory runs out. */
static PyObject *build(PyTypeObject *type, PyObject **items, Py_ssize_t n) {
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL)
            goto fail;
    out = type->tp_alloc(type, n);
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(out, i, items[i]);
    return out;
fail:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(items[i]);
    return NULL;
}

static int tuple_type(PyObject *obj, const char *what) {
    if (PyType_Check(obj) && PyType_IsSubtype((PyTypeObject *)obj, &PyTuple_Type))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be a tuple type", what);
    return -1;
}

/* No result and no error: the caller's Python reader decides. Any error set on the way (only
   an allocation can set one) is kept. */
static PyObject *undecided(void) {
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* Whether `obj` (a memoryview) holds contiguous unsigned bytes; fills `view` if so. */
static int is_byte_view(PyObject *obj, Py_buffer *view) {
    if (!PyMemoryView_Check(obj))
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->format != NULL && strcmp(view->format, "B") != 0) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* request_header.parse_request: a frame of bytes, or a memoryview of them. */
static PyObject *parse_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "parse_request(frame, header_type, header_version)");
        return NULL;
    }
    if (tuple_type(args[1], "header_type") < 0)
        return NULL;
    /* the body is a view of the frame: of the caller's view, or of a new one over its bytes */
    PyObject *frame = PyMemoryView_Check(args[0]) ? Py_NewRef(args[0])
                                                  : PyMemoryView_FromObject(args[0]);
    if (frame == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer buf;
    if (!is_byte_view(frame, &buf)) {
        Py_DECREF(frame);
        Py_RETURN_NONE;
    }
    Cursor c = {buf.buf, 0, buf.len, 0};
    PyObject *out = NULL, *client_id = NULL, *version = NULL;
    int64_t api_key, api_version, correlation_id;
    if (take_be(&c, 2, &api_key) < 0 || take_be(&c, 2, &api_version) < 0
            || take_be(&c, 4, &correlation_id) < 0)
        goto undecided;
    version = PyObject_CallFunction(args[2], "LL", (long long)api_key, (long long)api_version);
    if (version == NULL)
        goto done;
    long header_version = PyLong_AsLong(version);
    if (header_version == -1 && PyErr_Occurred())
        goto done;
    if (header_version >= 1) {
        client_id = nullable_string(&c, 2);
        if (client_id == NULL)
            goto undecided;
        if (client_id == Py_None) { /* Kafka reads a null client id as "" */
            Py_DECREF(client_id);
            client_id = PyUnicode_FromStringAndSize("", 0);
        }
    } else {
        client_id = PyUnicode_FromStringAndSize("", 0);
    }
    c.flexible = header_version >= 2;
    if (client_id == NULL || skip_tags(&c) < 0)
        goto undecided;
    PyObject *fields[5] = {PyLong_FromLongLong(api_key), PyLong_FromLongLong(api_version),
                           PyLong_FromLongLong(correlation_id), client_id,
                           Py_NewRef(version)};
    client_id = NULL; /* stolen */
    PyObject *header = build((PyTypeObject *)args[1], fields, 5);
    if (header == NULL)
        goto done;
    PyObject *body = subview(frame, c.pos, c.end - c.pos);
    if (body == NULL) {
        Py_DECREF(header);
        goto done;
    }
    out = PyTuple_Pack(2, header, body);
    Py_DECREF(header);
    Py_DECREF(body);
    goto done;
undecided:
    out = undecided();
done:
    Py_XDECREF(client_id);
    Py_XDECREF(version);
    PyBuffer_Release(&buf);
    Py_DECREF(frame);
    return out;
}

/* One topic's partitions: a tuple of `partition_type`, NULL when undecided or on error. */
static PyObject *read_partitions(Cursor *c, PyObject *body, PyTypeObject *partition_type) {
    int64_t n;
    if (count(c, &n) < 0)
        return NULL;
    PyObject *partitions = PyTuple_New(n);
    if (partitions == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t index, size;
        if (take_be(c, 4, &index) < 0 || length(c, 4, &size) < 0 || size < -1
                || size > c->end - c->pos)
            goto fail;
        PyObject *records = size == -1 ? Py_NewRef(Py_None) : subview(body, c->pos, size);
        if (size > 0)
            c->pos += size;
        PyObject *fields[2] = {PyLong_FromLongLong(index), records};
        PyObject *partition = build(partition_type, fields, 2);
        if (partition == NULL)
            goto fail;
        PyTuple_SET_ITEM(partitions, i, partition);
        if (skip_tags(c) < 0)
            goto fail;
    }
    return partitions;
fail:
    Py_DECREF(partitions);
    return NULL;
}

/* produce_request._decode for a body given as a memoryview of bytes. */
static PyObject *read_produce(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "read_produce(body, flexible, request_type, "
                        "topic_type, partition_type)");
        return NULL;
    }
    int flexible = PyObject_IsTrue(args[1]);
    if (flexible < 0 || tuple_type(args[2], "request_type") < 0
            || tuple_type(args[3], "topic_type") < 0 || tuple_type(args[4], "partition_type") < 0)
        return NULL;
    Py_buffer buf;
    if (!is_byte_view(args[0], &buf))
        Py_RETURN_NONE;
    Cursor c = {buf.buf, 0, buf.len, flexible};
    PyObject *out = NULL, *topics = NULL;
    PyObject *transactional_id = nullable_string(&c, 2);
    int64_t acks, timeout_ms, n;
    if (transactional_id == NULL || take_be(&c, 2, &acks) < 0 || take_be(&c, 4, &timeout_ms) < 0
            || count(&c, &n) < 0)
        goto undecided;
    topics = PyTuple_New(n);
    if (topics == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = nullable_string(&c, 2);
        if (name == Py_None)
            Py_CLEAR(name);
        PyObject *partitions = name ? read_partitions(&c, args[0], (PyTypeObject *)args[4])
                                    : NULL;
        PyObject *fields[2] = {name, partitions};
        PyObject *topic = build((PyTypeObject *)args[3], fields, 2);
        if (topic == NULL)
            goto undecided;
        PyTuple_SET_ITEM(topics, i, topic);
        if (skip_tags(&c) < 0)
            goto undecided;
    }
    if (skip_tags(&c) < 0)
        goto undecided;
    PyObject *fields[4] = {transactional_id, PyLong_FromLongLong(acks),
                           PyLong_FromLongLong(timeout_ms), topics};
    transactional_id = topics = NULL; /* stolen */
    out = build((PyTypeObject *)args[2], fields, 4);
    goto done;
undecided:
    out = undecided();
done:
    Py_XDECREF(transactional_id);
    Py_XDECREF(topics);
    PyBuffer_Release(&buf);
    return out;
}

/* A topic of a Fetch request: its name before v13, its id (None when all zero) from v13. */
static int fetch_topic_key(Cursor *c, int version, PyObject *uuid_of, PyObject **name,
                           PyObject **topic_id) {
    if (version < 13) {
        *name = nullable_string(c, 2);
        if (*name == Py_None)
            Py_CLEAR(*name);
        *topic_id = Py_NewRef(Py_None);
        return *name == NULL ? -1 : 0;
    }
    *name = Py_NewRef(Py_None);
    if (c->end - c->pos < 16) {
        *topic_id = NULL;
        return -1;
    }
    const uint8_t *raw = c->b + c->pos;
    c->pos += 16;
    int zero = 1;
    for (int i = 0; i < 16; i++)
        zero &= raw[i] == 0;
    if (zero) {
        *topic_id = Py_NewRef(Py_None);
        return 0;
    }
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)raw, 16);
    *topic_id = bytes ? PyObject_CallOneArg(uuid_of, bytes) : NULL;
    Py_XDECREF(bytes);
    return *topic_id == NULL ? -1 : 0;
}

/* One partition of a Fetch topic, by version; NULL when undecided (a tagged field) or on error. */
static PyObject *fetch_partition(Cursor *c, int version, PyTypeObject *type) {
    int64_t partition, leader_epoch = -1, fetch_offset, last_fetched = -1, log_start = -1,
            max_bytes;
    if (take_be(c, 4, &partition) < 0)
        return NULL;
    if (version >= 9 && take_be(c, 4, &leader_epoch) < 0)
        return NULL;
    if (take_be(c, 8, &fetch_offset) < 0)
        return NULL;
    if (version >= 12 && take_be(c, 4, &last_fetched) < 0)
        return NULL;
    if (version >= 5 && take_be(c, 8, &log_start) < 0)
        return NULL;
    if (take_be(c, 4, &max_bytes) < 0)
        return NULL;
    if (version >= 12) { /* only an empty tagged-field section is read here */
        if (c->pos >= c->end || c->b[c->pos] != 0)
            return NULL;
        c->pos++;
    }
    PyObject *fields[8] = {
        PyLong_FromLongLong(partition), PyLong_FromLongLong(leader_epoch),
        PyLong_FromLongLong(fetch_offset), PyLong_FromLongLong(last_fetched),
        PyLong_FromLongLong(log_start), PyLong_FromLongLong(max_bytes), Py_NewRef(Py_None),
        PyLong_FromLongLong(INT64_MAX)};
    return build(type, fields, 8);
}

/* The topics (or, `forgotten`, the forgotten topics) of a Fetch request: a tuple of
   `topic_type`; NULL when undecided or on error. */
static PyObject *fetch_topics(Cursor *c, int version, int forgotten, PyObject *const *types,
                              PyObject *uuid_of) {
    int64_t n;
    if (count(c, &n) < 0)
        return NULL;
    PyObject *topics = PyTuple_New(n);
    if (topics == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *topic_id, *parts = NULL;
        int64_t m;
        if (fetch_topic_key(c, version, uuid_of, &name, &topic_id) == 0 && count(c, &m) == 0
                && (parts = PyTuple_New(m)) != NULL) {
            for (Py_ssize_t j = 0; j < m; j++) {
                int64_t partition;
                PyObject *part = !forgotten
                    ? fetch_partition(c, version, (PyTypeObject *)types[2])
                    : take_be(c, 4, &partition) == 0 ? PyLong_FromLongLong(partition) : NULL;
                if (part == NULL) {
                    Py_CLEAR(parts);
                    break;
                }
                PyTuple_SET_ITEM(parts, j, part);
            }
        }
        PyObject *fields[3] = {name, topic_id, parts};
        PyObject *topic = build((PyTypeObject *)types[1], fields, 3);
        if (topic == NULL || skip_tags(c) < 0) {
            Py_XDECREF(topic);
            Py_DECREF(topics);
            return NULL;
        }
        PyTuple_SET_ITEM(topics, i, topic);
    }
    return topics;
}

/* fetch_request._decode for a body given as a memoryview of bytes. */
static PyObject *read_fetch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "read_fetch(body, version, request_type, topic_type, "
                        "partition_type, replica_state_type, uuid_of)");
        return NULL;
    }
    long version = PyLong_AsLong(args[1]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    for (int i = 2; i < 6; i++)
        if (tuple_type(args[i], "each type") < 0)
            return NULL;
    PyObject *const *types = args + 2; /* request, topic, partition, replica state */
    Py_buffer buf;
    if (version < 4 || version > 18 || !is_byte_view(args[0], &buf))
        Py_RETURN_NONE;
    Cursor c = {buf.buf, 0, buf.len, version >= 12};
    PyObject *out = NULL, *topics = NULL, *forgotten = NULL, *rack = NULL, *state = NULL;
    int64_t replica_id = -1, max_wait, min_bytes, max_bytes, isolation, session_id = 0,
            session_epoch = -1;
    if ((version < 15 && take_be(&c, 4, &replica_id) < 0) || take_be(&c, 4, &max_wait) < 0
            || take_be(&c, 4, &min_bytes) < 0 || take_be(&c, 4, &max_bytes) < 0
            || take_be(&c, 1, &isolation) < 0)
        goto undecided;
    if (version >= 7 && (take_be(&c, 4, &session_id) < 0 || take_be(&c, 4, &session_epoch) < 0))
        goto undecided;
    topics = fetch_topics(&c, version, 0, types, args[6]);
    if (topics == NULL)
        goto undecided;
    forgotten = version >= 7 ? fetch_topics(&c, version, 1, types, args[6]) : PyTuple_New(0);
    if (forgotten == NULL)
        goto undecided;
    if (version >= 11) {
        rack = nullable_string(&c, 2);
        if (rack == Py_None)
            Py_CLEAR(rack);
    } else {
        rack = PyUnicode_FromStringAndSize("", 0);
    }
    if (rack == NULL)
        goto undecided;
    if (version >= 12) { /* only an empty tagged-field section is read here */
        if (c.pos >= c.end || c.b[c.pos] != 0)
            goto undecided;
        c.pos++;
    }
    if (version >= 15) { /* no replica_state tag: a consumer's default */
        PyObject *none[2] = {PyLong_FromLong(-1), PyLong_FromLong(-1)};
        state = build((PyTypeObject *)types[3], none, 2);
        if (state == NULL)
            goto undecided;
    } else {
        state = Py_NewRef(Py_None);
    }
    PyObject *fields[12] = {
        Py_NewRef(Py_None), PyLong_FromLongLong(replica_id), state,
        PyLong_FromLongLong(max_wait), PyLong_FromLongLong(min_bytes),
        PyLong_FromLongLong(max_bytes), PyLong_FromLongLong(isolation),
        PyLong_FromLongLong(session_id), PyLong_FromLongLong(session_epoch), topics, forgotten,
        rack};
    state = topics = forgotten = rack = NULL; /* stolen */
    out = build((PyTypeObject *)types[0], fields, 12);
    goto done;
undecided:
    out = undecided();
done:
    Py_XDECREF(topics);
    Py_XDECREF(forgotten);
    Py_XDECREF(rack);
    Py_XDECREF(state);
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef module_methods[] = {
    {"parse_request", (PyCFunction)(void (*)(void))parse_request, METH_FASTCALL,
     "parse_request(frame, header_type, header_version) -> (header, body) or None: "
     "request_header.parse_request in one call (see the source)."},
    {"read_produce", (PyCFunction)(void (*)(void))read_produce, METH_FASTCALL,
     "read_produce(body, flexible, request_type, topic_type, partition_type) -> request or "
     "None: produce_request._decode in one call (see the source)."},
    {"read_fetch", (PyCFunction)(void (*)(void))read_fetch, METH_FASTCALL,
     "read_fetch(body, version, request_type, topic_type, partition_type, replica_state_type, "
     "uuid_of) -> request or None: fetch_request._decode in one call (see the source)."},
    {"encode_plain_fetch", (PyCFunction)(void (*)(void))encode_plain_fetch, METH_FASTCALL,
     "encode_plain_fetch(correlation_id, version, error_code, session_id, responses) -> parts "
     "or None: fetch_response.encode_plain_fetch_response in one call (see the source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "spark_log.protocol._native_wire",
    "The hottest requests' and responses' wire work in C: request headers, Produce and Fetch "
    "bodies, the usual Fetch response (see the comments atop its sources).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__native_wire(void) {
    return PyModule_Create(&module_def);
}
