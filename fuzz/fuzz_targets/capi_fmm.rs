//! libFuzzer's entry point for [`tutti_fuzz::targets::capi_fmm`], which states the oracle.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tutti_fuzz::targets::capi_fmm::run(data));
