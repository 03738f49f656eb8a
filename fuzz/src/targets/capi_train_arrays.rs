//! `tutti_train_from_arrays` and the calls that read a train back, driven through their Rust
//! functions with arbitrary kinds, dtypes, site counts, shapes and lengths.
//!
//! The harness allocates each core exactly as large as its shape claims when the shapes are
//! valid (so AddressSanitizer catches a read past it), and only 16 doubles per core when they
//! are not (then the library must refuse without reading the cores at their claimed size).
//! Oracle: no crash or sanitizer report; invalid shapes are refused; valid ones round-trip.

use std::os::raw::c_int;
use std::ptr;

use tutti::{
    tutti_train_free, tutti_train_from_arrays, tutti_train_info, tutti_train_norm,
    tutti_train_shapes, tutti_train_site, TuttiStatus, TuttiTrain,
};

use crate::Bytes;

const OK: c_int = TuttiStatus::TUTTI_OK as c_int;
const MAX_ENTRIES: usize = 4096;

/// A dimension: mostly small, sometimes any `i32` (zero, negative, huge).
fn dimension(bytes: &mut Bytes) -> c_int {
    let tag = bytes.u8();
    if tag < 224 {
        c_int::from(tag % 4) + 1
    } else {
        bytes.i32()
    }
}

/// The entries per site (in doubles) if the shapes are valid by the documented rules.
fn valid_sizes(kind: c_int, dtype: c_int, n_sites: c_int, shapes: &[c_int]) -> Option<Vec<usize>> {
    let axes = match kind {
        0 => 3,
        1 => 4,
        _ => return None,
    };
    let scalar = match dtype {
        0 => 1usize,
        1 => 2,
        _ => return None,
    };
    if n_sites < 1 {
        return None;
    }
    let mut sizes = Vec::new();
    let mut left = 1;
    for site in shapes.chunks_exact(axes) {
        if site.iter().any(|&d| d < 1) || site[0] != left {
            return None;
        }
        left = site[axes - 1];
        let entries = site
            .iter()
            .try_fold(scalar, |product, &d| product.checked_mul(d as usize))?;
        sizes.push(entries);
    }
    (left == 1).then_some(sizes)
}

/// Runs one input through the target: returns when the oracle (the module's doc) holds,
/// panics where it fails.
pub fn run(data: &[u8]) {
    let mut bytes = Bytes::new(data);
    let kind = match bytes.u8() {
        250 => 2,
        251 => -1,
        tag => c_int::from(tag % 2),
    };
    let dtype = match bytes.u8() {
        250 => 7,
        tag => c_int::from(tag % 2),
    };
    let n_sites = match bytes.u8() {
        250 => -1,
        251 => c_int::MAX,
        tag => c_int::from(tag % 7),
    };
    let axes = if kind == 1 { 4 } else { 3 };
    let stored_sites = n_sites.clamp(0, 6) as usize;
    let shapes: Vec<c_int> = (0..axes * stored_sites)
        .map(|_| dimension(&mut bytes))
        .collect();
    if n_sites > 6 {
        // The shapes array holds fewer ints than `n_sites` claims: calling would be the
        // caller's undefined behaviour, not a library bug.
        return;
    }
    let valid = valid_sizes(kind, dtype, n_sites, &shapes);
    if let Some(sizes) = &valid {
        if sizes.iter().sum::<usize>() > MAX_ENTRIES {
            return;
        }
    }
    let sizes = valid.clone().unwrap_or_else(|| vec![16; stored_sites]);
    let cores: Vec<Vec<f64>> = sizes
        .iter()
        .map(|&len| {
            (0..len)
                .map(|_| f64::from(bytes.u8()) / 16.0 - 8.0)
                .collect()
        })
        .collect();
    let core_pointers: Vec<*const f64> = cores.iter().map(|core| core.as_ptr()).collect();
    let mut train: *mut TuttiTrain = ptr::null_mut();
    // SAFETY: `shapes` holds `axes * n_sites` ints; each core holds what its (valid) shape
    // claims, or 16 doubles when the shapes are invalid; `train` is writable.
    let status = unsafe {
        tutti_train_from_arrays(
            kind,
            dtype,
            n_sites,
            shapes.as_ptr(),
            core_pointers.as_ptr(),
            &mut train,
        )
    };
    if valid.is_none() {
        assert_ne!(status, OK, "invalid shapes {shapes:?} accepted");
        assert!(train.is_null());
        return;
    }
    if status != OK {
        return; // valid shapes, but e.g. a non-finite entry
    }
    let (mut got_kind, mut got_dtype, mut got_sites) = (-1, -1, -1);
    // SAFETY: a live handle and three writable ints.
    let info = unsafe { tutti_train_info(train, &mut got_kind, &mut got_dtype, &mut got_sites) };
    assert_eq!(
        (info, got_kind, got_dtype, got_sites),
        (OK, kind, dtype, n_sites)
    );

    let asked =
        usize::from(bytes.u8().is_multiple_of(2)) * shapes.len() + usize::from(bytes.u8() % 3);
    let mut shapes_back = vec![0; asked];
    // SAFETY: a live handle and `asked` writable ints.
    let status = unsafe { tutti_train_shapes(train, shapes_back.as_mut_ptr(), asked) };
    if asked == shapes.len() {
        assert_eq!((status, &shapes_back), (OK, &shapes));
    } else {
        assert_ne!(
            status,
            OK,
            "{asked} ints accepted for {} shapes",
            shapes.len()
        );
    }

    let site = c_int::from(bytes.u8() % 8) - 1;
    let expected = usize::try_from(site)
        .ok()
        .and_then(|s| sizes.get(s).copied());
    let asked = match (expected, bytes.u8() % 3) {
        (Some(len), 0) => len,
        (Some(len), 1) => len + 1,
        (_, tag) => usize::from(tag),
    };
    let mut site_back = vec![0.0; asked];
    // SAFETY: a live handle and `asked` writable doubles.
    let status = unsafe { tutti_train_site(train, site, site_back.as_mut_ptr(), asked) };
    if expected == Some(asked) {
        assert_eq!(status, OK);
        let index = usize::try_from(site).unwrap_or_default();
        assert_eq!(site_back, cores[index]);
    } else {
        assert_ne!(status, OK, "site {site} with {asked} doubles accepted");
    }

    let mut norm = -1.0;
    // SAFETY: a live handle and a writable double.
    let status = unsafe { tutti_train_norm(train, &mut norm) };
    assert!(status != OK || norm >= 0.0);
    // SAFETY: a live handle, released once.
    assert_eq!(unsafe { tutti_train_free(train) }, OK);
}
