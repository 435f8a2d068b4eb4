/* The ES noise kernels of coevo.es.noise, compiled ahead of time.
 *
 * Why C and not a JIT: a JIT runtime (numba + LLVM) adds ~100 MiB of resident memory to every process
 * that perturbs weights, which is a tenth of a 135M-parameter model's inference footprint; these kernels
 * add a few KiB. Each kernel fuses noise generation with the memory pass that uses it, never
 * materialising the noise, and releases the GIL so Python threads can split one tensor between cores.
 *
 * eps(key, i): SplitMix64 finaliser of key + i * golden_gamma; its four 16-bit lanes summed
 * (Irwin-Hall, n = 4), standardised and bent by x * (a + b x^2) (variance 1, kurtosis 3). Only integer
 * and plain fp32 arithmetic: fused multiply-add is forbidden below so that every build on every machine
 * gives the same bits (the values are pinned by NOISE_VERSION in noise.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#pragma GCC optimize("fp-contract=off")
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* Vector clones picked at load time by the CPU (AVX-512 multiplies 64-bit lanes natively). */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CPU_CLONES
#endif

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ULL
#define MIX1 0xBF58476D1CE4E5B9ULL
#define MIX2 0x94D049BB133111EBULL
/* float32 constants, written exactly: mean 4 * 32767.5 and 1 / std of the lane sum, cubic a and b. */
#define LANE_SUM_MEAN 131070.0f
#define LANE_SUM_INV_STD 0x1.bb67aep-16f
#define CUBIC_A 0x1.e5e7fcp-1f
#define CUBIC_B 0x1.316c24p-6f
/* Accumulation block: the running sum of all members stays in L1 while each member streams through. */
#define ACCUMULATE_BLOCK 4096

static inline float eps(uint64_t key, uint64_t index) {
    uint64_t z = key + index * GOLDEN_GAMMA;
    z = (z ^ (z >> 30)) * MIX1;
    z = (z ^ (z >> 27)) * MIX2;
    z = z ^ (z >> 31);
    /* 32-bit halves give the same lane sum (< 2^18) and let the compiler vectorise the conversion. */
    uint32_t low = (uint32_t)z, high = (uint32_t)(z >> 32);
    int32_t lanes = (int32_t)((low & 0xFFFF) + (low >> 16) + (high & 0xFFFF) + (high >> 16));
    float x = ((float)lanes - LANE_SUM_MEAN) * LANE_SUM_INV_STD;
    return x * (CUBIC_A + CUBIC_B * x * x);
}

CPU_CLONES static void fill_kernel(float *restrict out, int64_t n, uint64_t key, uint64_t offset) {
    for (int64_t i = 0; i < n; i++) out[i] = eps(key, offset + (uint64_t)i);
}

CPU_CLONES static void perturb_kernel(float *restrict dst, const float *restrict src, int64_t n, uint64_t key,
                                      float scale, uint64_t offset) {
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] + scale * eps(key, offset + (uint64_t)i);
}

CPU_CLONES static void add_kernel(float *restrict dst, int64_t n, uint64_t key, float scale, uint64_t offset) {
    for (int64_t i = 0; i < n; i++) dst[i] += scale * eps(key, offset + (uint64_t)i);
}

/* dst[i] += sum_j coeffs[j] * eps(keys[j], offset + i), the sum formed in fp32 in the order of keys. */
CPU_CLONES static void accumulate_kernel(float *restrict dst, int64_t n, const uint64_t *restrict keys,
                                         const float *restrict coeffs, int64_t n_keys, uint64_t offset) {
    float total[ACCUMULATE_BLOCK];
    for (int64_t start = 0; start < n; start += ACCUMULATE_BLOCK) {
        int64_t len = n - start < ACCUMULATE_BLOCK ? n - start : ACCUMULATE_BLOCK;
        for (int64_t i = 0; i < len; i++) total[i] = 0.0f;
        for (int64_t j = 0; j < n_keys; j++) {
            uint64_t key = keys[j], first = offset + (uint64_t)start;
            float coeff = coeffs[j];
            for (int64_t i = 0; i < len; i++) total[i] += coeff * eps(key, first + (uint64_t)i);
        }
        for (int64_t i = 0; i < len; i++) dst[start + i] += total[i];
    }
}

/* --- Python bindings: float32 / uint64 buffers (dtype and contiguity are checked in noise.py) ------- */

static int same_length(const Py_buffer *a, Py_ssize_t a_item, const Py_buffer *b, Py_ssize_t b_item) {
    if (a->len / a_item == b->len / b_item) return 1;
    PyErr_SetString(PyExc_ValueError, "buffers must have the same number of elements");
    return 0;
}

static PyObject *py_fill(PyObject *self, PyObject *args) {
    Py_buffer out;
    unsigned long long key, offset;
    if (!PyArg_ParseTuple(args, "w*KK", &out, &key, &offset)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    fill_kernel((float *)out.buf, out.len / 4, key, offset);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

static PyObject *py_perturb(PyObject *self, PyObject *args) {
    Py_buffer dst, src;
    unsigned long long key, offset;
    float scale;
    if (!PyArg_ParseTuple(args, "w*y*KfK", &dst, &src, &key, &scale, &offset)) return NULL;
    int ok = same_length(&dst, 4, &src, 4);
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        perturb_kernel((float *)dst.buf, (const float *)src.buf, dst.len / 4, key, scale, offset);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_add(PyObject *self, PyObject *args) {
    Py_buffer dst;
    unsigned long long key, offset;
    float scale;
    if (!PyArg_ParseTuple(args, "w*KfK", &dst, &key, &scale, &offset)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    add_kernel((float *)dst.buf, dst.len / 4, key, scale, offset);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

static PyObject *py_accumulate(PyObject *self, PyObject *args) {
    Py_buffer dst, keys, coeffs;
    unsigned long long offset;
    if (!PyArg_ParseTuple(args, "w*y*y*K", &dst, &keys, &coeffs, &offset)) return NULL;
    int ok = same_length(&keys, 8, &coeffs, 4);
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        accumulate_kernel((float *)dst.buf, dst.len / 4, (const uint64_t *)keys.buf, (const float *)coeffs.buf,
                          keys.len / 8, offset);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&dst);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&coeffs);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fill", py_fill, METH_VARARGS, "fill(out, key, offset): out[i] = eps(key, offset + i)"},
    {"perturb", py_perturb, METH_VARARGS,
     "perturb(dst, src, key, scale, offset): dst[i] = src[i] + scale * eps(key, offset + i); no overlap"},
    {"add", py_add, METH_VARARGS, "add(dst, key, scale, offset): dst[i] += scale * eps(key, offset + i)"},
    {"accumulate", py_accumulate, METH_VARARGS,
     "accumulate(dst, keys, coeffs, offset): dst[i] += sum_j coeffs[j] * eps(keys[j], offset + i)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_noise_kernels", "ES noise kernels (see noise.py)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__noise_kernels(void) { return PyModule_Create(&module); }
