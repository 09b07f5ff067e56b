/* spark_log.records._native_scan: the per-record walk of a v2 records section, in C.

Owns `scan_head`, which reads one record of an uncompressed records section -- its bounds,
offset delta, key span and where its value starts -- checking every byte it reads against the
section, and what is built on it:

  KeyOffsets: an exact table from record key to the latest offset mapped for it, filled from
      a section (`map_records`) and asked which records of a section are still the latest of
      their key (`kept_records`): the log cleaner's offset map and record filter.

The walks over whole batches built on these (`map_batches`, `filter_batches`) are in
`_native_batches.c`, the reader's field walk (`record_fields`) in `_native_fields.c`;
`_native_scan.h` declares what the files share.

Why: both cleaner walks are a handful of varints per record; in Python they are ~0.7 us a
record, here a few ns. The pure-Python twins (`batch_rewrite`, `key_offsets`) define the
behaviour, and the tests hold both to it: the same results and CorruptRecordError for the
same malformed input. Nothing here reads past a buffer it was given.

Not thread-safe: a KeyOffsets belongs to one cleaning round; every call holds the GIL.
*/
#include "_native_scan.h"

PyObject *corrupt_error; /* spark_log.records.errors.CorruptRecordError */

/* How strictly the tail of a record is checked, matching the Python walk it replaces. */
enum { CHECK_KEY = 0,   /* map_latest_offsets: the key ends inside the record */
       CHECK_VALUE = 1 }; /* scan_record_spans: a value length byte follows the key inside it */

/* base + delta, wrapping instead of overflowing (only a corrupt base offset comes near). */
static inline int64_t offset_of(long long base, int64_t delta) {
    return (int64_t)((uint64_t)base + (uint64_t)delta);
}

int corrupt(Py_ssize_t index, const char *what) {
    PyErr_Format(corrupt_error, "record %zd: %s", index, what);
    return -1;
}

/* A zigzag varint of at most `max_bytes` bytes at *pos, bounded by `limit`. */
static inline int read_zigzag(const uint8_t *b, Py_ssize_t limit, Py_ssize_t *pos,
                              int max_bytes, int64_t *out) {
    uint64_t u = 0;
    Py_ssize_t p = *pos;
    if (p < limit && b[p] < 0x80) { /* the common case: a one-byte varint */
        *pos = p + 1;
        *out = (int64_t)(b[p] >> 1) ^ -(int64_t)(b[p] & 1);
        return 0;
    }
    for (int i = 0; i < max_bytes; i++, p++) {
        if (p >= limit)
            return -1;
        uint8_t byte = b[p];
        u |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *pos = p + 1;
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return -1;
}

/* The record of a section at `pos`; -1 with CorruptRecordError set if it does not parse. */
static int scan_head(const uint8_t *b, Py_ssize_t limit, Py_ssize_t pos, Py_ssize_t index,
                     int check, RecordHead *r) {
    int64_t length, n;
    r->start = pos;
    if (read_zigzag(b, limit, &pos, 5, &length) < 0)
        return corrupt(index, "truncated or bad varint");
    if (length < 3 || length > limit - pos)
        return corrupt(index, "invalid record size");
    r->end = pos + (Py_ssize_t)length;
    Py_ssize_t p = pos + 1; /* the attributes byte, then the timestamp delta (skipped) */
    while (p < limit && b[p] >= 0x80)
        p++;
    p++;
    if (read_zigzag(b, limit, &p, 5, &r->offset_delta) < 0
            || read_zigzag(b, limit, &p, 5, &n) < 0)
        return corrupt(index, "truncated or bad varint");
    r->key_len = n;
    r->key_pos = p;
    if (check == CHECK_KEY) {
        if (p + n > r->end)
            return corrupt(index, "key overruns its record");
    } else {
        if (n >= 0) {
            if (n > limit - p)
                return corrupt(index, "truncated key");
            p += (Py_ssize_t)n;
        }
        if (p >= r->end)
            return corrupt(index, "record overruns its length");
    }
    r->value_pos = p;
    return 0;
}

int check_filled(Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t count) {
    if (pos == limit)
        return 0;
    PyErr_Format(corrupt_error, "%zd bytes remain after %zd records", limit - pos, count);
    return -1;
}

static int get_section(PyObject *obj, Py_buffer *view) {
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

/* ---- KeyOffsets: open addressing with linear probing; key bytes copied into one arena. ---- */

#define INITIAL_SLOTS 1024

/* Seeded multiply-xorshift over 8-byte words; the tail is read as whole loads inside the key
   (no byte loop, no call). The seed (random per table, from the caller) keeps key sets that
   collide from being chosen in advance; a bad case only slows probing, never misleads. */
static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t hash_key(const uint8_t *p, Py_ssize_t n, uint64_t seed) {
    uint64_t h = seed ^ ((uint64_t)n * 0x9E3779B97F4A7C15ULL), tail;
    const uint8_t *end = p + n;
    if (n >= 8) {
        for (; end - p > 8; p += 8) {
            h = (h ^ load64(p)) * 0xBF58476D1CE4E5B9ULL;
            h = (h << 31) | (h >> 33);
        }
        tail = load64(end - 8); /* overlaps the last word: n is hashed in too */
    } else if (n >= 4) {
        tail = load32(p) | (load32(end - 4) << 32);
    } else if (n > 0) {
        tail = (uint64_t)p[0] | ((uint64_t)p[n / 2] << 8) | ((uint64_t)end[-1] << 16);
    } else {
        tail = 0;
    }
    h = (h ^ tail) * 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    return h;
}

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

static Slot *new_slots(size_t n) {
    Slot *slots = PyMem_Malloc(n * sizeof(Slot));
    if (slots == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        slots[i].key_len = -1;
    return slots;
}

static inline Slot *find(KeyOffsets *t, const uint8_t *key, Py_ssize_t n, uint64_t h) {
    size_t i = h & t->mask;
    for (;;) {
        Slot *s = &t->slots[i];
        if (s->key_len < 0 || (s->hash == h && s->key_len == n
                               && memcmp(t->arena + s->key_pos, key, (size_t)n) == 0))
            return s;
        i = (i + 1) & t->mask;
    }
}

static int grow(KeyOffsets *t) {
    size_t n = (t->mask + 1) * 2;
    Slot *slots = new_slots(n), *old = t->slots;
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i <= t->mask; i++) {
        if (old[i].key_len < 0)
            continue;
        size_t j = old[i].hash & (n - 1);
        while (slots[j].key_len >= 0)
            j = (j + 1) & (n - 1);
        slots[j] = old[i];
    }
    t->slots = slots;
    t->mask = n - 1;
    PyMem_Free(old);
    return 0;
}

/* Stores a key not in the table into `slot`, the empty slot `find` returned for it. */
static int insert(KeyOffsets *t, Slot *slot, const uint8_t *key, Py_ssize_t n, uint64_t h,
                  int64_t offset) {
    if (n > t->arena_cap - t->arena_len) {
        Py_ssize_t cap = t->arena_cap * 2 > t->arena_len + n ? t->arena_cap * 2
                                                             : t->arena_len + n + 4096;
        char *arena = PyMem_Realloc(t->arena, (size_t)cap);
        if (arena == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->arena = arena;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, key, (size_t)n);
    slot->hash = h;
    slot->offset = offset;
    slot->key_pos = t->arena_len;
    slot->key_len = n;
    t->arena_len += n;
    t->used++;
    return (size_t)t->used * 2 > t->mask + 1 ? grow(t) : 0;
}

/* table[key] = offset. */
static int put(KeyOffsets *t, const uint8_t *key, Py_ssize_t n, int64_t offset) {
    uint64_t h = hash_key(key, n, t->seed);
    Slot *s = find(t, key, n, h);
    if (s->key_len >= 0) {
        s->offset = offset;
        return 0;
    }
    return insert(t, s, key, n, h, offset);
}

static int64_t get(KeyOffsets *t, const uint8_t *key, Py_ssize_t n, int64_t missing) {
    Slot *s = find(t, key, n, hash_key(key, n, t->seed));
    return s->key_len < 0 ? missing : s->offset;
}

static int reset(KeyOffsets *t) {
    Slot *slots = new_slots(INITIAL_SLOTS);
    if (slots == NULL)
        return -1;
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = INITIAL_SLOTS - 1;
    t->used = 0;
    t->arena_len = 0;
    return 0;
}

/* Allocated in tp_new, so a table is usable even if __init__ is never called. */
static PyObject *KeyOffsets_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    KeyOffsets *t = (KeyOffsets *)type->tp_alloc(type, 0);
    if (t != NULL && reset(t) < 0) {
        Py_DECREF(t);
        return NULL;
    }
    return (PyObject *)t;
}

static int KeyOffsets_init(KeyOffsets *t, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"seed", NULL};
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|K:KeyOffsets", names, &seed))
        return -1;
    t->seed = seed; /* the table is emptied: its entries were placed by the old seed */
    return reset(t);
}

static void KeyOffsets_dealloc(KeyOffsets *t) {
    PyMem_Free(t->slots);
    PyMem_Free(t->arena);
    PyMem_Free(t->parsed);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static Py_ssize_t KeyOffsets_len(KeyOffsets *t) {
    return t->used;
}

static PyObject *KeyOffsets_clear(KeyOffsets *t, PyObject *unused) {
    if (reset(t) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *KeyOffsets_get(KeyOffsets *t, PyObject *args) {
    Py_buffer key;
    long long missing = -1;
    if (!PyArg_ParseTuple(args, "y*|L:get", &key, &missing))
        return NULL;
    int64_t offset = get(t, key.buf, key.len, missing);
    PyBuffer_Release(&key);
    return PyLong_FromLongLong(offset);
}

static PyObject *KeyOffsets_put(KeyOffsets *t, PyObject *args) {
    Py_buffer key;
    long long offset;
    if (!PyArg_ParseTuple(args, "y*L:put", &key, &offset))
        return NULL;
    int rc = put(t, key.buf, key.len, offset);
    PyBuffer_Release(&key);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Parses the records of a section into t->parsed, hashing each key and prefetching its slot,
   so that the probes that follow find their slots in cache. Stops at the first record that
   does not parse (returning -1 with the exception set); *n is how many parsed before it. */
static int parse_section(KeyOffsets *t, const uint8_t *b, Py_ssize_t limit, Py_ssize_t count,
                         int check, Py_ssize_t *n) {
    Py_ssize_t pos = 0;
    *n = 0;
    /* A record takes at least 4 bytes: a count beyond that cannot fill the section. */
    Py_ssize_t room = count < limit / 4 + 1 ? count : limit / 4 + 1;
    if (room > t->parsed_cap) {
        struct Parsed *parsed = PyMem_Realloc(t->parsed, (size_t)room * sizeof(struct Parsed));
        if (parsed == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->parsed = parsed;
        t->parsed_cap = room;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i == room)
            return corrupt(i, "truncated or bad varint");
        struct Parsed *r = &t->parsed[i];
        if (scan_head(b, limit, pos, i, check, &r->head) < 0)
            return -1;
        if (r->head.key_len >= 0) {
            r->hash = hash_key(b + r->head.key_pos, (Py_ssize_t)r->head.key_len, t->seed);
            PREFETCH(&t->slots[r->hash & t->mask]);
        }
        pos = r->head.end;
        *n = i + 1;
    }
    return check_filled(pos, limit, count);
}

#define AHEAD 8 /* records between prefetching a key's bytes and comparing them */

/* Prefetches the stored bytes of the key in the slot where parsed record i probes first. */
static inline void prefetch_key(KeyOffsets *t, Py_ssize_t i, Py_ssize_t n) {
    if (i < n && t->parsed[i].head.key_len >= 0) {
        const Slot *s = &t->slots[t->parsed[i].hash & t->mask];
        if (s->key_len >= 0)
            PREFETCH(t->arena + s->key_pos);
    }
}

static Slot *find_parsed(KeyOffsets *t, const uint8_t *b, const struct Parsed *r) {
    return find(t, b + r->head.key_pos, (Py_ssize_t)r->head.key_len, r->hash);
}

int map_section(KeyOffsets *t, const uint8_t *b, Py_ssize_t len, Py_ssize_t count,
                long long base, long long start_offset) {
    Py_ssize_t n;
    /* The records before a corrupt one are mapped, as the Python walk does; its error stays
       set meanwhile (inserting calls no Python code), or becomes a MemoryError. */
    int rc = parse_section(t, b, len, count, CHECK_KEY, &n);
    for (Py_ssize_t i = 0; i < n && rc != -2; i++) {
        const struct Parsed *r = &t->parsed[i];
        int64_t offset = offset_of(base, r->head.offset_delta);
        prefetch_key(t, i + AHEAD, n);
        if (r->head.key_len < 0 || offset < start_offset)
            continue;
        Slot *slot = find_parsed(t, b, r);
        if (slot->key_len >= 0)
            slot->offset = offset;
        else if (insert(t, slot, b + r->head.key_pos, (Py_ssize_t)r->head.key_len, r->hash,
                        offset) < 0)
            rc = -2;
    }
    return rc < 0 ? -1 : 0;
}

static PyObject *KeyOffsets_map_records(KeyOffsets *t, PyObject *args) {
    PyObject *obj;
    Py_ssize_t count;
    long long base, start_offset;
    if (!PyArg_ParseTuple(args, "OnLL:map_records", &obj, &count, &base, &start_offset))
        return NULL;
    Py_buffer view;
    if (get_section(obj, &view) < 0)
        return NULL;
    int rc = map_section(t, view.buf, view.len, count, base, start_offset);
    PyBuffer_Release(&view);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The kept records as batch_rewrite's RecordSpan tuples: (offset, key, has_value, start, end). */
static PyObject *kept_spans(KeyOffsets *t, const uint8_t *b, Py_ssize_t n, long long base) {
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        const RecordHead *r = &t->parsed[i].head;
        PyObject *key = r->key_len < 0 ? Py_NewRef(Py_None)
            : PyBytes_FromStringAndSize((const char *)b + r->key_pos, (Py_ssize_t)r->key_len);
        PyObject *span = key == NULL ? NULL
            : Py_BuildValue("(LNOnn)", (long long)offset_of(base, r->offset_delta), key,
                            (b[r->value_pos] & 1) ? Py_False : Py_True, r->start, r->end);
        if (span == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, span);
    }
    return list;
}

/* A record is kept when it is past `latest`, or it has a key whose mapped offset is not past
   it (or is unmapped) and it has a value or `keep_deletes`. */
int kept_section(KeyOffsets *t, const uint8_t *b, Py_ssize_t len, Py_ssize_t count,
                 long long base, long long latest, int keep_deletes, Py_ssize_t *kept,
                 int *tombstones) {
    Py_ssize_t n;
    *kept = 0;
    *tombstones = 0;
    if (parse_section(t, b, len, count, CHECK_VALUE, &n) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const struct Parsed *r = &t->parsed[i];
        int64_t offset = offset_of(base, r->head.offset_delta);
        int has_value = !(b[r->head.value_pos] & 1); /* a null value: a negative (odd) length */
        prefetch_key(t, i + AHEAD, n);
        const Slot *slot;
        if (offset > latest || (r->head.key_len >= 0 && (has_value || keep_deletes)
                                && offset >= ((slot = find_parsed(t, b, r))->key_len < 0
                                              ? -1 : slot->offset))) {
            t->parsed[(*kept)++] = *r; /* kept <= i: compacts the kept ones to the front */
            *tombstones |= !has_value;
        }
    }
    return 0;
}

/* (None if every record is kept, else the kept spans; whether a kept record is a tombstone). */
static PyObject *KeyOffsets_kept_records(KeyOffsets *t, PyObject *args) {
    PyObject *obj;
    Py_ssize_t count, kept;
    long long base, latest;
    int keep_deletes, tombstones;
    if (!PyArg_ParseTuple(args, "OnLLp:kept_records", &obj, &count, &base, &latest,
                          &keep_deletes))
        return NULL;
    Py_buffer view;
    if (get_section(obj, &view) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    PyObject *spans = NULL;
    if (kept_section(t, b, view.len, count, base, latest, keep_deletes, &kept,
                     &tombstones) == 0)
        spans = kept == count ? Py_NewRef(Py_None) : kept_spans(t, b, kept, base);
    PyBuffer_Release(&view);
    if (spans == NULL)
        return NULL;
    return Py_BuildValue("(NO)", spans, tombstones ? Py_True : Py_False);
}

static PyMethodDef KeyOffsets_methods[] = {
    {"clear", (PyCFunction)KeyOffsets_clear, METH_NOARGS, "Forget every key."},
    {"get", (PyCFunction)KeyOffsets_get, METH_VARARGS,
     "get(key, missing=-1): the latest offset mapped for key."},
    {"put", (PyCFunction)KeyOffsets_put, METH_VARARGS, "put(key, offset): map key to offset."},
    {"map_records", (PyCFunction)KeyOffsets_map_records, METH_VARARGS,
     "map_records(section, count, base_offset, start_offset): map each keyed record at or "
     "after start_offset to its offset, later records winning."},
    {"kept_records", (PyCFunction)KeyOffsets_kept_records, METH_VARARGS,
     "kept_records(section, count, base_offset, latest, keep_deletes) -> (spans or None, "
     "tombstones): the records that are still the latest of their key."},
    {"map_batches", (PyCFunction)KeyOffsets_map_batches, METH_VARARGS,
     "map_batches(chunk, pos, limit, start_offset, room) -> (pos, latest, records, stop): "
     "the offset-map walk over whole batches; see record_scan.PyKeyOffsets.map_batches."},
    {"filter_batches", (PyCFunction)KeyOffsets_filter_batches, METH_VARARGS,
     "filter_batches(chunk, pos, limit, latest, now_ms, upper_bound, checked_from, "
     "checked_to) -> (pos, decisions, counts): the rewrite walk over whole batches; see "
     "record_scan.PyKeyOffsets.filter_batches."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods KeyOffsets_sequence = {.sq_length = (lenfunc)KeyOffsets_len};

static PyTypeObject KeyOffsetsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "spark_log.records._native_scan.KeyOffsets",
    .tp_basicsize = sizeof(KeyOffsets),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Record key -> latest offset, exact (keys compared whole). One owner at a time.",
    .tp_new = KeyOffsets_new,
    .tp_init = (initproc)KeyOffsets_init,
    .tp_dealloc = (destructor)KeyOffsets_dealloc,
    .tp_methods = KeyOffsets_methods,
    .tp_as_sequence = &KeyOffsets_sequence,
};

static PyMethodDef module_methods[] = {
    {"whole_batches", whole_batches, METH_O,
     "whole_batches(buf) -> int: the length of the prefix of buf made of whole batches."},
    {"client_batch", (PyCFunction)(void (*)(void))client_batch, METH_FASTCALL,
     "client_batch(header_type, view, max_message_bytes, next_offset, leader_epoch) -> "
     "(header, header bytes) or None: a produce request's one batch checked as the log "
     "validator checks it, with its offsets assigned (see the source)."},
    {"record_fields", record_fields, METH_VARARGS,
     "record_fields(buf, sections, out) -> with_headers: the field positions of every record "
     "of the (lo, hi, count) sections of buf, as int64 columns into out (see "
     "_native_fields.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "spark_log.records._native_scan",
    "The per-record walk of v2 records sections, in C (see the comment atop its source).",
    -1, module_methods,
};

PyMODINIT_FUNC PyInit__native_scan(void) {
    PyObject *errors = PyImport_ImportModule("spark_log.records.errors");
    if (errors == NULL)
        return NULL;
    corrupt_error = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (corrupt_error == NULL || init_batches() < 0 || PyType_Ready(&KeyOffsetsType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "KeyOffsets", (PyObject *)&KeyOffsetsType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
