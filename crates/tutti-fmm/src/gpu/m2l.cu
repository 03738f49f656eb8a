// The FMM's far field (M2L), module "tutti_fmm_m2l": the kernel derivatives of groups of up
// to four (target, source) cell pairs, then their contraction with the sources' multipoles
// into the targets' local expansions.
//
// Bit for bit the host far field when compiled with --fmad=false: tt_m2l_derivatives is
// Basis::kernel_derivatives (src/basis.rs) and tt_m2l_contract is m2l_f64 / m2l_f32
// (src/operators.rs) applied to the groups of one target in list order, operation for
// operation. Keep them in step.
//
// A group is six unsigned words: the target node, four source nodes, and how many of the
// four are used (1..4); unused lanes have zero derivatives and zero multipoles, as on the
// host. Derivatives are stored per group, interleaved by lane: entry n of lane l of group g
// at g * terms * 4 + n * 4 + l.

typedef unsigned long long tt_u64;

// Words per group in the group table.
#define TT_M2L_GROUP_WORDS 6

// Thread g * 4 + l (along x over the whole grid): the derivatives d^n g(r) of the kernel
// (r^2 + softening2)^(-1/2), for every n < terms, at r = c[target] - c[source lane l] of group
// g, by the recurrence recurrence_start/source/axis/coefficient (the Basis's, axis 3 meaning
// no coordinate factor). Unused lanes are zero.
extern "C" __global__ void tt_fmm_m2l_derivatives(
    unsigned n_groups, unsigned terms, const unsigned* __restrict__ groups,
    const double* __restrict__ centers, const unsigned* __restrict__ recurrence_start,
    const unsigned* __restrict__ recurrence_source,
    const unsigned* __restrict__ recurrence_axis,
    const double* __restrict__ recurrence_coefficient, double softening2,
    double* __restrict__ derivatives) {
    if (blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.y != 0 || threadIdx.z != 0) {
        return;
    }
    const tt_u64 thread = (tt_u64)blockIdx.x * blockDim.x + threadIdx.x;
    const tt_u64 g = thread / 4;
    const unsigned lane = (unsigned)(thread % 4);
    if (g >= n_groups) {
        return;
    }
    const unsigned* group = groups + g * TT_M2L_GROUP_WORDS;
    double* out = derivatives + g * terms * 4 + lane;
    if (lane >= group[5]) {
        for (unsigned n = 0; n < terms; ++n) {
            out[(tt_u64)n * 4] = 0.0;
        }
        return;
    }
    const tt_u64 target = group[0];
    const tt_u64 source = group[1 + lane];
    const double rx = centers[3 * target] - centers[3 * source];
    const double ry = centers[3 * target + 1] - centers[3 * source + 1];
    const double rz = centers[3 * target + 2] - centers[3 * source + 2];
    const double s = rx * rx + ry * ry + rz * rz + softening2;
    const double inv_s = 1.0 / s;
    out[0] = sqrt(inv_s);
    for (unsigned n = 1; n < terms; ++n) {
        double sum = 0.0;
        const unsigned end = recurrence_start[n + 1];
        for (unsigned term = recurrence_start[n]; term < end; ++term) {
            const unsigned axis = recurrence_axis[term];
            const double factor = axis == 0 ? rx : axis == 1 ? ry : axis == 2 ? rz : 1.0;
            sum += recurrence_coefficient[term] * factor *
                   out[(tt_u64)recurrence_source[term] * 4];
        }
        out[(tt_u64)n * 4] = sum * inv_s;
    }
}

// The multipole coefficient j of lane `lane` of `group`, or zero for an unused lane.
TT_DEVICE double tt_m2l_multipole(const unsigned* group, unsigned lane,
                                  const double* __restrict__ multipoles, unsigned terms,
                                  unsigned j) {
    return lane < group[5] ? multipoles[(tt_u64)group[1 + lane] * terms + j] : 0.0;
}

// The product of a multipole and a derivative: in double (Precision::F64), or rounded as the
// host's f32 far field forms it (Precision::F32: both factors rounded to float, multiplied in
// float, the product widened to double).
template <bool F32>
TT_DEVICE double tt_m2l_product(double m, double d) {
    if constexpr (F32) {
        const float product = (float)m * (float)d;
        return (double)product;
    } else {
        return m * d;
    }
}

// Block r: the groups run_start[r]..run_start[r + 1], which share one target; thread k (with
// a stride of blockDim.x) adds to the target's local coefficient k, group after group,
// sum over lanes of sum_j M_j D_{m2l[m2l_start[k] + j]}, the lanes summed as
// (l0 + l1) + (l2 + l3), each term formed by tt_m2l_product<F32>.
template <bool F32>
TT_DEVICE void tt_m2l_contract(unsigned n_runs, unsigned terms,
                               const unsigned* __restrict__ run_start,
                               const unsigned* __restrict__ groups,
                               const unsigned* __restrict__ m2l_start,
                               const unsigned* __restrict__ m2l,
                               const double* __restrict__ multipoles,
                               const double* __restrict__ derivatives,
                               double* __restrict__ locals) {
    const unsigned r = blockIdx.x;
    if (r >= n_runs || blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.y != 0 ||
        threadIdx.z != 0) {
        return;
    }
    const unsigned first = run_start[r];
    const unsigned last = run_start[r + 1];
    const tt_u64 target = groups[(tt_u64)first * TT_M2L_GROUP_WORDS];
    for (unsigned k = threadIdx.x; k < terms; k += blockDim.x) {
        double local = locals[target * terms + k];
        const unsigned begin = m2l_start[k];
        const unsigned count = m2l_start[k + 1] - begin;
        for (unsigned g = first; g < last; ++g) {
            const unsigned* group = groups + (tt_u64)g * TT_M2L_GROUP_WORDS;
            const double* d = derivatives + (tt_u64)g * terms * 4;
            double sum[4] = {0.0, 0.0, 0.0, 0.0};
            for (unsigned j = 0; j < count; ++j) {
                const tt_u64 at = (tt_u64)m2l[begin + j] * 4;
#pragma unroll
                for (unsigned lane = 0; lane < 4; ++lane) {
                    sum[lane] += tt_m2l_product<F32>(
                        tt_m2l_multipole(group, lane, multipoles, terms, j), d[at + lane]);
                }
            }
            local += (sum[0] + sum[1]) + (sum[2] + sum[3]);
        }
        locals[target * terms + k] = local;
    }
}

// The f64 contraction (Precision::F64).
extern "C" __global__ void tt_fmm_m2l_contract_f64(
    unsigned n_runs, unsigned terms, const unsigned* __restrict__ run_start,
    const unsigned* __restrict__ groups, const unsigned* __restrict__ m2l_start,
    const unsigned* __restrict__ m2l, const double* __restrict__ multipoles,
    const double* __restrict__ derivatives, double* __restrict__ locals) {
    tt_m2l_contract<false>(n_runs, terms, run_start, groups, m2l_start, m2l, multipoles,
                           derivatives, locals);
}

// The f32 contraction (Precision::F32): products in float, sums in double.
extern "C" __global__ void tt_fmm_m2l_contract_f32(
    unsigned n_runs, unsigned terms, const unsigned* __restrict__ run_start,
    const unsigned* __restrict__ groups, const unsigned* __restrict__ m2l_start,
    const unsigned* __restrict__ m2l, const double* __restrict__ multipoles,
    const double* __restrict__ derivatives, double* __restrict__ locals) {
    tt_m2l_contract<true>(n_runs, terms, run_start, groups, m2l_start, m2l, multipoles,
                          derivatives, locals);
}
