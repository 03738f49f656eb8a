//! libFuzzer's entry point for [`tutti_fuzz::targets::capi_train_arrays`], which states the oracle.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tutti_fuzz::targets::capi_train_arrays::run(data));
