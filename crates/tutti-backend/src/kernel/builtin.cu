// The backend's own kernels (module "tutti_backend"): copies and updates every workload needs.
//
// Each entry has a Rust host twin in builtin.rs computing the same values for the same launch
// dimensions and arguments; keep the two in step. One thread per output element, no shared
// memory, no atomics: a thread's result depends only on its global index.

typedef unsigned long long tt_u64;

// The global x index of the calling thread.
TT_DEVICE tt_u64 tt_global_x() {
    return (tt_u64)blockIdx.x * (tt_u64)blockDim.x + (tt_u64)threadIdx.x;
}

// y[j, i, k] = x[i, j, k] for x of shape [a, b, c] (row-major, k fastest): the copy that
// swaps the two leading axes. Thread o writes y[o].
template <typename T>
TT_DEVICE void tt_permute_bac(const T* __restrict__ x, T* __restrict__ y, unsigned a,
                              unsigned b, unsigned c) {
    const tt_u64 n = (tt_u64)a * (tt_u64)b * (tt_u64)c;
    const tt_u64 o = tt_global_x();
    if (o >= n) {
        return;
    }
    const tt_u64 k = o % c;
    const tt_u64 row = o / c;  // row = j * a + i
    const tt_u64 i = row % a;
    const tt_u64 j = row / a;
    y[o] = x[(i * (tt_u64)b + j) * (tt_u64)c + k];
}

extern "C" __global__ void tt_permute_bac_f64(const double* __restrict__ x,
                                              double* __restrict__ y, unsigned a, unsigned b,
                                              unsigned c) {
    tt_permute_bac(x, y, a, b, c);
}

// Complex64: (re, im) as one 16-byte double2 (allocations are 256-byte aligned).
extern "C" __global__ void tt_permute_bac_c64(const double2* __restrict__ x,
                                              double2* __restrict__ y, unsigned a, unsigned b,
                                              unsigned c) {
    tt_permute_bac(x, y, a, b, c);
}

// y[i] = alpha * x[i] + y[i] for i < n: a product, then a sum (no FMA with --fmad=false).
extern "C" __global__ void tt_axpy_f64(tt_u64 n, double alpha, const double* __restrict__ x,
                                       double* __restrict__ y) {
    const tt_u64 i = tt_global_x();
    if (i < n) {
        y[i] = alpha * x[i] + y[i];
    }
}
