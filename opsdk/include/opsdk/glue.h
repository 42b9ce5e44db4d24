// opsdk glue support: what the generated bindings (generated/cpp/<op>_binding.cc) use.
//
// Kernel authors never include this file; it is the fast path between Python and a kernel:
// reading an ndarray's header without building Python objects, allocating outputs, and turning
// kernel exceptions into Python errors. Every check is a compare and a branch on the success path;
// messages are built only once a check has failed.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "opsdk/kernel.h"

namespace opsdk {
namespace glue {

namespace py = pybind11;

static_assert(sizeof(Py_intptr_t) == sizeof(int64_t), "opsdk needs a 64-bit platform");

// The dtypes of opsdk.registry.dtypes.DTYPE_NAMES, in the same order (a test checks the order).
enum DType : int {
    kBool, kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64,
    kFloat16, kFloat32, kFloat64, kComplex64, kComplex128, kUnknown
};

inline const char* dtype_name(int code) {
    static const char* const names[] = {
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
        "a non-native byte order or a dtype opsdk does not take"};
    return names[(code < 0 || code > kUnknown) ? kUnknown : code];
}

inline int dtype_from_name(const std::string& name) {
    for (int code = 0; code < kUnknown; ++code) {
        if (name == dtype_name(code)) return code;
    }
    return kUnknown;
}

template <size_t Size> constexpr int signed_code() {
    return Size == 1 ? kInt8 : Size == 2 ? kInt16 : Size == 4 ? kInt32 : kInt64;
}
template <size_t Size> constexpr int unsigned_code() {
    return Size == 1 ? kUInt8 : Size == 2 ? kUInt16 : Size == 4 ? kUInt32 : kUInt64;
}

// NumPy's type numbers are part of its stable ABI; C `long` and `long long` both map to int64 here.
inline int dtype_from_typenum(int num) {
    switch (num) {
        case 0: return kBool;
        case 1: return kInt8;
        case 2: return kUInt8;
        case 3: return kInt16;
        case 4: return kUInt16;
        case 5: return signed_code<sizeof(int)>();
        case 6: return unsigned_code<sizeof(unsigned)>();
        case 7: return signed_code<sizeof(long)>();
        case 8: return unsigned_code<sizeof(unsigned long)>();
        case 9: return signed_code<sizeof(long long)>();
        case 10: return unsigned_code<sizeof(unsigned long long)>();
        case 11: return kFloat32;
        case 12: return kFloat64;
        case 14: return kComplex64;
        case 15: return kComplex128;
        case 23: return kFloat16;
        default: return kUnknown;
    }
}

inline int typenum_of(int code) {
    static const int nums[] = {0, 1, 3, 5, 7, 2, 4, 6, 8, 23, 11, 12, 14, 15};
    return nums[code];
}

// What the glue needs of one array argument, read straight from the ndarray header.
struct Arg {
    PyObject* obj = nullptr;
    void* data = nullptr;
    const int64_t* shape = nullptr;
    int ndim = 0;
    int dtype = kUnknown;
    bool c_contiguous = false;
    bool writeable = true;  // host arrays: the WRITEABLE flag (a given output must have it)
    std::vector<int64_t> owned_shape;  // device arrays: the shape read from Python lives here
};

// Fill `arg` from a NumPy array; false when `h` is not an ndarray.
inline bool read_host(py::handle h, Arg& arg) {
    auto& api = py::detail::npy_api::get();
    if (!api.PyArray_Check_(h.ptr())) return false;
    const auto* proxy = py::detail::array_proxy(h.ptr());
    const auto* descr = py::detail::array_descriptor_proxy(proxy->descr);
    arg.obj = h.ptr();
    arg.data = proxy->data;
    arg.shape = reinterpret_cast<const int64_t*>(proxy->dimensions);
    arg.ndim = proxy->nd;
    // A byte-swapped array shares its type number with the native one: treat it as unsupported.
    arg.dtype = descr->byteorder == '>' ? kUnknown : dtype_from_typenum(descr->type_num);
    arg.c_contiguous = (proxy->flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) != 0;
    arg.writeable = (proxy->flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) != 0;
    return true;
}

// The dtype code of an array-interface typestr such as "<f4" or "|b1".
inline int dtype_from_typestr(const std::string& typestr) {
    if (typestr.size() < 3 || typestr[0] == '>') return kUnknown;
    const char kind = typestr[1];
    const int size = std::atoi(typestr.c_str() + 2);
    switch (kind) {
        case 'b': return size == 1 ? kBool : kUnknown;
        case 'i': return size == 1 ? kInt8 : size == 2 ? kInt16 : size == 4 ? kInt32 : size == 8 ? kInt64 : kUnknown;
        case 'u': return size == 1 ? kUInt8 : size == 2 ? kUInt16 : size == 4 ? kUInt32 : size == 8 ? kUInt64 : kUnknown;
        case 'f': return size == 2 ? kFloat16 : size == 4 ? kFloat32 : size == 8 ? kFloat64 : kUnknown;
        case 'c': return size == 8 ? kComplex64 : size == 16 ? kComplex128 : kUnknown;
        default: return kUnknown;
    }
}

// Fill `arg` from any object with __cuda_array_interface__ (CuPy, Numba, PyTorch); false when the
// object has none. Strides must be absent or those of a C-contiguous array.
inline bool read_device(py::handle h, Arg& arg) {
    if (!PyObject_HasAttrString(h.ptr(), "__cuda_array_interface__")) return false;
    py::dict cai = h.attr("__cuda_array_interface__");
    py::tuple shape = cai["shape"];
    arg.obj = h.ptr();
    arg.owned_shape.clear();
    for (py::handle d : shape) arg.owned_shape.push_back(d.cast<int64_t>());
    arg.shape = arg.owned_shape.data();
    arg.ndim = static_cast<int>(arg.owned_shape.size());
    arg.data = reinterpret_cast<void*>(py::tuple(cai["data"])[0].cast<uintptr_t>());
    arg.dtype = dtype_from_typestr(cai["typestr"].cast<std::string>());
    arg.c_contiguous = true;
    if (cai.contains("strides") && !cai["strides"].is_none()) {
        py::tuple strides = cai["strides"];
        int64_t expect = arg.dtype == kUnknown ? 0 : py::dtype(typenum_of(arg.dtype)).itemsize();
        for (int i = arg.ndim - 1; i >= 0; --i) {
            if (arg.shape[i] > 1 && strides[i].cast<int64_t>() != expect) arg.c_contiguous = false;
            expect *= arg.shape[i];
        }
    }
    return true;
}

inline std::string type_name(py::handle h) { return Py_TYPE(h.ptr())->tp_name; }

// "(3, 4)": a shape for messages.
inline std::string shape_str(const int64_t* shape, int ndim) {
    std::string out = "(";
    for (int i = 0; i < ndim; ++i) {
        if (i) out += ", ";
        out += std::to_string(shape[i]);
    }
    return out + (ndim == 1 ? ",)" : ")");
}

// `4 columns` / `size 4 in axis 2`: opsdk.registry.axis_phrase, for ranks known only at run time.
inline std::string axis_phrase(int64_t size, int64_t axis, int rank) {
    if (rank == 2) return std::to_string(size) + (axis == 0 ? " rows" : " columns");
    return "size " + std::to_string(size) + " in axis " + std::to_string(axis);
}

[[noreturn]] inline void raise(PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw py::error_already_set();
}

// A caller-allocated output (device outputs): its dtype and shape must be the declared ones.
template <typename Shape>
inline void check_output(const Arg& arg, int code, const Shape& shape, const char* what) {
    const bool same = arg.ndim == static_cast<int>(shape.size()) &&
                      std::equal(shape.begin(), shape.end(), arg.shape);
    if (!same || arg.dtype != code || !arg.c_contiguous) {
        raise(PyExc_ValueError, std::string(what) + " must be a C-contiguous " + dtype_name(code) +
                                    " array of shape " + shape_str(shape.data(), static_cast<int>(shape.size())) +
                                    ", got " + dtype_name(arg.dtype) + " " + shape_str(arg.shape, arg.ndim) +
                                    (arg.c_contiguous ? "" : " (not C-contiguous)"));
    }
}

// The same, for an output whose shape a Python shape function decided: dtype and layout only.
inline void check_output(const Arg& arg, int code, const char* what) {
    if (arg.dtype != code || !arg.c_contiguous) {
        raise(PyExc_ValueError, std::string(what) + " must be a C-contiguous " + dtype_name(code) +
                                    " array, got " + dtype_name(arg.dtype));
    }
}

inline int64_t item_size(int code) {
    static const int64_t sizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 8, 16};
    return (code < 0 || code >= kUnknown) ? 0 : sizes[code];
}

inline int64_t byte_size(const Arg& arg) {
    int64_t n = item_size(arg.dtype);
    for (int i = 0; i < arg.ndim; ++i) n *= arg.shape[i];
    return n;
}

// A caller-given output of the CPU glue (the runtime's pooled or donated buffer): a writeable,
// C-contiguous NumPy array of the declared dtype and shape, read into `arg`. Never copied or
// reallocated: a wrong one is an error naming the op and output (`what`).
template <typename Shape>
inline py::array given_output(py::handle h, int code, const Shape& shape, const char* what, Arg& arg) {
    if (!read_host(h, arg)) {
        raise(PyExc_TypeError, std::string(what) + " was given a " + type_name(h) +
                                   "; expected a numpy.ndarray (or no outputs at all)");
    }
    check_output(arg, code, shape, what);
    if (!arg.writeable) raise(PyExc_ValueError, std::string(what) + " was given a read-only array");
    return py::reinterpret_borrow<py::array>(h);
}

// Item `i` of a given list output, which must be a list or tuple of `count` arrays.
inline py::handle given_item(py::handle seq, int64_t i, int64_t count, const char* what) {
    if ((!PyList_Check(seq.ptr()) && !PyTuple_Check(seq.ptr())) || Py_SIZE(seq.ptr()) != count) {
        raise(PyExc_TypeError, std::string(what) + " must be given as a list of " +
                                   std::to_string(count) + " arrays, got " + type_name(seq));
    }
    return PySequence_Fast_GET_ITEM(seq.ptr(), i);
}

// A given output may not share memory with an input the declaration does not name in its
// `inplace` list: the kernel would read what it already overwrote. `index` >= 0 for a list input.
inline void check_apart(const Arg& out, const Arg& in, const char* what, const char* input, int64_t index) {
    const char* o = static_cast<const char*>(out.data);
    const char* x = static_cast<const char*>(in.data);
    const int64_t n = byte_size(out), m = byte_size(in);
    if (n == 0 || m == 0 || o + n <= x || x + m <= o) return;
    std::string name = index < 0 ? std::string(input) : std::string(input) + "[" + std::to_string(index) + "]";
    raise(PyExc_ValueError, std::string(what) + " shares memory with input '" + name +
                                "', which the op does not declare inplace for it");
}

// Outputs of at least this many bytes start on a 64-byte boundary: a whole-vector load of an
// AVX-512 kernel then never straddles two cache lines. NumPy's allocator puts large arrays 16
// bytes past one, which cost conv2d's filter gradient, streaming grad_y's rows, about a tenth.
constexpr int64_t kAlignedFrom = 64 * 1024;
constexpr size_t kAlignment = 64;

// The base of such an output: a capsule of this name owns the memory (the runtime's buffer pool
// and in-place updates treat an array whose base it is as owning its memory,
// opsdk/runtime/kernels/buffers.py).
constexpr const char* kAlignedCapsule = "opsdk.aligned";

inline void free_aligned(PyObject* capsule) { std::free(PyCapsule_GetPointer(capsule, kAlignedCapsule)); }

// Outputs of at least this many bytes ask Linux for huge pages (transparent huge pages in their
// "madvise" mode, the common default, serve only memory so marked), as NumPy's own allocator does
// from the same size. A fresh 64 MiB output otherwise faults in 16,384 pages of 4 KiB one by one:
// the flagship's forward at n=m=4096 took 101.4 ms so, against 79.4 ms marked.
constexpr int64_t kHugePagesFrom = int64_t(4) << 20;

// Mark the whole pages of [data, data + size) for huge pages. Advice only: a kernel without
// them, or with them off, leaves the memory as it was.
inline void advise_huge_pages(void* data, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
    (void)data;
    (void)size;
#endif
}

// A new C-contiguous, writeable, uninitialised array: kernels write every element of an output.
// `what` ("op: output 'z'") names it when a dim expression came out negative.
inline py::array empty(int code, const int64_t* shape, int ndim, const char* what) {
    int64_t items = 1;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] < 0) {
            raise(PyExc_ValueError, std::string(what) + " would have the negative shape " +
                                        shape_str(shape, ndim) + "; check the inputs' sizes and attrs");
        }
        items *= shape[i];
    }
    auto& api = py::detail::npy_api::get();
    PyObject* descr = api.PyArray_DescrFromType_(typenum_of(code));
    if (!descr) throw py::error_already_set();
    const int64_t bytes = items * static_cast<int64_t>(py::reinterpret_borrow<py::dtype>(descr).itemsize());
    if (bytes < kAlignedFrom) {
        PyObject* out = api.PyArray_NewFromDescr_(api.PyArray_Type_, descr, ndim,
                                                  reinterpret_cast<const Py_intptr_t*>(shape),
                                                  nullptr, nullptr, 0, nullptr);
        if (!out) throw py::error_already_set();
        return py::reinterpret_steal<py::array>(out);
    }
    const size_t size = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, size);
    if (data == nullptr) {
        Py_DECREF(descr);
        throw std::bad_alloc();
    }
    if (bytes >= kHugePagesFrom) advise_huge_pages(data, size);
    PyObject* owner = PyCapsule_New(data, kAlignedCapsule, free_aligned);
    if (!owner) {
        std::free(data);
        Py_DECREF(descr);
        throw py::error_already_set();
    }
    constexpr int flags = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                          py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    PyObject* out = api.PyArray_NewFromDescr_(api.PyArray_Type_, descr, ndim,
                                              reinterpret_cast<const Py_intptr_t*>(shape), nullptr, data,
                                              flags, nullptr);
    if (!out) {
        Py_DECREF(owner);
        throw py::error_already_set();
    }
    if (api.PyArray_SetBaseObject_(out, owner) != 0) {  // steals `owner`
        Py_DECREF(out);
        throw py::error_already_set();
    }
    return py::reinterpret_steal<py::array>(out);
}

template <typename Shape>
inline py::array empty(int code, const Shape& shape, const char* what) {
    return empty(code, shape.data(), static_cast<int>(shape.size()), what);
}

// The leading `...` dims followed by the declared trailing ones.
inline std::vector<int64_t> with_batch(const std::vector<int64_t>& batch,
                                       std::initializer_list<int64_t> tail) {
    std::vector<int64_t> out(batch);
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
}

// Whether the first `n` dims of `shape` are exactly `batch` (the dims an earlier `...` bound).
inline bool same_dims(const int64_t* shape, int n, const std::vector<int64_t>& batch) {
    if (n != static_cast<int>(batch.size())) return false;
    for (int i = 0; i < n; ++i) {
        if (shape[i] != batch[i]) return false;
    }
    return true;
}

template <typename T>
inline TensorView<T> view(const Arg& arg) {
    return TensorView<T>{static_cast<T*>(arg.data), arg.shape, arg.ndim};
}

// An optional input's view: empty when the caller gave None (the Arg was never read).
template <typename T>
inline std::optional<TensorView<T>> optional_view(const Arg& arg) {
    if (arg.obj == nullptr) return std::nullopt;
    return view<T>(arg);
}

template <typename T>
inline std::vector<TensorView<T>> views(const std::vector<Arg>& args) {
    std::vector<TensorView<T>> out;
    out.reserve(args.size());
    for (const Arg& arg : args) out.push_back(view<T>(arg));
    return out;
}

template <typename T>
inline TensorView<T> view(const py::array& array) {
    const auto* proxy = py::detail::array_proxy(array.ptr());
    return TensorView<T>{reinterpret_cast<T*>(proxy->data),
                         reinterpret_cast<const int64_t*>(proxy->dimensions), proxy->nd};
}

// Where an OPSDK_REQUIRE fired: the kernel's path relative to the workspace when the macro sits
// in the kernel source itself (the compiler only knows the include path it was given).
inline std::string kernel_location(const char* file, const char* kernel_source) {
    const size_t n = std::strlen(file), k = std::strlen(kernel_source);
    if (n >= k && std::strcmp(file + n - k, kernel_source) == 0) return kernel_source;
    return file;
}

// Run a kernel call, turning opsdk's kernel exceptions into the Python errors of the contract.
template <typename F>
inline void run_kernel(const char* op, const char* kernel_source, const char* not_written, F&& call) {
    const float_mode::Scope flush(float_mode::flushing());  // subnormals flushed (kernel.h)
    try {
        call();
    } catch (const KernelError& error) {
        raise(PyExc_ValueError, std::string(op) + ": " + error.what() + " (" +
                                    kernel_location(error.file, kernel_source) + ":" +
                                    std::to_string(error.line) + ")");
    } catch (const NotImplemented&) {
        raise(PyExc_NotImplementedError, not_written);
    }
}

}  // namespace glue
}  // namespace opsdk
