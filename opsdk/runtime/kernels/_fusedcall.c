/* The call of a fused CPU kernel: its arrays' data pointers collected through the buffer
 * protocol and the kernel's C function called with them, the GIL released meanwhile.
 *
 * kernels/fused.py calls a generated kernel (templates/fused/fused_cpu.cc.j2) many times a step
 * in a loop: through ctypes each array's pointer cost about a microsecond to read
 * (`__array_interface__`), fifteen of them more than the kernel's own work on small values. Here a
 * pointer costs a buffer request. The module is optional: where it was not compiled, fused.py
 * calls through ctypes as before.
 *
 *   call(address, rows, inputs, outputs, *sizes)
 *
 * address: the kernel function's address; rows: false for opsdk_fused(in, out, n, threads),
 * true for opsdk_fused_rows(in, out, rows, inner, threads); inputs and outputs: sequences of
 * C-contiguous buffers (outputs writable); sizes: n, threads or rows, inner, threads. The
 * caller has checked each buffer's dtype and size against the kernel (fused_node.py); this
 * module checks contiguity and writability, and raises BufferError or TypeError otherwise. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef void (*flat_fn)(const void* const*, void* const*, int64_t, int);
typedef void (*rows_fn)(const void* const*, void* const*, int64_t, int64_t, int);

enum { ON_STACK = 32 };

/* Views of every item of `seq` (a list or tuple), their pointers in `ptrs`; on failure the
 * views taken so far are released and -1 returned with an exception set. */
static Py_ssize_t take_views(PyObject* seq, Py_buffer* views, void** ptrs, Py_ssize_t n,
                             int flags) {
    PyObject** items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; ++i) {
        if (PyObject_GetBuffer(items[i], &views[i], flags) != 0) {
            for (Py_ssize_t j = 0; j < i; ++j) PyBuffer_Release(&views[j]);
            return -1;
        }
        ptrs[i] = views[i].buf;
    }
    return n;
}

static void release_views(Py_buffer* views, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; ++i) PyBuffer_Release(&views[i]);
}

static PyObject* fused_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 && nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "call(address, rows, inputs, outputs, *sizes) takes 2 or 3 sizes");
        return NULL;
    }
    void* address = PyLong_AsVoidPtr(args[0]);
    if (address == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a null kernel address");
        return NULL;
    }
    int rows = PyObject_IsTrue(args[1]);
    if (rows < 0) return NULL;
    if (nargs != (rows ? 7 : 6)) {
        PyErr_SetString(PyExc_TypeError, rows ? "a rows kernel takes rows, inner, threads"
                                              : "a flat kernel takes n, threads");
        return NULL;
    }
    int64_t sizes[3] = {0, 0, 0};
    for (Py_ssize_t k = 4; k < nargs; ++k) {
        sizes[k - 4] = PyLong_AsLongLong(args[k]);
        if (sizes[k - 4] == -1 && PyErr_Occurred()) return NULL;
    }
    PyObject* ins = PySequence_Fast(args[2], "inputs must be a sequence");
    if (ins == NULL) return NULL;
    PyObject* outs = PySequence_Fast(args[3], "outputs must be a sequence");
    if (outs == NULL) {
        Py_DECREF(ins);
        return NULL;
    }
    Py_ssize_t n_in = PySequence_Fast_GET_SIZE(ins), n_out = PySequence_Fast_GET_SIZE(outs);
    Py_ssize_t total = n_in + n_out;
    Py_buffer stack_views[ON_STACK];
    void* stack_ptrs[ON_STACK];
    Py_buffer* views = stack_views;
    void** ptrs = stack_ptrs;
    PyObject* result = NULL;
    if (total > ON_STACK) {
        views = PyMem_Malloc(sizeof(Py_buffer) * total);
        ptrs = PyMem_Malloc(sizeof(void*) * total);
        if (views == NULL || ptrs == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (take_views(ins, views, ptrs, n_in, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (take_views(outs, views + n_in, ptrs + n_in, n_out,
                   PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        release_views(views, n_in);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    if (rows)
        ((rows_fn)address)((const void* const*)ptrs, ptrs + n_in, sizes[0], sizes[1],
                           (int)sizes[2]);
    else
        ((flat_fn)address)((const void* const*)ptrs, ptrs + n_in, sizes[0], (int)sizes[1]);
    Py_END_ALLOW_THREADS
    release_views(views, total);
    result = Py_NewRef(Py_None);
done:
    if (views != stack_views) PyMem_Free(views);
    if (ptrs != stack_ptrs) PyMem_Free(ptrs);
    Py_DECREF(ins);
    Py_DECREF(outs);
    return result;
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))fused_call, METH_FASTCALL,
     "call(address, rows, inputs, outputs, *sizes): a fused CPU kernel over the buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fusedcall",
    "The call of a fused CPU kernel through the buffer protocol (kernels/fused.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fusedcall(void) { return PyModule_Create(&module); }
