! tutti_fit from Fortran: a fit whose residuals come from a bind(C) Fortran callback (the
! twin of ffi-tests/c/test_fit.c).
!
! The model y = a * exp(b * x) is fitted to exact data made with (a, b) = (2, -0.5): four
! experiments of five points, x = e + 0.25 i. Checks and tolerances:
! - the fit recovers (2, -0.5) to 1e-10 on 1 to 4 simulated devices: the data are exact, so
!   the minimum is exact and only the stopping tolerances (gradient 1e-10, step 1e-12
!   relative) and rounding separate the result from it; the same bits on every device count
!   (the documented guarantee);
! - the covariance is the inverse of J^T J at the solution, which this test forms from the
!   model's Jacobian and inverts itself (2 x 2): relative 1e-12, since either inverse is off
!   by about cond(J^T J) ~ 15 (printed) times the rounding unit, 3e-15;
! - the callback ran for every experiment of every evaluation (user_data carries one
!   counter per experiment, so concurrent calls for different experiments never share one);
! - the error paths: a failing callback, a NULL callback (the raw interface), zero
!   devices, an unknown ordinal, a memory cap too small, a GPU without a GPU;
! - bounds (the wrapper's `lower` and `upper`): a <= 1.5, and a fixed at 1.5 by equal
!   bounds, keep the truth out of reach, so a is 1.5 exactly and b the minimum of the
!   reduced problem (a held at 1.5), which a one-parameter fit finds independently; either
!   fit may stop anywhere the cost is flat to rounding, within sqrt(2 eps cost / curvature)
!   = 2e-9 of that minimum (cost 0.33, curvature 37), so they agree to 2e-8 relative. The
!   cost tolerance is off (1e-300) so that each goes on until rounding stops it. Crossed
!   bounds are TUTTI_ERROR_INVALID_ARGUMENT naming the entry;
! - a rank-deficient fit, y = (p1 + p2) x against y = 3x: finite parameters whose sum is 3,
!   result%covariance_rank 1 and the pseudo-inverse of J^T J = 55 [[1, 1], [1, 1]] (every
!   entry 1/220, to 1e-12 relative);
! - result%termination: TUTTI_TERMINATION_MAX_ITERATIONS after one iteration.
! Stops with a non-zero exit code when a check fails.
module test_fit_model
    use, intrinsic :: iso_c_binding, only: c_int, c_double, c_ptr, c_associated, c_f_pointer
    implicit none
    private
    public :: exponential, exponential_b, sum_only, failing, model_jacobian, EXPERIMENTS, POINTS

    integer(c_int), parameter :: EXPERIMENTS = 4
    integer(c_int), parameter :: POINTS = 5

contains

    ! The callback: residuals and Jacobian of experiment `experiment` (0-based). When
    ! user_data is set it points to EXPERIMENTS call counters; each experiment counts its own.
    ! `recursive`: tutti calls it from several threads at once, and gfortran then keeps the
    ! locals on each thread's stack (and -fcheck=recursion does not take the calls for
    ! recursion).
    recursive function exponential(user_data, experiment, p, n, r, m, jacobian) bind(c) &
            result(status)
        type(c_ptr), value :: user_data
        integer(c_int), value :: experiment
        integer(c_int), value :: n
        integer(c_int), value :: m
        real(c_double), intent(in) :: p(n)
        real(c_double), intent(out) :: r(m)
        real(c_double), intent(out) :: jacobian(n, m)
        integer(c_int) :: status
        integer(c_int), pointer :: calls(:)
        real(c_double) :: x
        integer :: i

        if (c_associated(user_data)) then
            call c_f_pointer(user_data, calls, [EXPERIMENTS])
            calls(experiment + 1) = calls(experiment + 1) + 1
        end if
        do i = 1, m
            x = experiment + 0.25_c_double * (i - 1)
            r(i) = p(1) * exp(p(2) * x) - 2.0_c_double * exp(-0.5_c_double * x)
            jacobian(1, i) = exp(p(2) * x)
            jacobian(2, i) = p(1) * x * exp(p(2) * x)
        end do
        status = 0
    end function exponential

    ! The reduced problem: a held at the real(c_double) user_data points to; the one
    ! parameter is b.
    recursive function exponential_b(user_data, experiment, p, n, r, m, jacobian) bind(c) &
            result(status)
        type(c_ptr), value :: user_data
        integer(c_int), value :: experiment
        integer(c_int), value :: n
        integer(c_int), value :: m
        real(c_double), intent(in) :: p(n)
        real(c_double), intent(out) :: r(m)
        real(c_double), intent(out) :: jacobian(n, m)
        integer(c_int) :: status
        real(c_double), pointer :: a
        real(c_double) :: x
        integer :: i

        call c_f_pointer(user_data, a)
        do i = 1, m
            x = experiment + 0.25_c_double * (i - 1)
            r(i) = a * exp(p(1) * x) - 2.0_c_double * exp(-0.5_c_double * x)
            jacobian(1, i) = a * x * exp(p(1) * x)
        end do
        status = 0
    end function exponential_b

    ! y = (p1 + p2) x against y = 3x at x = 1..m: the parameters enter only as their sum.
    recursive function sum_only(user_data, experiment, p, n, r, m, jacobian) bind(c) &
            result(status)
        type(c_ptr), value :: user_data
        integer(c_int), value :: experiment
        integer(c_int), value :: n
        integer(c_int), value :: m
        real(c_double), intent(in) :: p(n)
        real(c_double), intent(out) :: r(m)
        real(c_double), intent(out) :: jacobian(n, m)
        integer(c_int) :: status
        integer :: i

        ! One experiment and no user data: anything else is a bug of the call.
        status = 1
        if (experiment /= 0 .or. c_associated(user_data)) return
        do i = 1, m
            r(i) = (p(1) + p(2)) * i - 3.0_c_double * i
            jacobian(:, i) = i
        end do
        status = 0
    end function sum_only

    ! A callback that always fails, with 3 (counting its calls as exponential does).
    recursive function failing(user_data, experiment, p, n, r, m, jacobian) bind(c) &
            result(status)
        type(c_ptr), value :: user_data
        integer(c_int), value :: experiment
        integer(c_int), value :: n
        integer(c_int), value :: m
        real(c_double), intent(in) :: p(n)
        real(c_double), intent(out) :: r(m)
        real(c_double), intent(out) :: jacobian(n, m)
        integer(c_int) :: status
        integer(c_int), pointer :: calls(:)

        if (c_associated(user_data)) then
            call c_f_pointer(user_data, calls, [EXPERIMENTS])
            calls(experiment + 1) = calls(experiment + 1) + 1
        end if
        r = p(1)
        jacobian = 0
        status = 3
    end function failing

    ! The model's Jacobian over every experiment at `p`: row k = d r_k / d (a, b).
    function model_jacobian(p) result(jacobian)
        real(c_double), intent(in) :: p(2)
        real(c_double) :: jacobian(EXPERIMENTS * POINTS, 2)
        real(c_double) :: x
        integer :: e, i, k

        k = 0
        do e = 0, EXPERIMENTS - 1
            do i = 0, POINTS - 1
                k = k + 1
                x = e + 0.25_c_double * i
                jacobian(k, 1) = exp(p(2) * x)
                jacobian(k, 2) = p(1) * x * exp(p(2) * x)
            end do
        end do
    end function model_jacobian

end module test_fit_model

program test_fit
    use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double, c_ptr, c_null_ptr, &
                                           c_null_funptr, c_associated, c_loc, c_funloc
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_positive_inf, ieee_is_finite
    use tutti
    use checks
    use test_fit_model
    implicit none

    call run_checks()
    call bound_and_rank_checks()
    call check_summary()

contains

    subroutine run_checks()
        integer(c_int), parameter :: counts(EXPERIMENTS) = POINTS
        real(c_double), parameter :: initial(2) = [1.0_c_double, 0.0_c_double]
        type(tutti_fit_options_t), target :: options, refused
        type(tutti_fit_result_t) :: result
        real(c_double), allocatable :: parameters(:), covariance(:, :)
        real(c_double) :: first(2), normal(2, 2), inverse(2, 2), jacobian(20, 2), condition
        real(c_double) :: raw_parameters(2)
        integer(c_int), target :: calls(EXPERIMENTS), unknown(1)
        integer(c_int) :: status, devices, gpus

        call tutti_fit_options_default_f(options)
        call check(options%resources%kind == TUTTI_KIND_AUTO &
                   .and. options%resources%devices == TUTTI_ALL_DEVICES &
                   .and. .not. c_associated(options%resources%ordinals) &
                   .and. options%max_iterations == 200 &
                   .and. options%gradient_tolerance == 1e-10_c_double &
                   .and. options%step_tolerance == 1e-12_c_double &
                   .and. options%cost_tolerance == 1e-14_c_double, &
                   'defaults: every device of the default kind, 200 iterations, 1e-10/12/14')

        first = 0
        do devices = 1, 4
            options%resources%kind = TUTTI_KIND_CPU
            options%resources%devices = devices
            calls = 0
            call tutti_fit_f(exponential, counts, initial, parameters, result, covariance, &
                             options, c_loc(calls), status)
            call check(status == TUTTI_OK, 'tutti_fit_f on ' // itoa(devices) &
                       // ' device(s): ' // tutti_status_name_f(status) // ' ' &
                       // tutti_last_error_f())
            if (status /= TUTTI_OK) cycle
            call check(abs(parameters(1) - 2) < 1e-10_c_double &
                       .and. abs(parameters(2) + 0.5_c_double) < 1e-10_c_double, &
                       'recovers (a, b) = (' // etoa(parameters(1), 13) // ', ' &
                       // etoa(parameters(2), 13) // '), exact (2, -0.5), to 1e-10')
            call check(result%converged == 1 .and. result%cost < 1e-20_c_double &
                       .and. result%iterations > 0, 'converged in ' // itoa(result%iterations) &
                       // ' iterations, cost ' // etoa(result%cost))
            call check(all(calls >= result%evaluations) .and. result%evaluations > 0, &
                       'the callback ran for every experiment of the ' &
                       // itoa(result%evaluations) // ' evaluations (calls ' &
                       // itoa(calls(1)) // ', ' // itoa(calls(2)) // ', ' // itoa(calls(3)) &
                       // ', ' // itoa(calls(4)) // ')')

            ! The covariance against (J^T J)^-1 formed here.
            jacobian = model_jacobian(parameters)
            normal = matmul(transpose(jacobian), jacobian)
            inverse = reshape([normal(2, 2), -normal(2, 1), -normal(1, 2), normal(1, 1)], &
                              [2, 2]) / (normal(1, 1) * normal(2, 2) - normal(1, 2) * normal(2, 1))
            condition = norm2(normal) * norm2(inverse)
            call check(all(shape(covariance) == [2, 2]) .and. covariance(1, 2) == covariance(2, 1) &
                       .and. covariance(1, 1) > 0 .and. covariance(2, 2) > 0, &
                       'the covariance is 2 x 2, symmetric, with a positive diagonal')
            call check(maxval(abs(covariance - inverse)) <= 1e-12_c_double * maxval(abs(inverse)), &
                       'the covariance is (J^T J)^-1 formed here to ' &
                       // etoa(maxval(abs(covariance - inverse)) / maxval(abs(inverse))) &
                       // ' relative (<= 1e-12; cond(J^T J) ' // etoa(condition) // ')')
            if (devices == 1) then
                first = parameters
            else
                call check(all(transfer(parameters, 0_c_int64_t, 2) &
                               == transfer(first, 0_c_int64_t, 2)), &
                           itoa(devices) // ' devices give the same bits as 1')
            end if
        end do

        ! A callback that fails at the starting point: TUTTI_ERROR_CALLBACK, no outputs.
        call tutti_fit_f(failing, counts, initial, parameters, status=status)
        call check(status == TUTTI_ERROR_CALLBACK &
                   .and. index(tutti_last_error_f(), 'returned 3') > 0, &
                   'a failing callback is TUTTI_ERROR_CALLBACK: "' // tutti_last_error_f() // '"')
        call check(.not. allocated(parameters), 'the parameters stay unallocated on failure')

        ! The raw interface, with a NULL callback.
        raw_parameters = -1
        status = tutti_fit(c_null_funptr, c_null_ptr, EXPERIMENTS, counts, 2_c_int, initial, &
                           c_null_ptr, raw_parameters, c_null_ptr, result)
        call check(status == TUTTI_ERROR_NULL_POINTER &
                   .and. index(tutti_last_error_f(), 'residual_fn') > 0, &
                   'the raw tutti_fit with a NULL callback: "' // tutti_last_error_f() // '"')
        ! ... and with a bind(C) module procedure and the default options.
        status = tutti_fit(c_funloc(exponential), c_null_ptr, EXPERIMENTS, counts, 2_c_int, &
                           initial, c_null_ptr, raw_parameters, c_null_ptr, result)
        call check(status == TUTTI_OK .and. all(abs(raw_parameters &
                   - [2.0_c_double, -0.5_c_double]) < 1e-10_c_double), &
                   'the raw tutti_fit with c_funloc and NULL options')

        ! Where it runs: every field of TuttiResources reaches tutti at its place.
        call tutti_fit_options_default_f(refused)
        refused%resources%kind = TUTTI_KIND_CPU
        refused%resources%devices = 0
        call tutti_fit_f(exponential, counts, initial, parameters, options=refused, &
                         status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'resources.devices') > 0, &
                   'zero devices: "' // tutti_last_error_f() // '"')
        unknown = 100000
        refused%resources%devices = TUTTI_ALL_DEVICES
        refused%resources%ordinals = c_loc(unknown)
        refused%resources%ordinal_count = 1
        call tutti_fit_f(exponential, counts, initial, parameters, options=refused, &
                         status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), '100000') > 0, &
                   'an unknown ordinal: "' // tutti_last_error_f() // '"')
        call tutti_fit_options_default_f(refused)
        refused%resources%kind = TUTTI_KIND_CPU
        refused%resources%devices = 2
        refused%resources%device_memory_bytes = 256
        calls = 0
        call tutti_fit_f(exponential, counts, initial, parameters, options=refused, &
                         user_data=c_loc(calls), status=status)
        call check(status == TUTTI_ERROR_OUT_OF_MEMORY .and. all(calls == 0) &
                   .and. index(tutti_last_error_f(), 'contributions') > 0, &
                   'a 256-byte device cap is refused before any evaluation: "' &
                   // tutti_last_error_f() // '"')
        gpus = 0
        call tutti_device_count_f(TUTTI_KIND_GPU, gpus, status)
        if (status /= TUTTI_OK .or. gpus == 0) then
            call tutti_fit_options_default_f(refused)
            refused%resources%kind = TUTTI_KIND_GPU
            call tutti_fit_f(exponential, counts, initial, parameters, options=refused, &
                             status=status)
            call check(status == TUTTI_ERROR_UNSUPPORTED .or. status == TUTTI_ERROR_DEVICE, &
                       'a GPU request without a GPU: "' // tutti_last_error_f() // '"')
        end if
        call check(.not. allocated(parameters), 'no parameters after the refusals')
        if (allocated(covariance)) deallocate (covariance)
    end subroutine run_checks

    subroutine bound_and_rank_checks()
        integer(c_int), parameter :: counts(EXPERIMENTS) = POINTS
        real(c_double), parameter :: initial(2) = [1.0_c_double, 0.0_c_double]
        type(tutti_fit_options_t), target :: tight
        type(tutti_fit_result_t) :: result
        real(c_double), allocatable :: parameters(:), covariance(:, :), reduced(:)
        real(c_double), target :: held
        real(c_double) :: inf, upper(2), lower(2), start(2), b_error
        integer(c_int) :: status
        integer :: bounded_case

        inf = ieee_value(inf, ieee_positive_inf)
        call tutti_fit_options_default_f(tight)
        call check(.not. c_associated(tight%lower) .and. .not. c_associated(tight%upper), &
                   'defaults: no bounds')
        tight%resources%kind = TUTTI_KIND_CPU
        tight%resources%devices = 1
        tight%cost_tolerance = 1e-300_c_double

        ! The reference: b fitted alone with a held at 1.5.
        held = 1.5_c_double
        call tutti_fit_f(exponential_b, counts, [0.0_c_double], reduced, result, &
                         options=tight, user_data=c_loc(held), status=status)
        call check(status == TUTTI_OK .and. result%covariance_rank == 1, &
                   'the reduced fit (a held at 1.5): ' // tutti_last_error_f())
        if (status /= TUTTI_OK) return

        do bounded_case = 1, 2
            upper = [1.5_c_double, inf]
            if (bounded_case == 1) then
                ! a <= 1.5, no lower bounds.
                call tutti_fit_f(exponential, counts, initial, parameters, result, &
                                 covariance, tight, upper=upper, status=status)
            else
                ! a fixed at 1.5 by equal bounds.
                lower = [1.5_c_double, -inf]
                start = [1.5_c_double, 0.0_c_double]
                call tutti_fit_f(exponential, counts, start, parameters, result, &
                                 covariance, tight, lower=lower, upper=upper, status=status)
            end if
            call check(status == TUTTI_OK, 'bounded fit ' // itoa(bounded_case) // ': ' &
                       // tutti_status_name_f(status) // ' ' // tutti_last_error_f())
            if (status /= TUTTI_OK) cycle
            b_error = abs(parameters(2) - reduced(1))
            call check(parameters(1) == 1.5_c_double, 'bounded fit ' // itoa(bounded_case) &
                       // ': a = ' // etoa(parameters(1), 16) // ', exactly its bound')
            call check(b_error <= 2e-8_c_double * abs(reduced(1)), 'bounded fit ' &
                       // itoa(bounded_case) // ': b = ' // etoa(parameters(2), 15) &
                       // ', the reduced fit''s ' // etoa(reduced(1), 15) // ' (' &
                       // etoa(b_error) // ' apart, <= 2e-8 relative)')
            call check(result%converged == 1 .and. result%covariance_rank == 2 &
                       .and. all(shape(covariance) == [2, 2]) .and. result%cost > 0.3_c_double, &
                       'bounded fit ' // itoa(bounded_case) // ': converged (termination ' &
                       // itoa(result%termination) // '), cost ' // etoa(result%cost) &
                       // ', covariance rank ' // itoa(result%covariance_rank))
        end do

        ! Crossed bounds: TUTTI_ERROR_INVALID_ARGUMENT naming the entry (0-based, as in C).
        call tutti_fit_f(exponential, counts, initial, parameters, lower=[0.0_c_double, 1.0_c_double], &
                         upper=[5.0_c_double, -1.0_c_double], status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'options->lower[1] is 1') > 0 &
                   .and. .not. allocated(parameters), &
                   'crossed bounds: "' // tutti_last_error_f() // '"')
        call tutti_fit_f(exponential, counts, initial, parameters, upper=[0.5_c_double, inf], &
                         status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'initial[0]') > 0, &
                   'a start outside the bounds: "' // tutti_last_error_f() // '"')

        ! A rank-deficient J^T J: parameters, rank 1 and the pseudo-inverse, not an error.
        call tutti_fit_f(sum_only, [5_c_int], initial, parameters, result, covariance, &
                         status=status)
        call check(status == TUTTI_OK, 'the rank-deficient fit: ' // tutti_status_name_f(status) &
                   // ' ' // tutti_last_error_f())
        if (status == TUTTI_OK) then
            call check(all(ieee_is_finite(parameters)) &
                       .and. abs(sum(parameters) - 3) < 1e-10_c_double, &
                       'finite parameters (' // etoa(parameters(1), 15) // ', ' &
                       // etoa(parameters(2), 15) // ') whose sum is 3')
            call check(result%covariance_rank == 1, 'covariance rank ' &
                       // itoa(result%covariance_rank) // ', n - 1 = 1')
            call check(maxval(abs(covariance * 220 - 1)) < 1e-12_c_double, &
                       'the covariance is the pseudo-inverse, every entry 1/220 (' &
                       // etoa(maxval(abs(covariance * 220 - 1))) // ' off)')
        end if

        ! Why it stopped.
        tight%max_iterations = 1
        call tutti_fit_f(exponential, counts, initial, parameters, result, options=tight, &
                         status=status)
        call check(status == TUTTI_OK .and. result%converged == 0 &
                   .and. result%termination == TUTTI_TERMINATION_MAX_ITERATIONS, &
                   'one iteration: TUTTI_TERMINATION_MAX_ITERATIONS (termination ' &
                   // itoa(result%termination) // ')')
    end subroutine bound_and_rank_checks

end program test_fit
