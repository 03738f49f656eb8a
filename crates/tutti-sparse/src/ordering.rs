//! Nested dissection orderings: to be written.
