/* spark_log.records._native_scan, the batch half: the log cleaner's two walks over a chunk of
whole v2 batches read from a segment, one call per chunk instead of a Python step per batch.

  map_batches: the offset map's walk (the default batch policy's): each batch's header is
      checked, its CRC-32C verified and its records mapped (`map_section`).
  whole_batches: how much of a read holds whole batches, by their length fields.
  filter_batches: the rewrite's walk: says for each batch whether it is copied whole, dropped,
      or left to the caller's RecordFilter (anything compressed, a control batch, an empty
      batch, the round's last batch, or one to rebuild).
  client_batch: a produce request's one batch, checked as the log validator checks a client's
      batch (header, client rules, size, CRC), and the leader's header for it (its offsets and
      leader epoch assigned).

Why: the cleaner's Python around each batch (header, policy, CRC call, generator step) cost
~2.5 us a batch a walk, as much as the C record walk of a 200-record batch.

Both stop at the first batch they leave to the caller; `record_scan.PyKeyOffsets` holds their
pure-Python twins, which define the behaviour (the same results, CorruptRecordError for the
same input: the header checks of `batch_header.read_header`, with its messages). Every read
is checked against the chunk. The CRC is `spark_log.records.crc`'s, as the Python path's.
*/
#include "_native_scan.h"

enum { HEADER_SIZE = 61, LOG_OVERHEAD = 12, CRC_START = 21, MAGIC = 2 };
enum { COMPRESSION_MASK = 0x07, CONTROL_BIT = 0x20, DELETE_HORIZON_BIT = 0x40 };
/* As record_scan numbers them. Why a walk stopped: */
enum { WALK_END = 0, WALK_FULL = 1, WALK_CALLER = 2 };
/* What to do with a batch: */
enum { KEEP = 0, BY_CALLER = 1, DROP = 2 };

static PyObject *crc32c_fn; /* spark_log.records.crc.crc32c */

typedef struct {
    int64_t base_offset, last_offset, base_timestamp, producer_id;
    int32_t batch_length, last_offset_delta, records_count;
    uint32_t crc;
    int16_t attributes;
    int8_t magic;
    Py_ssize_t size;
    int overflows; /* the last offset does not fit 64 bits: left to the caller */
} Header;

static inline uint64_t be(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static int bad_header(const char *format, ...);

/* batch_header.read_header, with its checks and messages. */
static int read_batch_header(const uint8_t *b, Py_ssize_t len, Py_ssize_t pos, Header *h) {
    Py_ssize_t available = len - pos;
    if (available < HEADER_SIZE)
        return bad_header("batch at byte %zd: %zd bytes left, a batch header needs %d", pos,
                          available, (int)HEADER_SIZE);
    const uint8_t *p = b + pos;
    h->base_offset = (int64_t)be(p, 8);
    h->batch_length = (int32_t)be(p + 8, 4);
    h->magic = (int8_t)p[16];
    h->crc = (uint32_t)be(p + 17, 4);
    h->attributes = (int16_t)be(p + 21, 2);
    h->last_offset_delta = (int32_t)be(p + 23, 4);
    h->base_timestamp = (int64_t)be(p + 27, 8);
    h->producer_id = (int64_t)be(p + 43, 8);
    h->records_count = (int32_t)be(p + 57, 4);
    h->size = LOG_OVERHEAD + (Py_ssize_t)h->batch_length;
    if (h->magic != MAGIC)
        return bad_header("batch at byte %zd: magic %d, only record batch v2 (magic 2) is "
                          "supported", pos, (int)h->magic);
    if (h->batch_length < HEADER_SIZE - LOG_OVERHEAD)
        return bad_header("batch at byte %zd: batch length %d too small", pos,
                          (int)h->batch_length);
    if (h->size > available)
        return bad_header("batch at byte %zd: batch length %d runs past the end (%zd bytes "
                          "left)", pos, (int)h->batch_length, available);
    if (h->last_offset_delta < 0 || h->records_count < 0)
        return bad_header("batch at byte %zd: negative last offset delta or record count",
                          pos);
    h->overflows = h->base_offset > INT64_MAX - h->last_offset_delta;
    h->last_offset = h->overflows ? INT64_MAX : h->base_offset + h->last_offset_delta;
    return 0;
}

static int bad_header(const char *format, ...) {
    va_list args;
    va_start(args, format);
    PyErr_FormatV(corrupt_error, format, args);
    va_end(args);
    return -1;
}

/* batch_header.verify_crc, with its message. */
static int check_crc(const uint8_t *b, Py_ssize_t pos, const Header *h) {
    PyObject *covered = PyMemoryView_FromMemory((char *)b + pos + CRC_START,
                                                h->size - CRC_START, PyBUF_READ);
    if (covered == NULL)
        return -1;
    PyObject *result = PyObject_CallOneArg(crc32c_fn, covered);
    Py_DECREF(covered);
    if (result == NULL)
        return -1;
    unsigned long actual = PyLong_AsUnsignedLong(result);
    Py_DECREF(result);
    if (actual == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    if (actual == h->crc)
        return 0;
    char stored_hex[16], actual_hex[24];
    snprintf(stored_hex, sizeof stored_hex, "%#010x", (unsigned)h->crc);
    snprintf(actual_hex, sizeof actual_hex, "%#010lx", actual);
    PyErr_Format(corrupt_error, "batch at byte %zd (base offset %lld): CRC mismatch, stored "
                 "%s, computed %s", pos, (long long)h->base_offset, stored_hex, actual_hex);
    return -1;
}

/* One batch of the map walk: WALK_END to go on (*records mapped), or why to stop before it. */
static int map_batch(KeyOffsets *t, const uint8_t *b, Py_ssize_t pos, const Header *h,
                     long long start_offset, Py_ssize_t room, Py_ssize_t *records) {
    *records = 0;
    if (h->overflows || (h->attributes & COMPRESSION_MASK))
        return WALK_CALLER;
    if ((h->attributes & CONTROL_BIT) || h->records_count == 0)
        return WALK_END;
    if (t->used > 0 && t->used + h->records_count > room)
        return WALK_FULL;
    if (check_crc(b, pos, h) < 0
            || map_section(t, b + pos + HEADER_SIZE, h->size - HEADER_SIZE, h->records_count,
                           h->base_offset, start_offset) < 0)
        return -1;
    *records = h->records_count;
    return WALK_END;
}

PyObject *KeyOffsets_map_batches(KeyOffsets *t, PyObject *args) {
    PyObject *obj;
    Py_ssize_t pos, limit, room, mapped = 0, records;
    long long start_offset, latest = -1;
    int stop = WALK_END;
    if (!PyArg_ParseTuple(args, "OnnLn:map_batches", &obj, &pos, &limit, &start_offset, &room))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    Header h;
    while (pos >= 0 && pos < view.len && pos < limit) {
        if (read_batch_header(b, view.len, pos, &h) < 0)
            goto fail;
        if (h.last_offset >= start_offset) {
            stop = map_batch(t, b, pos, &h, start_offset, room, &records);
            if (stop < 0)
                goto fail;
            if (stop != WALK_END)
                break;
            mapped += records;
            latest = h.last_offset > latest ? h.last_offset : latest;
        }
        pos += h.size;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLni)", pos, latest, mapped, stop);
fail:
    PyBuffer_Release(&view);
    return NULL;
}

typedef struct {
    long long latest, now_ms, upper_bound, checked_from, checked_to;
} FilterArgs;

/* The record walk failed: the Python walk checks the CRC first, so a batch that fails it
   says so instead. */
static int walk_failed(const uint8_t *b, Py_ssize_t pos, const Header *h) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (check_crc(b, pos, h) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        return -1;
    }
    PyErr_Restore(type, value, traceback);
    return -1;
}

/* KEEP, DROP or BY_CALLER for one batch (RecordFilter's decision under the default policy);
   -1 with the error set. The CRC is checked before a batch is copied or dropped, unless the
   offset map's walk checked it this round (its last offset in [checked_from, checked_to]);
   a batch left to the caller is checked there. */
static int decide(KeyOffsets *t, const uint8_t *b, Py_ssize_t pos, const Header *h,
                  const FilterArgs *a) {
    int horizon = (h->attributes & DELETE_HORIZON_BIT) != 0, tombstones, outcome;
    Py_ssize_t kept;
    if (h->overflows || (h->attributes & (COMPRESSION_MASK | CONTROL_BIT))
            || h->records_count == 0 || h->last_offset + 1 == a->upper_bound)
        return BY_CALLER;
    if (kept_section(t, b + pos + HEADER_SIZE, h->size - HEADER_SIZE, h->records_count,
                     h->base_offset, a->latest, !horizon || a->now_ms < h->base_timestamp,
                     &kept, &tombstones) < 0)
        return walk_failed(b, pos, h);
    if (kept == 0)
        outcome = h->producer_id >= 0 ? BY_CALLER : DROP; /* the default policy's retention */
    else if (kept == h->records_count && !(tombstones && !horizon))
        outcome = KEEP;
    else
        outcome = BY_CALLER; /* rebuilt without some records, or under a delete horizon */
    if (outcome != BY_CALLER
            && !(a->checked_from <= h->last_offset && h->last_offset <= a->checked_to)
            && check_crc(b, pos, h) < 0)
        return -1;
    return outcome;
}

/* Appends (pos, code) to `decisions`, or counts a dropped batch, into counts
   (messages read, bytes read, messages retained, bytes retained). */
static int record_decision(PyObject *decisions, Py_ssize_t pos, const Header *h, int outcome,
                           Py_ssize_t counts[4]) {
    if (outcome != BY_CALLER) {
        counts[0] += h->records_count;
        counts[1] += h->size;
    }
    if (outcome == DROP)
        return 0;
    if (outcome == KEEP) {
        counts[2] += h->records_count;
        counts[3] += h->size;
    }
    PyObject *item = Py_BuildValue("(ni)", pos, outcome);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(decisions, item);
    Py_DECREF(item);
    return rc;
}

PyObject *KeyOffsets_filter_batches(KeyOffsets *t, PyObject *args) {
    PyObject *obj;
    Py_ssize_t pos, limit, counts[4] = {0, 0, 0, 0};
    FilterArgs a;
    if (!PyArg_ParseTuple(args, "OnnLLLLL:filter_batches", &obj, &pos, &limit, &a.latest,
                          &a.now_ms, &a.upper_bound, &a.checked_from, &a.checked_to))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *decisions = PyList_New(0);
    const uint8_t *b = view.buf;
    Header h;
    int outcome = KEEP;
    while (decisions != NULL && pos >= 0 && pos < view.len && pos < limit
           && outcome != BY_CALLER) {
        if (read_batch_header(b, view.len, pos, &h) < 0
                || (outcome = decide(t, b, pos, &h, &a)) < 0
                || record_decision(decisions, pos, &h, outcome, counts) < 0)
            Py_CLEAR(decisions);
        else
            pos += h.size;
    }
    PyBuffer_Release(&view);
    if (decisions == NULL)
        return NULL;
    return Py_BuildValue("(nN(nnnn))", pos, decisions, counts[0], counts[1], counts[2],
                         counts[3]);
}

PyObject *whole_batches(PyObject *module, PyObject *obj) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    Py_ssize_t pos = 0;
    while (view.len - pos >= LOG_OVERHEAD) {
        Py_ssize_t size = LOG_OVERHEAD + (Py_ssize_t)(int32_t)be(b + pos + 8, 4);
        if (size < HEADER_SIZE || size > view.len - pos)
            break;
        pos += size;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
}

/* A client's one batch of a produce request, checked as log_validator.validate_append checks
   it: the header (read_header's errors), the client rules (base offset 0, a record count
   matching the offset delta, no control batch, a sequence when it has a producer id), the
   size against max.message.bytes, then the CRC (verify_crc's error). Returns the leader's
   header for it, its offsets from `next_offset` and its partition leader epoch
   `leader_epoch`, as (a `header_type` (batch_header.BatchHeader, the first argument), the
   61 header bytes): both lie outside the CRC, so the records stay as they are. Returns None
   where the validator's own walk must decide: anything but exactly one whole batch, a broken
   client rule or a batch too large (their errors name the partition, which only the
   validator knows). */
PyObject *client_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "client_batch(header_type, view, max_message_bytes, "
                                         "next_offset, leader_epoch)");
        return NULL;
    }
    Py_ssize_t max_bytes = PyLong_AsSsize_t(args[2]);
    if (max_bytes == -1 && PyErr_Occurred())
        return NULL;
    long long next_offset = PyLong_AsLongLong(args[3]);
    if (next_offset == -1 && PyErr_Occurred())
        return NULL;
    long leader_epoch = PyLong_AsLong(args[4]);
    if (leader_epoch == -1 && PyErr_Occurred())
        return NULL;
    if (leader_epoch < INT32_MIN || leader_epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "client_batch: leader_epoch exceeds 32 bits");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)args[0];
    if (!PyType_Check(args[0]) || !PyType_IsSubtype(type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "client_batch: header_type must be a tuple type");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = view.buf;
    Header h;
    PyObject *out = NULL, *header = NULL, *raw = NULL;
    if (view.len < HEADER_SIZE) { /* no batch at all: the validator names it */
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (read_batch_header(b, view.len, 0, &h) < 0)
        goto done; /* read_header's error */
    int16_t producer_epoch = (int16_t)be(b + 51, 2);
    int32_t base_sequence = (int32_t)be(b + 53, 4);
    if (h.size != view.len || h.base_offset != 0 || h.records_count <= 0
            || h.records_count != h.last_offset_delta + 1 || (h.attributes & CONTROL_BIT)
            || (h.producer_id >= 0 && base_sequence < 0) || h.size > max_bytes) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (check_crc(b, 0, &h) < 0)
        goto done;
    raw = PyBytes_FromStringAndSize((const char *)b, HEADER_SIZE);
    header = type->tp_alloc(type, 13);
    if (raw == NULL || header == NULL)
        goto done;
    uint8_t *patched = (uint8_t *)PyBytes_AS_STRING(raw);
    for (int i = 0; i < 8; i++) /* big-endian base offset, then partition leader epoch */
        patched[i] = (uint8_t)((unsigned long long)next_offset >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        patched[12 + i] = (uint8_t)((uint32_t)leader_epoch >> (24 - 8 * i));
    PyObject *fields[13] = {
        PyLong_FromLongLong(next_offset), PyLong_FromLong(h.batch_length),
        PyLong_FromLong(leader_epoch), PyLong_FromLong(h.magic),
        PyLong_FromUnsignedLong(h.crc), PyLong_FromLong(h.attributes),
        PyLong_FromLong(h.last_offset_delta), PyLong_FromLongLong(h.base_timestamp),
        PyLong_FromLongLong((int64_t)be(b + 35, 8)), PyLong_FromLongLong(h.producer_id),
        PyLong_FromLong(producer_epoch), PyLong_FromLong(base_sequence),
        PyLong_FromLong(h.records_count),
    };
    for (int i = 0; i < 13; i++) {
        if (fields[i] == NULL) { /* out of memory: the others go with the tuple */
            for (int j = i + 1; j < 13; j++)
                Py_XDECREF(fields[j]);
            goto done;
        }
        PyTuple_SET_ITEM(header, i, fields[i]);
    }
    out = PyTuple_Pack(2, header, raw);
done:
    Py_XDECREF(header);
    Py_XDECREF(raw);
    PyBuffer_Release(&view);
    return out;
}

int init_batches(void) {
    PyObject *crc32c = PyImport_ImportModule("spark_log.records.crc");
    if (crc32c == NULL)
        return -1;
    crc32c_fn = PyObject_GetAttrString(crc32c, "crc32c");
    Py_DECREF(crc32c);
    return crc32c_fn == NULL ? -1 : 0;
}
