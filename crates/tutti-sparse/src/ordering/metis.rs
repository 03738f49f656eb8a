//! Vertex separators from METIS (`METIS_ComputeVertexSeparator`, built from source by
//! `metis-sys`): multilevel coarsening, an initial separator of the coarsest graph and
//! Fiduccia–Mattheyses refinement on the way back, much smaller separators than a level
//! structure's middle level on irregular graphs and on 2-D meshes.
//!
//! METIS is deterministic for a fixed seed, but its random generator is process-global
//! state: calls are serialised by a lock, so two analyses in two threads give the trees
//! they would give alone.

use std::sync::{Mutex, PoisonError};

use super::PointGraph;

/// The seed of every METIS call: one input always gives one tree.
const SEED: i32 = 7;

/// Serialises the calls into METIS (its random generator is global).
static METIS: Mutex<()> = Mutex::new(());

/// Buffers for the subgraphs handed to METIS, reused from part to part.
#[derive(Debug, Default)]
pub(super) struct MetisSeparators {
    /// Each point's index in the current part (valid for the part's points only).
    local: Vec<i32>,
    xadj: Vec<i32>,
    adjncy: Vec<i32>,
    part: Vec<i32>,
}

impl MetisSeparators {
    /// Buffers for a graph of `points` points.
    pub fn new(points: usize) -> Self {
        Self {
            local: vec![0; points],
            ..Self::default()
        }
    }

    /// A vertex separator of the connected part `points` of `graph` (its points are those
    /// for which `in_part` holds): increasing, non-empty. `None` when the part is too large
    /// for METIS's 32-bit indices, METIS fails, or it finds no separator; the caller then
    /// uses its own.
    pub fn separate(
        &mut self,
        graph: &PointGraph,
        points: &[usize],
        in_part: impl Fn(usize) -> bool,
    ) -> Option<Vec<usize>> {
        let count = i32::try_from(points.len()).ok()?;
        for (i, &p) in points.iter().enumerate() {
            self.local[p] = i32::try_from(i).ok()?;
        }
        self.xadj.clear();
        self.adjncy.clear();
        self.xadj.push(0);
        for &p in points {
            for &q in graph.neighbours(p) {
                if in_part(q) {
                    self.adjncy.push(self.local[q]);
                }
            }
            self.xadj.push(i32::try_from(self.adjncy.len()).ok()?);
        }
        self.part.clear();
        self.part.resize(points.len(), 0);
        let mut options = [0i32; metis_sys::METIS_NOPTIONS as usize];
        let mut vertices = count;
        let mut separator_size = 0i32;
        let status = {
            let _serial = METIS.lock().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: `options` has METIS_NOPTIONS entries, as METIS_SetDefaultOptions writes.
            unsafe { metis_sys::METIS_SetDefaultOptions(options.as_mut_ptr()) };
            options[metis_sys::moptions_et_METIS_OPTION_SEED as usize] = SEED;
            // SAFETY: a graph in METIS's CSR form: `xadj` has `vertices + 1` increasing
            // offsets ending at `adjncy.len()`, every `adjncy` entry is in `0..vertices` (a
            // local index of a point of the part) and the adjacency is symmetric without
            // self loops (the point graph's, restricted to the part); `part` has `vertices`
            // entries for METIS to write; a NULL `vwgt` means unit weights. METIS keeps no
            // pointer after it returns.
            unsafe {
                metis_sys::METIS_ComputeVertexSeparator(
                    &mut vertices,
                    self.xadj.as_mut_ptr(),
                    self.adjncy.as_mut_ptr(),
                    std::ptr::null_mut(),
                    options.as_mut_ptr(),
                    &mut separator_size,
                    self.part.as_mut_ptr(),
                )
            }
        };
        if status != metis_sys::rstatus_et_METIS_OK {
            return None;
        }
        let separator: Vec<usize> = points
            .iter()
            .zip(&self.part)
            .filter(|&(_, &side)| side == 2)
            .map(|(&p, _)| p)
            .collect();
        if separator.is_empty() || separator.len() == points.len() {
            return None;
        }
        let mut separator = separator;
        separator.sort_unstable();
        Some(separator)
    }
}
