//! Model matrices on grids: to be written.
