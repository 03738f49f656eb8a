// The FMM's near field (P2P), module "tutti_fmm_p2p": for the target bodies of one leaf per
// block, the sum over the leaf's P2P interaction list of m_j / sqrt(r^2 + eps^2) and its
// gradient, added to the fields already in the output columns (the L2P values, or zeros).
//
// Bit for bit the host near field when compiled with --fmad=false: tt_p2p_add_range is
// SourceColumns::add_to and tt_p2p_target is add_near_sources (src/kernel.rs), operation for
// operation: four interleaved lanes over each source range, the tail after them summed on its
// own, combined as ((l0 + l1) + (l2 + l3)) + tail; 1.0 / sqrt (both IEEE, round to nearest),
// never rsqrt. Keep the two in step.
//
// One block per target leaf (blockIdx.x indexes `leaves`), threads along x over the leaf's
// bodies with a stride of blockDim.x; a body is written by exactly one thread and its value
// depends only on the inputs. Blocks with blockIdx.y or .z > 0, and threads with threadIdx.y
// or .z > 0, write nothing.

typedef unsigned long long tt_u64;

// psi and its gradient at one target.
struct tt_p2p_field {
    double psi;
    double gx;
    double gy;
    double gz;
};

// Adds the sources begin..end of the columns x, y, z, m to `field` at (tx, ty, tz).
TT_DEVICE void tt_p2p_add_range(tt_p2p_field* field, double tx, double ty, double tz,
                                const double* __restrict__ x, const double* __restrict__ y,
                                const double* __restrict__ z, const double* __restrict__ m,
                                tt_u64 begin, tt_u64 end, double softening2) {
    double psi[4] = {0.0, 0.0, 0.0, 0.0};
    double gx[4] = {0.0, 0.0, 0.0, 0.0};
    double gy[4] = {0.0, 0.0, 0.0, 0.0};
    double gz[4] = {0.0, 0.0, 0.0, 0.0};
    const tt_u64 full = begin + (end - begin) / 4 * 4;
    for (tt_u64 j = begin; j < full; j += 4) {
#pragma unroll
        for (int lane = 0; lane < 4; ++lane) {
            const double dx = tx - x[j + lane];
            const double dy = ty - y[j + lane];
            const double dz = tz - z[j + lane];
            const double s = dx * dx + dy * dy + dz * dz + softening2;
            const double inv = 1.0 / sqrt(s);
            const double m_inv = m[j + lane] * inv;
            const double m_inv3 = m_inv * inv * inv;
            psi[lane] += m_inv;
            gx[lane] -= m_inv3 * dx;
            gy[lane] -= m_inv3 * dy;
            gz[lane] -= m_inv3 * dz;
        }
    }
    // The tail, as add_source into a zero field.
    tt_p2p_field tail = {0.0, 0.0, 0.0, 0.0};
    for (tt_u64 j = full; j < end; ++j) {
        const double dx = tx - x[j];
        const double dy = ty - y[j];
        const double dz = tz - z[j];
        const double s = dx * dx + dy * dy + dz * dz + softening2;
        const double inv = 1.0 / sqrt(s);
        const double m_inv = m[j] * inv;
        const double m_inv3 = m_inv * inv * inv;
        tail.psi += m_inv;
        tail.gx -= m_inv3 * dx;
        tail.gy -= m_inv3 * dy;
        tail.gz -= m_inv3 * dz;
    }
    field->psi += (psi[0] + psi[1]) + (psi[2] + psi[3]) + tail.psi;
    field->gx += (gx[0] + gx[1]) + (gx[2] + gx[3]) + tail.gx;
    field->gy += (gy[0] + gy[1]) + (gy[2] + gy[3]) + tail.gy;
    field->gz += (gz[0] + gz[1]) + (gz[2] + gz[3]) + tail.gz;
}

// The P2P of target body b of leaf `leaf`: every source leaf of its list in order, all its
// bodies but b itself when it is the target's own leaf.
TT_DEVICE void tt_p2p_target(tt_p2p_field* field, tt_u64 b, unsigned leaf,
                             const unsigned* __restrict__ sources, tt_u64 count,
                             const tt_u64* __restrict__ node_begin,
                             const tt_u64* __restrict__ node_end, const double* __restrict__ x,
                             const double* __restrict__ y, const double* __restrict__ z,
                             const double* __restrict__ m, double softening2) {
    const double tx = x[b];
    const double ty = y[b];
    const double tz = z[b];
    for (tt_u64 k = 0; k < count; ++k) {
        const unsigned source = sources[k];
        const tt_u64 begin = node_begin[source];
        const tt_u64 end = node_end[source];
        if (source == leaf) {
            tt_p2p_add_range(field, tx, ty, tz, x, y, z, m, begin, b, softening2);
            tt_p2p_add_range(field, tx, ty, tz, x, y, z, m, b + 1, end, softening2);
        } else {
            tt_p2p_add_range(field, tx, ty, tz, x, y, z, m, begin, end, softening2);
        }
    }
}

// Block k: the bodies of leaf leaves[k] (k < n_leaves), whose P2P sources are
// list_sources[list_start[k]..list_start[k + 1]]; nodes' bodies are node_begin..node_end in
// the Morton-ordered columns x, y, z, m. Body b's field is at b - body_offset of psi, gx, gy,
// gz, which hold the values to add to.
extern "C" __global__ void tt_fmm_p2p(
    unsigned n_leaves, const unsigned* __restrict__ leaves,
    const tt_u64* __restrict__ list_start, const unsigned* __restrict__ list_sources,
    const tt_u64* __restrict__ node_begin, const tt_u64* __restrict__ node_end,
    const double* __restrict__ x, const double* __restrict__ y, const double* __restrict__ z,
    const double* __restrict__ m, double softening2, tt_u64 body_offset,
    double* __restrict__ psi, double* __restrict__ gx, double* __restrict__ gy,
    double* __restrict__ gz) {
    const unsigned k = blockIdx.x;
    if (k >= n_leaves || blockIdx.y != 0 || blockIdx.z != 0 || threadIdx.y != 0 ||
        threadIdx.z != 0) {
        return;
    }
    const unsigned leaf = leaves[k];
    const tt_u64 first = list_start[k];
    const tt_u64 count = list_start[k + 1] - first;
    const tt_u64 end = node_end[leaf];
    for (tt_u64 b = node_begin[leaf] + threadIdx.x; b < end; b += blockDim.x) {
        const tt_u64 o = b - body_offset;
        tt_p2p_field field = {psi[o], gx[o], gy[o], gz[o]};
        tt_p2p_target(&field, b, leaf, list_sources + first, count, node_begin, node_end, x, y,
                      z, m, softening2);
        psi[o] = field.psi;
        gx[o] = field.gx;
        gy[o] = field.gy;
        gz[o] = field.gz;
    }
}
