! Sparse direct solves from Fortran (the twin of ffi-tests/c/test_sparse.c, on a smaller
! matrix: this runs under valgrind).
!
! The matrix is the 1-D convection-diffusion operator on 50 points, unsymmetric and
! tridiagonal: 2.5 on the diagonal, -1.5 below it, -1.0 above it, given as Fortran gives it:
! 1-based CSC (column pointers, row indices), options%index_base = 1, passed unchanged.
! With x_i = i and b = A x (exact in floating point: small integers) the checks are:
! - the defaults of tutti_sparse_options_default_f, every component at its place (the two
!   int[3] arrays included);
! - 1 and 2 simulated devices: x to 1e-12 (relative, max norm), backward error at most
!   1e-15, the same bits on both; tutti_sparse_info_f before and after factoring;
! - a 1-D grid ordering through options%grid_dims: the same solution to 1e-12; a grid of
!   the wrong size is refused;
! - a refactorization with 2 A, then two right-hand sides at once, b(:, 2): x / 2 and x;
! - the error paths: a solve before any factorization, a wrong value count, a singular
!   [[1, 1], [1, 1]] (TUTTI_ERROR_SINGULAR at the solve, b untouched), a released handle;
! - 1-based arrays without options%index_base = 1 stop the program (run as a child) with a
!   message that names index_base, rather than let tutti read past `indices`;
! - complex128: [[2, i], [0, 4]] on 2 devices, x = (1 + i, 1) from b = (2 + 3i, 4) exactly
!   (every product and quotient is exact in binary), one and two right-hand sides; the real
!   entry points refused on the complex handle.
! Stops with a non-zero exit code when a check fails.
program test_sparse
    use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double, c_double_complex, &
                                           c_ptr, c_null_ptr, c_associated
    use tutti
    use checks
    implicit none

    integer, parameter :: N = 50
    integer, parameter :: NNZ = 3 * N - 2
    character(len=64) :: argument

    call get_command_argument(1, argument)
    if (argument == 'forgotten-index-base') then
        call analyse_without_index_base()
    else
        call run_checks()
        call check_summary()
    end if

contains

    subroutine run_checks()
        integer(c_int64_t) :: pointers(N + 1), indices(NNZ)
        real(c_double) :: values(NNZ), exact(N), b(N), x(N), first(N), rhs(N, 2)
        type(tutti_sparse_options_t) :: options, defaults
        type(tutti_sparse_info_t) :: info
        type(tutti_sparse_solve_info_t) :: reached
        type(c_ptr) :: lu, released
        integer(c_int) :: status, devices
        integer :: i

        call convection_diffusion(pointers, indices, values)
        exact = [(real(i, c_double), i = 1, N)]
        b = multiply(pointers, indices, values, exact)

        call tutti_sparse_options_default_f(defaults, status)
        call check(status == TUTTI_OK .and. defaults%resources%kind == TUTTI_KIND_AUTO &
                   .and. defaults%resources%devices == TUTTI_ALL_DEVICES &
                   .and. defaults%layout == TUTTI_SPARSE_CSR .and. defaults%index_base == 0 &
                   .and. defaults%block == 1 .and. defaults%leaf_size == 64 &
                   .and. all(defaults%grid_dims == 0) .and. all(defaults%grid_periodic == 0) &
                   .and. defaults%pivot_tiny == epsilon(1.0_c_double) &
                   .and. defaults%pivot_perturbation == sqrt(epsilon(1.0_c_double)) &
                   .and. defaults%max_refinements == 3 &
                   .and. defaults%refinement_target == 4 * epsilon(1.0_c_double), &
                   'defaults: AUTO, all devices, 0-based CSR, blocks of 1, leaves of 64, ' &
                   // 'no grid, pivots eps / sqrt(eps), 3 refinements to 4 eps')

        ! 1-based CSC as Fortran holds it, on 1 and 2 simulated devices.
        options = defaults
        options%resources%kind = TUTTI_KIND_CPU
        options%layout = TUTTI_SPARSE_CSC
        options%index_base = 1
        options%leaf_size = 8
        do devices = 1, 2
            options%resources%devices = devices
            lu = c_null_ptr
            call tutti_sparse_analyse_f(int(N, c_int64_t), pointers, indices, lu, options, &
                                        status)
            call check(status == TUTTI_OK .and. c_associated(lu), 'analyse on ' &
                       // itoa(devices) // ' device(s): ' // tutti_last_error_f())
            call tutti_sparse_info_f(lu, info, status)
            call check(status == TUTTI_OK .and. info%unknowns == N .and. info%matrix_nnz == NNZ &
                       .and. info%factor_nnz >= NNZ .and. info%fronts >= 1 &
                       .and. info%devices == devices .and. info%factored == 0, &
                       'info before factoring: ' // itoa(int(info%unknowns)) // ' unknowns, ' &
                       // itoa(int(info%matrix_nnz)) // ' entries, nnz(L+U) ' &
                       // itoa(int(info%factor_nnz)) // ', ' // itoa(int(info%fronts)) &
                       // ' fronts')
            call tutti_sparse_factor_f(lu, values, status)
            call check(status == TUTTI_OK, 'factor: ' // tutti_last_error_f())
            x = b
            reached%backward_error = -1
            call tutti_sparse_solve_f(lu, x, reached, status)
            call check(status == TUTTI_OK .and. reached%refinements >= 0 &
                       .and. reached%backward_error >= 0 &
                       .and. reached%backward_error <= 1e-15_c_double, 'solve: backward error ' &
                       // etoa(reached%backward_error) // ' after ' // itoa(reached%refinements) &
                       // ' refinement(s)')
            call check(max_error(x, exact) < 1e-12_c_double, 'max |x - exact| / max |exact| = ' &
                       // etoa(max_error(x, exact)))
            if (devices == 1) then
                first = x
            else
                call check(all(x == first), '2 devices give the same bits as 1')
            end if
            call tutti_sparse_info_f(lu, info, status)
            call check(status == TUTTI_OK .and. info%factored == 1 &
                       .and. info%perturbed_pivots == 0 .and. info%device_bytes > 0, &
                       'info after factoring: factored, no pivot perturbed, ' &
                       // itoa(int(info%device_bytes)) // ' bytes on the largest device')
            if (devices == 1) call tutti_sparse_free_f(lu)
        end do

        ! Refactor the 2-device handle with 2 A; solve two right-hand sides at once.
        call tutti_sparse_factor_f(lu, 2 * values, status)
        call check(status == TUTTI_OK, 'refactor with 2 A: ' // tutti_last_error_f())
        rhs(:, 1) = b
        rhs(:, 2) = 2 * b
        call tutti_sparse_solve_f(lu, rhs, reached, status)
        call check(status == TUTTI_OK .and. reached%backward_error <= 1e-15_c_double, &
                   'solve b(:, 2): backward error ' // etoa(reached%backward_error))
        call check(max_error(rhs(:, 1), exact / 2) < 1e-12_c_double &
                   .and. max_error(rhs(:, 2), exact) < 1e-12_c_double, &
                   'the solutions are x / 2 and x (' // etoa(max_error(rhs(:, 1), exact / 2)) &
                   // ', ' // etoa(max_error(rhs(:, 2), exact)) // ')')
        call tutti_sparse_factor_f(lu, values(1:NNZ - 1), status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'nnz') > 0, &
                   'a wrong value count is refused: "' // tutti_last_error_f() // '"')
        x = b
        call tutti_sparse_solve_f(lu, x, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. all(x == b), &
                   'after a failed factorization a solve is refused, b untouched: "' &
                   // tutti_last_error_f() // '"')
        released = lu
        call tutti_sparse_free_f(lu, status)
        call check(status == TUTTI_OK .and. .not. c_associated(lu), &
                   'tutti_sparse_free_f releases the handle and nulls it')
        call tutti_sparse_free_f(lu, status)
        call check(status == TUTTI_OK, 'releasing c_null_ptr is a no-op')
        status = tutti_sparse_free(released)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT, &
                   'a released handle is refused: "' // tutti_last_error_f() // '"')

        ! The grid ordering: the unknowns on a line of N points (grid_dims reaches tutti).
        options%resources%devices = 1
        options%grid_dims = [N, 0, 0]
        call tutti_sparse_analyse_f(int(N, c_int64_t), pointers, indices, lu, options, status)
        call check(status == TUTTI_OK, 'analyse with grid_dims = [50, 0, 0]: ' &
                   // tutti_last_error_f())
        call tutti_sparse_factor_f(lu, values)
        x = b
        call tutti_sparse_solve_f(lu, x)
        call check(max_error(x, exact) < 1e-12_c_double, 'the grid ordering solves it too (' &
                   // etoa(max_error(x, exact)) // ')')
        call tutti_sparse_free_f(lu)
        options%grid_dims = [N - 1, 0, 0]
        call tutti_sparse_analyse_f(int(N, c_int64_t), pointers, indices, lu, options, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. c_associated(lu) &
                   .and. index(tutti_last_error_f(), 'grid') > 0, &
                   'a grid of 49 points for 50 unknowns is refused: "' // tutti_last_error_f() &
                   // '"')
        options%grid_dims = 0

        call check_singular(options)
        call check_complex()

        call check(child_stops_with_message(), '1-based arrays with the default index_base 0 ' &
                   // 'stop the program with a message that names index_base')
    end subroutine run_checks

    ! [[1, 1], [1, 1]] factors (a pivot perturbed) but its solve is TUTTI_ERROR_SINGULAR.
    subroutine check_singular(options)
        type(tutti_sparse_options_t), intent(in) :: options
        integer(c_int64_t), parameter :: pointers(3) = [1, 3, 5], indices(4) = [1, 2, 1, 2]
        real(c_double), parameter :: values(4) = 1
        real(c_double) :: b(2)
        type(tutti_sparse_info_t) :: info
        type(c_ptr) :: lu
        integer(c_int) :: status

        lu = c_null_ptr
        call tutti_sparse_analyse_f(2_c_int64_t, pointers, indices, lu, options, status)
        call check(status == TUTTI_OK, 'analyse [[1, 1], [1, 1]]: ' // tutti_last_error_f())
        b = [1, 2]
        call tutti_sparse_solve_f(lu, b, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. all(b == [1, 2]), &
                   'a solve before any factorization is refused: "' // tutti_last_error_f() &
                   // '"')
        call tutti_sparse_factor_f(lu, values, status)
        call tutti_sparse_info_f(lu, info)
        call check(status == TUTTI_OK .and. info%perturbed_pivots >= 1, &
                   'it factors, with ' // itoa(int(info%perturbed_pivots)) // ' pivot(s) perturbed')
        b = [1, 2]
        call tutti_sparse_solve_f(lu, b, status=status)
        call check(status == TUTTI_ERROR_SINGULAR .and. all(b == [1, 2]), &
                   'its solve is TUTTI_ERROR_SINGULAR, b untouched: "' // tutti_last_error_f() &
                   // '"')
        call check(tutti_status_name_f(TUTTI_ERROR_SINGULAR) == 'TUTTI_ERROR_SINGULAR', &
                   'the status has its name')
        call tutti_sparse_free_f(lu)
    end subroutine check_singular

    ! [[2, i], [0, 4]] in complex128 (1-based CSR) on 2 devices: x = (1 + i, 1) exactly.
    subroutine check_complex()
        integer(c_int64_t), parameter :: pointers(3) = [1, 3, 4], indices(3) = [1, 2, 2]
        complex(c_double_complex), parameter :: values(3) = [(2.0_c_double, 0.0_c_double), &
            (0.0_c_double, 1.0_c_double), (4.0_c_double, 0.0_c_double)]
        complex(c_double_complex), parameter :: exact(2) = [(1.0_c_double, 1.0_c_double), &
            (1.0_c_double, 0.0_c_double)]
        complex(c_double_complex) :: b(2), many(2, 2)
        real(c_double) :: real_b(2)
        type(tutti_sparse_options_t) :: options
        type(tutti_sparse_solve_info_t) :: reached
        type(c_ptr) :: lu
        integer(c_int) :: status

        call tutti_sparse_options_default_f(options)
        call check(options%dtype == TUTTI_DTYPE_FLOAT64, 'the default dtype is float64')
        options%index_base = 1
        options%dtype = TUTTI_DTYPE_COMPLEX128
        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 2
        lu = c_null_ptr
        call tutti_sparse_analyse_f(2_c_int64_t, pointers, indices, lu, options, status)
        call check(status == TUTTI_OK, 'analyse a complex handle: ' // tutti_last_error_f())
        call tutti_sparse_factor_f(lu, [2.0_c_double, 0.0_c_double, 4.0_c_double], status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'tutti_sparse_factor_c128') > 0, &
                   'a real factorization of a complex handle is refused: "' &
                   // tutti_last_error_f() // '"')
        call tutti_sparse_factor_c128_f(lu, values, status)
        call check(status == TUTTI_OK, 'complex factor: ' // tutti_last_error_f())
        b = [(2.0_c_double, 3.0_c_double), (4.0_c_double, 0.0_c_double)]
        call tutti_sparse_solve_c128_f(lu, b, reached, status)
        call check(status == TUTTI_OK .and. all(b == exact), &
                   'the complex solve gives x = (1 + i, 1) exactly')
        many(:, 1) = [(2.0_c_double, 3.0_c_double), (4.0_c_double, 0.0_c_double)]
        many(:, 2) = 2 * many(:, 1)
        call tutti_sparse_solve_c128_f(lu, many, status=status)
        call check(status == TUTTI_OK .and. all(many(:, 1) == exact) &
                   .and. all(many(:, 2) == 2 * exact), 'two complex right-hand sides at once')
        real_b = 1
        call tutti_sparse_solve_f(lu, real_b, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. all(real_b == 1), &
                   'a real solve with a complex handle is refused, b untouched')
        call tutti_sparse_free_f(lu)
    end subroutine check_complex

    ! The child's part: 1-based arrays analysed with the default options (0-based).
    subroutine analyse_without_index_base()
        integer(c_int64_t) :: pointers(N + 1), indices(NNZ)
        real(c_double) :: values(NNZ)
        type(c_ptr) :: lu
        integer(c_int) :: status

        call convection_diffusion(pointers, indices, values)
        lu = c_null_ptr
        call tutti_sparse_analyse_f(int(N, c_int64_t), pointers, indices, lu, status=status)
        print '(a)', 'tutti_sparse_analyse_f returned with arrays longer than `indices`'
    end subroutine analyse_without_index_base

    ! Runs this program as `<program> forgotten-index-base` through the shell (natively, also
    ! when this one runs under valgrind) and checks its exit code and output.
    logical function child_stops_with_message() result(ok)
        character(len=4096) :: program
        character(len=:), allocatable :: command
        integer :: exit_code, command_status

        call get_command_argument(0, program)
        command = 'out=$(GFORTRAN_ERROR_BACKTRACE=0 ''' // trim(program) &
                  // ''' forgotten-index-base 2>&1); code=$?; ' &
                  // 'printf "      child (exit %s): %s\n" "$code" "$out"; ' &
                  // '[ "$code" -ne 0 ] || exit 1; case "$out" in ' &
                  // '*"tutti_sparse_analyse_f: indices has 148 entries"*"index_base"*) ' &
                  // 'exit 0;; esac; exit 1'
        exit_code = -1
        command_status = -1
        call execute_command_line(command, wait=.true., exitstat=exit_code, &
                                  cmdstat=command_status)
        ok = command_status == 0 .and. exit_code == 0
    end function child_stops_with_message

    ! The operator in 1-based CSC: column j holds A(j - 1, j) = -1.0, A(j, j) = 2.5 and
    ! A(j + 1, j) = -1.5, those that exist, rows in increasing order.
    subroutine convection_diffusion(pointers, indices, values)
        integer(c_int64_t), intent(out) :: pointers(N + 1), indices(NNZ)
        real(c_double), intent(out) :: values(NNZ)
        integer :: i, j, k

        k = 0
        pointers(1) = 1
        do j = 1, N
            do i = max(j - 1, 1), min(j + 1, N)
                k = k + 1
                indices(k) = i
                if (i == j) then
                    values(k) = 2.5_c_double
                else if (i == j + 1) then
                    values(k) = -1.5_c_double
                else
                    values(k) = -1.0_c_double
                end if
            end do
            pointers(j + 1) = k + 1
        end do
    end subroutine convection_diffusion

    ! A x for A in 1-based CSC.
    function multiply(pointers, indices, values, x) result(y)
        integer(c_int64_t), intent(in) :: pointers(:), indices(:)
        real(c_double), intent(in) :: values(:), x(:)
        real(c_double) :: y(size(x))
        integer(c_int64_t) :: k
        integer :: j

        y = 0
        do j = 1, size(x)
            do k = pointers(j), pointers(j + 1) - 1
                y(indices(k)) = y(indices(k)) + values(k) * x(j)
            end do
        end do
    end function multiply

    ! max |x - exact| / max |exact|.
    function max_error(x, exact) result(error)
        real(c_double), intent(in) :: x(:), exact(:)
        real(c_double) :: error
        error = maxval(abs(x - exact)) / maxval(abs(exact))
    end function max_error

end program test_sparse
