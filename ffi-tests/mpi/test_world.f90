! The C ABI's MPI worlds from Fortran (run under `mpirun -n N` by `cargo xtask mpi-test`):
! a program that initialises MPI passes its communicator's integer handle to tutti, reads
! back its rank and size, releases the world, uses its own communicator and finalises.
program test_world
    use, intrinsic :: iso_c_binding, only: c_int, c_int32_t, c_ptr, c_null_ptr, c_associated
    use mpi
    use tutti
    implicit none

    type(c_ptr) :: world
    integer :: ierr, rank, size, total
    integer(c_int) :: status, world_rank, world_size, local_rank, local_size
    integer :: failures

    failures = 0
    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)

    world = c_null_ptr
    status = tutti_world_from_fcomm(int(MPI_COMM_WORLD, c_int32_t), world)
    call check(status == TUTTI_OK .and. c_associated(world), "tutti_world_from_fcomm")
    status = tutti_world_info(world, world_rank, world_size, local_rank, local_size)
    call check(status == TUTTI_OK, "tutti_world_info")
    call check(world_rank == rank .and. world_size == size, "rank and size as MPI says")
    call check(local_size == size, "one node holds every process")
    status = tutti_world_free(world)
    call check(status == TUTTI_OK, "tutti_world_free")

    call MPI_Allreduce(rank, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check(total == size * (size - 1) / 2, "MPI_Allreduce on the host communicator")

    call MPI_Finalize(ierr)
    if (failures == 0) then
        print '(a, i0, a)', 'rank ', rank, ': ok'
    else
        print '(a, i0, a, i0, a)', 'rank ', rank, ': ', failures, ' checks FAILED'
        error stop 1
    end if

contains

    subroutine check(condition, what)
        logical, intent(in) :: condition
        character(len=*), intent(in) :: what
        if (condition) then
            print '(a, a)', 'ok    ', what
        else
            print '(a, a)', 'FAIL  ', what
            failures = failures + 1
        end if
    end subroutine check
end program test_world
