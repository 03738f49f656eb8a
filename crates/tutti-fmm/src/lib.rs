//! tutti workload: fmm (under construction).
#![deny(missing_docs)]
