//! Matrix Market files (`.mtx`): to be written.
