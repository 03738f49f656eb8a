//! libFuzzer's entry point for [`tutti_fuzz::targets::npy_train_dir`], which states the oracle.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tutti_fuzz::targets::npy_train_dir::run(data));
