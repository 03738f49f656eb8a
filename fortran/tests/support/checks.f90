! The check counter shared by the Fortran tests of fortran/tests (the twin of
! ffi-tests/include/check.h): `call check(condition, what)` prints "ok" or "FAIL" with a
! description, and `call check_summary()` prints the closing "N passed, M failed" line and
! stops with a non-zero exit code when any check failed.
!
! `cargo xtask ffi-test` compiles it once, with fortran/tutti.f90, and links it into every
! test program.
module checks
    use, intrinsic :: iso_c_binding, only: c_double
    implicit none
    private
    public :: check, check_summary, itoa, etoa, relative_l2, write_basis_file, delete_file

    integer, save :: checks_run = 0
    integer, save :: failures = 0

contains

    ! Counts and prints one check.
    subroutine check(passed, what)
        logical, intent(in) :: passed
        character(len=*), intent(in) :: what

        checks_run = checks_run + 1
        if (passed) then
            print '(a, a)', 'ok    ', what
        else
            failures = failures + 1
            print '(a, a)', 'FAIL  ', what
        end if
    end subroutine check

    ! Prints the closing line; stops with exit code 1 when any check failed.
    subroutine check_summary()
        print '(i0, a, i0, a)', checks_run - failures, ' passed, ', failures, ' failed'
        if (failures /= 0) error stop 1
    end subroutine check_summary

    ! An integer as text, without blanks.
    function itoa(value) result(text)
        integer, intent(in) :: value
        character(len=:), allocatable :: text
        character(len=24) :: buffer

        write (buffer, '(i0)') value
        text = trim(buffer)
    end function itoa

    ! A real as text in scientific notation with `digits` significant digits (default 3).
    function etoa(value, digits) result(text)
        real(c_double), intent(in) :: value
        integer, intent(in), optional :: digits
        character(len=:), allocatable :: text
        character(len=40) :: buffer
        character(len=20) :: form
        integer :: shown

        shown = 3
        if (present(digits)) shown = digits
        write (form, '(a, i0, a, i0, a)') '(es', shown + 8, '.', shown - 1, ')'
        write (buffer, form) value
        text = trim(adjustl(buffer))
    end function etoa

    ! ||approx - exact|| / ||exact|| over every element (2-norms of the flattened arrays).
    function relative_l2(approx, exact) result(error)
        real(c_double), intent(in) :: approx(:), exact(:)
        real(c_double) :: error

        error = norm2(approx - exact) / norm2(exact)
    end function relative_l2

    ! Writes PySCF 2.14's built-in sto-3g for H and O, in NWChem format, to a new file under
    ! /tmp named after `tag`; returns its path (the RHF tests' basis).
    function write_basis_file(tag) result(path)
        character(len=*), intent(in) :: tag
        character(len=:), allocatable :: path
        character(len=64) :: buffer
        integer :: unit
        real :: draw

        call random_seed()
        call random_number(draw)
        write (buffer, '(a, i9.9, a)') '/tmp/tutti-fortran-' // tag // '-', int(draw * 1e9), '.nw'
        path = trim(buffer)
        open (newunit=unit, file=path, status='new', action='write')
        write (unit, '(a)') 'BASIS "ao basis" SPHERICAL'
        write (unit, '(a)') 'H    S'
        write (unit, '(a)') '      3.42525091             0.15432897'
        write (unit, '(a)') '      0.62391373             0.53532814'
        write (unit, '(a)') '      0.16885540             0.44463454'
        write (unit, '(a)') 'O    S'
        write (unit, '(a)') '    130.70932                0.15432897'
        write (unit, '(a)') '     23.808861               0.53532814'
        write (unit, '(a)') '      6.4436083              0.44463454'
        write (unit, '(a)') 'O    SP'
        write (unit, '(a)') '      5.0331513             -0.09996723             0.15591627'
        write (unit, '(a)') '      1.1695961              0.39951283             0.60768372'
        write (unit, '(a)') '      0.3803890              0.70011547             0.39195739'
        write (unit, '(a)') 'END'
        close (unit)
    end function write_basis_file

    ! Deletes the file at `path`.
    subroutine delete_file(path)
        character(len=*), intent(in) :: path
        integer :: unit
        open (newunit=unit, file=path, status='old')
        close (unit, status='delete')
    end subroutine delete_file

end module checks
