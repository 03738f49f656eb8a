//! placeholder
#![deny(missing_docs)]
