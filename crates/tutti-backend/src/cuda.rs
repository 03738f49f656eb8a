//! CUDA devices (written in the next commit).
