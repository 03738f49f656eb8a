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
    public :: check, check_summary, itoa, etoa, relative_l2

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

end module checks
