//! The pair kernel shared by the near field (P2P) and the direct sum.

/// Potential and gradient of psi(x) = sum_j m_j / sqrt(|x - x_j|^2 + eps^2) at one point;
/// potential = -psi and acceleration = grad psi in the crate's sign convention.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Field {
    pub psi: f64,
    pub grad: [f64; 3],
}

/// Adds the source (position `source`, strength `mass`) to `field` at `target`.
/// `softening2` is eps^2; `r2` must be positive when it is zero (checked by the callers).
#[inline(always)]
pub(crate) fn add_source(
    field: &mut Field,
    target: &[f64; 3],
    source: &[f64; 3],
    mass: f64,
    softening2: f64,
) {
    let d = [
        target[0] - source[0],
        target[1] - source[1],
        target[2] - source[2],
    ];
    let s = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + softening2;
    let inv = 1.0 / s.sqrt();
    let m_inv = mass * inv;
    let m_inv3 = m_inv * inv * inv;
    field.psi += m_inv;
    field.grad[0] -= m_inv3 * d[0];
    field.grad[1] -= m_inv3 * d[1];
    field.grad[2] -= m_inv3 * d[2];
}

/// Sources staged for P2P as separate coordinate and strength columns (the layout a device
/// kernel reads, and one the compiler vectorises).
#[derive(Clone, Debug, Default)]
pub(crate) struct StagedSources {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub z: Vec<f64>,
    pub m: Vec<f64>,
}

impl StagedSources {
    /// Appends bodies.
    pub(crate) fn extend(&mut self, positions: &[[f64; 3]], masses: &[f64]) {
        for (p, &m) in positions.iter().zip(masses) {
            self.x.push(p[0]);
            self.y.push(p[1]);
            self.z.push(p[2]);
            self.m.push(m);
        }
    }

    /// Number of staged bodies.
    pub(crate) fn len(&self) -> usize {
        self.m.len()
    }

    /// The staged columns.
    pub(crate) fn columns(&self) -> SourceColumns<'_> {
        SourceColumns {
            x: &self.x,
            y: &self.y,
            z: &self.z,
            m: &self.m,
        }
    }
}

/// Source bodies as coordinate and strength columns of equal length: staged copies
/// ([`StagedSources`]) or a tree's Morton-ordered bodies (the P2P kernel's inputs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SourceColumns<'a> {
    pub x: &'a [f64],
    pub y: &'a [f64],
    pub z: &'a [f64],
    pub m: &'a [f64],
}

impl SourceColumns<'_> {
    /// Adds the sources `range` to `field` at `target`, in four interleaved lanes combined
    /// in a fixed order (so the result does not depend on anything but the input). The P2P
    /// kernel (`gpu/p2p.cu`, `tt_p2p_add_range`) performs the same operations in the same
    /// order.
    pub(crate) fn add_to(
        &self,
        field: &mut Field,
        target: &[f64; 3],
        range: std::ops::Range<usize>,
        softening2: f64,
    ) {
        const LANES: usize = 4;
        let (x, y, z, m) = (
            &self.x[range.clone()],
            &self.y[range.clone()],
            &self.z[range.clone()],
            &self.m[range],
        );
        let mut psi = [0.0; LANES];
        let mut gx = [0.0; LANES];
        let mut gy = [0.0; LANES];
        let mut gz = [0.0; LANES];
        let full = m.len() / LANES * LANES;
        let columns = x
            .chunks_exact(LANES)
            .zip(y.chunks_exact(LANES))
            .zip(z.chunks_exact(LANES))
            .zip(m.chunks_exact(LANES));
        for (((xc, yc), zc), mc) in columns {
            for lane in 0..LANES {
                let (dx, dy, dz) = (
                    target[0] - xc[lane],
                    target[1] - yc[lane],
                    target[2] - zc[lane],
                );
                let s = dx * dx + dy * dy + dz * dz + softening2;
                let inv = 1.0 / s.sqrt();
                let m_inv = mc[lane] * inv;
                let m_inv3 = m_inv * inv * inv;
                psi[lane] += m_inv;
                gx[lane] -= m_inv3 * dx;
                gy[lane] -= m_inv3 * dy;
                gz[lane] -= m_inv3 * dz;
            }
        }
        let mut tail = Field::default();
        for j in full..m.len() {
            add_source(&mut tail, target, &[x[j], y[j], z[j]], m[j], softening2);
        }
        let combine =
            |lanes: [f64; LANES], rest: f64| (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + rest;
        field.psi += combine(psi, tail.psi);
        field.grad[0] += combine(gx, tail.grad[0]);
        field.grad[1] += combine(gy, tail.grad[1]);
        field.grad[2] += combine(gz, tail.grad[2]);
    }
}

/// Adds the near sources of one target body to `field`: `segments` are the source leaves in
/// list order, each `(is_self, range)` with `range` its bodies in `columns`; in the target's
/// own leaf every body but the one at `range.start + own_offset` (the target) counts. This
/// is the whole P2P of a target, shared by the host near field and the P2P kernel's host
/// twin; `gpu/p2p.cu` (`tt_p2p_target`) mirrors it operation for operation.
pub(crate) fn add_near_sources(
    field: &mut Field,
    target: &[f64; 3],
    own_offset: usize,
    segments: impl IntoIterator<Item = (bool, std::ops::Range<usize>)>,
    columns: SourceColumns<'_>,
    softening2: f64,
) {
    for (is_self, segment) in segments {
        if is_self {
            // Every body but the target itself.
            let own = segment.start + own_offset;
            columns.add_to(field, target, segment.start..own, softening2);
            columns.add_to(field, target, own + 1..segment.end, softening2);
        } else {
            columns.add_to(field, target, segment, softening2);
        }
    }
}
