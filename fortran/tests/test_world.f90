! The MPI worlds of the C ABI from Fortran, without MPI: what a program that has not
! initialised MPI (or a library built without the `mpi` feature) sees. The worlds of a real
! MPI job are tested by ffi-tests/mpi/test_world.f90 under `mpirun` (`cargo xtask mpi-test`).
!
! Every check is exact (statuses, handles, message fragments):
! - adopting a communicator fails: TUTTI_ERROR_UNSUPPORTED from a library built without
!   MPI, TUTTI_ERROR_DEVICE from one with MPI (which is not initialised here); the handle
!   stays c_null_ptr;
! - tutti_world_info_f, tutti_world_fail_f refuse c_null_ptr and a pointer that is not a
!   world; tutti_world_free_f(c_null_ptr) is a no-op;
! - a workload whose resources%world is not a world is refused before any work, naming
!   options->resources.world (the field sits where tutti reads it).
! Stops with a non-zero exit code when a check fails.
program test_world
    use, intrinsic :: iso_c_binding, only: c_int, c_double, c_ptr, c_null_ptr, c_loc, &
                                           c_associated
    use tutti
    use checks
    implicit none

    call run_checks()
    call check_summary()

contains

    subroutine run_checks()
        type(c_ptr) :: world
        integer(c_int), target :: not_a_world
        integer(c_int) :: status, rank
        type(tutti_fmm_options_t) :: options
        real(c_double) :: positions(3, 2), masses(2)
        real(c_double), allocatable :: potential(:)

        world = c_null_ptr
        call tutti_world_from_fcomm_f(0, world, status)
        call check((status == TUTTI_ERROR_UNSUPPORTED .or. status == TUTTI_ERROR_DEVICE) &
                   .and. .not. c_associated(world), 'no world without MPI: ' &
                   // tutti_status_name_f(status) // ': "' // tutti_last_error_f() // '"')

        rank = -1
        call tutti_world_info_f(c_null_ptr, rank=rank, status=status)
        call check(status == TUTTI_ERROR_NULL_POINTER .and. rank == -1, &
                   'tutti_world_info_f(c_null_ptr): "' // tutti_last_error_f() // '"')
        not_a_world = 7
        call tutti_world_info_f(c_loc(not_a_world), rank=rank, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. rank == -1 &
                   .and. index(tutti_last_error_f(), 'not a live world') > 0, &
                   'a pointer that is not a world: "' // tutti_last_error_f() // '"')
        call tutti_world_fail_f(c_null_ptr, 'bad input', status)
        call check(status == TUTTI_ERROR_NULL_POINTER, &
                   'tutti_world_fail_f(c_null_ptr): "' // tutti_last_error_f() // '"')
        call tutti_world_free_f(world, status)
        call check(status == TUTTI_OK, 'tutti_world_free_f(c_null_ptr) is a no-op')

        positions = reshape([0.0_c_double, 0.0_c_double, 0.0_c_double, &
                             1.0_c_double, 0.0_c_double, 0.0_c_double], [3, 2])
        masses = 1
        call tutti_fmm_options_default_f(options)
        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 1
        options%resources%world = c_loc(not_a_world)
        call tutti_fmm_f(positions, masses, potential, options=options, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. allocated(potential) &
                   .and. index(tutti_last_error_f(), 'resources.world') > 0, &
                   'resources%world that is not a world: "' // tutti_last_error_f() // '"')
        options%resources%world = c_null_ptr
        call tutti_fmm_f(positions, masses, potential, options=options, status=status)
        call check(status == TUTTI_OK .and. all(abs(potential + 1) < 1e-15_c_double), &
                   'with world c_null_ptr the call runs here: potentials -1, -1')
    end subroutine run_checks

end program test_world
