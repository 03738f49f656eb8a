//! The particle reader: one `.npy` file read as positions (N, 3) and as strengths (N,).
//! Oracle: no panic, no abort; what reads back has the length its header claims.

/// The shape in a `.npy` header, parsed loosely (the oracle's own reading, not tutti's).
fn header_shape(data: &[u8]) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(data.get(10..)?).ok()?;
    let start = text.find("'shape':")? + "'shape':".len();
    let open = text[start..].find('(')? + start + 1;
    let close = text[open..].find(')')? + open;
    text[open..close]
        .split(',')
        .map(str::trim)
        .filter(|dim| !dim.is_empty())
        .map(|dim| dim.trim_end_matches('L').parse().ok())
        .collect()
}

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let dir = crate::write_scratch(&["bodies.npy".to_string()], &[data]);
    let path = dir.join("bodies.npy");
    let shape = header_shape(data);
    if let Ok(positions) = tutti_fmm::io::read_positions(&path) {
        if let Some(shape) = &shape {
            assert_eq!(
                shape.first().copied(),
                Some(positions.len() as u64),
                "{shape:?}"
            );
        }
    }
    if let Ok(masses) = tutti_fmm::io::read_masses(&path) {
        if let Some(shape) = &shape {
            assert_eq!(
                shape.first().copied(),
                Some(masses.len() as u64),
                "{shape:?}"
            );
        }
    }
}
