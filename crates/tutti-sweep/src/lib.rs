//! tutti workload: sweep (under construction).
#![deny(missing_docs)]
