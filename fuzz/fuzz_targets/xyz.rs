//! libFuzzer's entry point for [`tutti_fuzz::targets::xyz`], which states the oracle.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tutti_fuzz::targets::xyz::run(data));
