/* The trace writer's hot path, compiled: a role's trace records (docs/trace.md) stored whole
 * into its file's shared mapping, to the bytes of alpha.runtime.tracing's Python writer.
 *
 * A CPython extension module, alpha_trace_store, with one type, Writer:
 *
 *     Writer(limit, ring, phases, establishing, completing, grow)
 *
 * holds what the Python writer (tracing._PythonWriter) holds: the records written (`seq`),
 * the bytes of the file reserved and mapped (`size`), the mapping (`buffer`), the role's
 * whereabouts (`where`), whether it is open (`open`); and the same one method,
 *
 *     frame(event, kind, peer, slot, version, extent, detail, start, flags=0)
 *
 * which places record `seq` where the bounds say (the first `limit` records, or a ring of
 * them), calls `grow()` when the record lies past the reserved room (the Python side reserves
 * and maps the next chunk, and sets `size` and `buffer`; a false answer drops the record),
 * takes the round and the phase from `where` (`phases` maps its phase to a record's; another
 * phase is `completing`; no whereabouts is `establishing`, outside the rounds), reads `end`
 * from CLOCK_MONOTONIC in nanoseconds (time.monotonic_ns's clock), and stores the 96 bytes:
 * the fields little-endian in alpha.records.trace.RECORD_BODY's order, the mark, then the
 * check, the first 92 bytes as one little-endian integer modulo CHECK_PRIME. The record is
 * made in a local block and copied into the mapping at once. A field out of its range, a
 * detail that is not 32 bytes: an exception, and nothing stored.
 *
 * alpha.native compiles it on first use; alpha.runtime.tracing checks it against the Python
 * writer before a trace uses it, and writes with Python wherever it cannot be had.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>
#include <time.h>

#define RECORD_SIZE 96
#define HEADER_SIZE 96 /* record i is at 96 + 96 i */
#define CHECKED 92     /* the check covers bytes 0..92 */
#define DETAIL_SIZE 32
#define CHECK_PRIME 1073741789ULL /* 2^30 - 35: alpha.records.trace.CHECK_PRIME */
#define NONE_U32 0xFFFFFFFFUL     /* no peer, no slot, outside the rounds */

typedef struct {
    PyObject_HEAD
    PyObject *buffer; /* the mapping: a writable buffer, None until the first chunk */
    PyObject *where;  /* the role's whereabouts, or None */
    PyObject *phases; /* dict: a whereabouts' phase -> a record's */
    PyObject *grow;   /* () -> bool: reserve and map the next chunk */
    unsigned long long seq;
    unsigned long long limit;
    Py_ssize_t size;
    int ring;
    char open; /* T_BOOL */
    int establishing;
    int completing;
} Writer;

static PyObject *PHASE;  /* "phase", interned */
static PyObject *ROUND;  /* "round", interned */

static void put64(unsigned char *at, uint64_t value) {
    for (int i = 0; i < 8; i++) at[i] = (unsigned char)(value >> (8 * i));
}

static void put32(unsigned char *at, uint32_t value) {
    for (int i = 0; i < 4; i++) at[i] = (unsigned char)(value >> (8 * i));
}

/* The first 92 bytes as one little-endian integer modulo the prime: Horner's rule over its 23
 * 32-bit words from the most significant; the remainder stays below 2^30, so (r << 32) | word
 * fits 64 bits. */
static uint32_t check_of(const unsigned char *block) {
    uint64_t remainder = 0;
    for (int i = CHECKED / 4 - 1; i >= 0; i--) {
        const unsigned char *w = block + 4 * i;
        uint64_t word = (uint64_t)w[0] | (uint64_t)w[1] << 8 | (uint64_t)w[2] << 16 |
                        (uint64_t)w[3] << 24;
        remainder = ((remainder << 32) | word) % CHECK_PRIME;
    }
    return (uint32_t)remainder;
}

/* An argument as an unsigned field of `bits` bits (None as `none`, where `none` is not 0);
 * -1 with an exception set when it is not an int in range. */
static int field(PyObject *argument, int bits, uint64_t none, uint64_t *value) {
    if (argument == Py_None && none) {
        *value = none;
        return 0;
    }
    unsigned long long got = PyLong_AsUnsignedLongLong(argument);
    if (got == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (bits < 64 && got >> bits) {
        PyErr_Format(PyExc_OverflowError, "a record field of %d bits got %llu", bits, got);
        return -1;
    }
    *value = (uint64_t)got;
    return 0;
}

/* The record's phase and round, from the whereabouts; -1 with an exception set. */
static int whereabouts(Writer *self, uint64_t *phase, uint64_t *round) {
    if (self->where == Py_None) {
        *phase = (uint64_t)self->establishing;
        *round = NONE_U32;
        return 0;
    }
    PyObject *named = PyObject_GetAttr(self->where, PHASE);
    if (named == NULL) return -1;
    PyObject *code = PyDict_GetItemWithError(self->phases, named); /* borrowed */
    Py_DECREF(named);
    if (code == NULL && PyErr_Occurred()) return -1;
    if (code == NULL) {
        *phase = (uint64_t)self->completing;
    } else if (field(code, 8, 0, phase) < 0) {
        return -1;
    }
    PyObject *number = PyObject_GetAttr(self->where, ROUND);
    if (number == NULL) return -1;
    int failed = field(number, 32, NONE_U32, round);
    Py_DECREF(number);
    return failed;
}

static PyObject *writer_frame(Writer *self, PyObject *const *args, Py_ssize_t count) {
    if (count != 8 && count != 9) {
        PyErr_Format(PyExc_TypeError, "frame takes 8 or 9 arguments, got %zd", count);
        return NULL;
    }
    if (!self->open) Py_RETURN_NONE;
    unsigned long long seq = self->seq;
    self->seq = seq + 1;
    Py_ssize_t at;
    if (seq < self->limit) {
        at = HEADER_SIZE + (Py_ssize_t)seq * RECORD_SIZE;
    } else if (self->ring) {
        at = HEADER_SIZE + (Py_ssize_t)(seq % self->limit) * RECORD_SIZE;
    } else {
        Py_RETURN_NONE; /* a "first" trace past its limit keeps what it has */
    }
    if (at >= self->size) {
        PyObject *grown = PyObject_CallNoArgs(self->grow);
        if (grown == NULL) return NULL;
        int ok = PyObject_IsTrue(grown);
        Py_DECREF(grown);
        if (ok < 0) return NULL;
        if (!ok) Py_RETURN_NONE; /* the trace was given up */
    }
    /* event, kind, peer, slot, version, extent */
    uint64_t event, kind, peer, slot, version, extent, phase, round, flags = 0;
    if (field(args[0], 8, 0, &event) < 0 || field(args[1], 8, 0, &kind) < 0 ||
        field(args[2], 32, NONE_U32, &peer) < 0 || field(args[3], 32, 0, &slot) < 0 ||
        field(args[4], 64, 0, &version) < 0 || field(args[5], 64, 0, &extent) < 0 ||
        (count == 9 && field(args[8], 8, 0, &flags) < 0))
        return NULL;
    long long start = PyLong_AsLongLong(args[7]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    unsigned char record[RECORD_SIZE];
    if (args[6] == Py_None) {
        memset(record + 56, 0, DETAIL_SIZE);
    } else {
        char *detail;
        Py_ssize_t detail_size;
        if (PyBytes_AsStringAndSize(args[6], &detail, &detail_size) < 0) return NULL;
        if (detail_size != DETAIL_SIZE) {
            PyErr_Format(PyExc_ValueError, "a record's detail is %d bytes, got %zd",
                         DETAIL_SIZE, detail_size);
            return NULL;
        }
        memcpy(record + 56, detail, DETAIL_SIZE);
    }
    if (whereabouts(self, &phase, &round) < 0) return NULL;
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    uint64_t end = (uint64_t)now.tv_sec * 1000000000ULL + (uint64_t)now.tv_nsec;

    put64(record, seq);
    put64(record + 8, (uint64_t)start); /* two's complement, as struct's "q" */
    put64(record + 16, end);
    record[24] = (unsigned char)event;
    record[25] = (unsigned char)kind;
    record[26] = (unsigned char)phase;
    record[27] = (unsigned char)flags;
    put32(record + 28, (uint32_t)peer);
    put32(record + 32, (uint32_t)slot);
    put32(record + 36, (uint32_t)round);
    put64(record + 40, version);
    put64(record + 48, extent);
    memcpy(record + 88, "ATR1", 4); /* alpha.records.trace.RECORD_MARK */
    put32(record + CHECKED, check_of(record));

    Py_buffer view;
    if (PyObject_GetBuffer(self->buffer, &view, PyBUF_WRITABLE) < 0) return NULL;
    if (view.len < RECORD_SIZE || at > view.len - RECORD_SIZE) {
        PyBuffer_Release(&view);
        PyErr_Format(PyExc_IndexError, "a record at byte %zd is past the mapping's end", at);
        return NULL;
    }
    memcpy((unsigned char *)view.buf + at, record, RECORD_SIZE);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static int writer_init(Writer *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"limit", "ring", "phases", "establishing", "completing", "grow",
                            NULL};
    unsigned long long limit;
    int ring, establishing, completing;
    PyObject *phases, *grow;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KpO!iiO", names, &limit, &ring,
                                     &PyDict_Type, &phases, &establishing, &completing, &grow))
        return -1;
    if (limit == 0) {
        PyErr_SetString(PyExc_ValueError, "a trace's limit is at least one record");
        return -1;
    }
    if (!PyCallable_Check(grow)) {
        PyErr_SetString(PyExc_TypeError, "grow must be callable");
        return -1;
    }
    Py_INCREF(phases);
    Py_XSETREF(self->phases, phases);
    Py_INCREF(grow);
    Py_XSETREF(self->grow, grow);
    Py_INCREF(Py_None);
    Py_XSETREF(self->buffer, Py_None);
    Py_INCREF(Py_None);
    Py_XSETREF(self->where, Py_None);
    self->limit = limit;
    self->ring = ring;
    self->establishing = establishing;
    self->completing = completing;
    self->seq = 0;
    self->size = HEADER_SIZE;
    self->open = 1;
    return 0;
}

static int writer_traverse(Writer *self, visitproc visit, void *arg) {
    Py_VISIT(self->buffer);
    Py_VISIT(self->where);
    Py_VISIT(self->phases);
    Py_VISIT(self->grow);
    return 0;
}

static int writer_clear(Writer *self) {
    Py_CLEAR(self->buffer);
    Py_CLEAR(self->where);
    Py_CLEAR(self->phases);
    Py_CLEAR(self->grow);
    return 0;
}

static void writer_dealloc(Writer *self) {
    PyObject_GC_UnTrack(self);
    writer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef writer_members[] = {
    {"buffer", T_OBJECT_EX, offsetof(Writer, buffer), 0, "the mapping the records go into"},
    {"where", T_OBJECT_EX, offsetof(Writer, where), 0, "the role's whereabouts, or None"},
    {"seq", T_ULONGLONG, offsetof(Writer, seq), 0, "records written (past the limit too)"},
    {"size", T_PYSSIZET, offsetof(Writer, size), 0, "bytes of the file reserved and mapped"},
    {"open", T_BOOL, offsetof(Writer, open), 0, "false once the trace is closed or given up"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef writer_methods[] = {
    {"frame", (PyCFunction)(void (*)(void))writer_frame, METH_FASTCALL,
     "frame(event, kind, peer, slot, version, extent, detail, start, flags=0): one record, "
     "from start to now."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "alpha_trace_store.Writer",
    .tp_doc = "A trace's records stored into its mapping (alpha/runtime/trace_store.c).",
    .tp_basicsize = sizeof(Writer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)writer_init,
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_traverse = (traverseproc)writer_traverse,
    .tp_clear = (inquiry)writer_clear,
    .tp_members = writer_members,
    .tp_methods = writer_methods,
};

static struct PyModuleDef definition = {
    PyModuleDef_HEAD_INIT, "alpha_trace_store",
    "A trace's records stored whole (alpha/runtime/trace_store.c).", -1, NULL,
};

PyMODINIT_FUNC PyInit_alpha_trace_store(void) {
    PHASE = PyUnicode_InternFromString("phase");
    ROUND = PyUnicode_InternFromString("round");
    if (PHASE == NULL || ROUND == NULL) return NULL;
    if (PyType_Ready(&WriterType) < 0) return NULL;
    PyObject *module = PyModule_Create(&definition);
    if (module == NULL) return NULL;
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "Writer", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
