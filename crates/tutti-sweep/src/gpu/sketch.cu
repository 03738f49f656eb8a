// The sweep's sketch application, module "tutti_sweep_sketch": one step of the left-to-right
// pass, the sketch vectors of this rank's columns applied to the environment times the cores.
//
// t is row-major [d_out, middle, cols, d_in, inner] (axes Phys(0), Right(0..L-2), Col,
// Phys(L), Right(L-1)); g is row-major [cols, d_out, d_in]; out is row-major [cols, middle,
// inner]:
//
//   out[c, x, i] = sum_{a < d_out} sum_{b < d_in} g[c, a, b] * t[a, x, c, b, i],
//
// summed over a, then b, from zero, in that order: the host's apply_sketch (src/distributed.rs)
// operation for operation (complex products as num_complex forms them). One thread per output
// element along x of the grid, with a stride of the grid's threads; threads along y or z and
// blocks along y or z write nothing.

typedef unsigned long long tt_u64;

struct tt_c64 {
    double re;
    double im;
};

// sum += k * v, as the host forms it (complex: num_complex's product, then +=).
TT_DEVICE void tt_sketch_add(double* sum, double k, double v) { *sum += k * v; }

TT_DEVICE void tt_sketch_add(tt_c64* sum, tt_c64 k, tt_c64 v) {
    sum->re += k.re * v.re - k.im * v.im;
    sum->im += k.re * v.im + k.im * v.re;
}

// Every output element, the sum of its d_out * d_in terms from zero.
template <typename T>
TT_DEVICE void tt_apply_sketch(tt_u64 d_out, tt_u64 middle, tt_u64 cols, tt_u64 d_in,
                               tt_u64 inner, const T* __restrict__ g, const T* __restrict__ t,
                               T* __restrict__ out) {
    if (blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.y != 0 || threadIdx.z != 0) {
        return;
    }
    const tt_u64 total = cols * middle * inner;
    const tt_u64 stride = (tt_u64)gridDim.x * blockDim.x;
    for (tt_u64 e = (tt_u64)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += stride) {
        const tt_u64 i = e % inner;
        const tt_u64 x = (e / inner) % middle;
        const tt_u64 c = e / (inner * middle);
        T sum = {};
        for (tt_u64 a = 0; a < d_out; ++a) {
            for (tt_u64 b = 0; b < d_in; ++b) {
                tt_sketch_add(&sum, g[(c * d_out + a) * d_in + b],
                              t[(((a * middle + x) * cols + c) * d_in + b) * inner + i]);
            }
        }
        out[e] = sum;
    }
}

extern "C" __global__ void tt_sweep_apply_sketch_f64(tt_u64 d_out, tt_u64 middle, tt_u64 cols,
                                                     tt_u64 d_in, tt_u64 inner,
                                                     const double* __restrict__ g,
                                                     const double* __restrict__ t,
                                                     double* __restrict__ out) {
    tt_apply_sketch<double>(d_out, middle, cols, d_in, inner, g, t, out);
}

extern "C" __global__ void tt_sweep_apply_sketch_c64(tt_u64 d_out, tt_u64 middle, tt_u64 cols,
                                                     tt_u64 d_in, tt_u64 inner,
                                                     const tt_c64* __restrict__ g,
                                                     const tt_c64* __restrict__ t,
                                                     tt_c64* __restrict__ out) {
    tt_apply_sketch<tt_c64>(d_out, middle, cols, d_in, inner, g, t, out);
}
