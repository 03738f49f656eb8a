! tutti_fmm and tutti_direct_sum from Fortran (the twin of ffi-tests/c/test_fmm.c, with
! fewer bodies: this runs under valgrind).
!
! 400 bodies from a fixed Park-Miller generator fill the unit cube, with strengths in
! [0.5, 1.5), a fifth of them negative, as a (3, n) array. Checks and tolerances:
! - tutti_direct_sum_f against the direct sum written here, with and without softening:
!   relative L2 1e-13 (the same sums in another order: about n * 1e-16 at worst);
! - tutti_fmm_f against tutti_direct_sum_f: relative L2 1e-4 on accelerations and
!   potentials at the default order 7 and theta 0.5, the accuracy docs/fmm.md documents for
!   the defaults; with leaf size 16 (not the default 64) so that these few bodies still make
!   a tree whose far field matters, which order 2 shows: its error must be at least 10
!   times that of order 7 (the far field's error falls roughly like theta^p);
! - 1 and 2 devices give the same bits; options absent are the defaults; a missing output
!   is not computed; zero bodies are fine;
! - tutti_fmm_order_for_accuracy_f: an order in 1..12 whose measured error is within the
!   request; a request below the best measured error is refused;
! - the error paths: a NaN position, coincident bodies, order 13, zero devices, a 16 KiB
!   device cap (each field of the options reaches tutti at its place).
! - tutti_fmm_targets_f at 11 separate targets (one at a body) against a direct sum written
!   here, 1e-4 as for the bodies; a NaN target is refused;
! - a progress callback (options%progress) receives the five phases in order, on 2 devices,
!   and changes no bit of the result.
! Stops with a non-zero exit code when a check fails.
module test_fmm_progress
    use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_f_pointer
    use tutti, only: tutti_progress_t, tutti_string
    implicit none
    private
    public :: count_phases

contains

    ! The progress callback: user_data points to an integer(c_int) count of the reports so
    ! far; a report that is not the next phase sets the count to -1000.
    recursive subroutine count_phases(user_data, progress) bind(c)
        type(c_ptr), value :: user_data
        type(tutti_progress_t), intent(in) :: progress
        character(len=10), parameter :: phases(5) = [character(len=10) :: 'tree', 'upward', &
                                                     'far field', 'near field', 'gather']
        integer(c_int), pointer :: seen

        call c_f_pointer(user_data, seen)
        seen = seen + 1
        if (seen < 1 .or. seen > 5) then
            seen = -1000
        else if (tutti_string(progress%task) /= 'fmm' &
                 .or. tutti_string(progress%stage) /= trim(phases(seen)) &
                 .or. progress%done /= seen .or. progress%total /= 5 &
                 .or. progress%has_value /= 0) then
            seen = -1000
        end if
    end subroutine count_phases
end module test_fmm_progress

program test_fmm
    use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double, c_loc, c_funloc, &
                                           c_associated
    use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
    use tutti
    use checks
    use test_fmm_progress, only: count_phases
    implicit none

    integer, parameter :: N = 400

    call run_checks()
    call check_summary()

contains

    subroutine run_checks()
        real(c_double) :: positions(3, N), masses(N), phi_here(N), acc_here(3, N)
        real(c_double) :: moved(3, N), empty_positions(3, 0), empty_masses(0)
        real(c_double), allocatable :: phi(:), acc(:, :), phi2(:), acc2(:, :)
        real(c_double), allocatable :: phi_direct(:), acc_direct(:, :)
        real(c_double) :: accel_error, potential_error, low_order_error, measured
        type(tutti_fmm_options_t) :: options, bad
        integer(c_int) :: status, order
        integer(c_int), target :: reports
        real(c_double) :: targets(3, 11), phi_t(11), acc_t(3, 11)
        integer :: i, seed

        seed = 2026
        do i = 1, N
            positions(1, i) = uniform(seed)
            positions(2, i) = uniform(seed)
            positions(3, i) = uniform(seed)
        end do
        do i = 1, N
            masses(i) = 0.5_c_double + uniform(seed)
            if (mod(i - 1, 5) == 0) masses(i) = -masses(i)
        end do

        ! The direct sum: tutti's against this file's, plain and softened.
        call direct_sum_here(positions, masses, 0.0_c_double, phi_here, acc_here)
        call tutti_direct_sum_f(positions, masses, 0.0_c_double, phi_direct, acc_direct)
        call check(relative_l2(pack(acc_direct, .true.), pack(acc_here, .true.)) < 1e-13_c_double &
                   .and. relative_l2(phi_direct, phi_here) < 1e-13_c_double, &
                   'tutti_direct_sum_f agrees with the sum written here to 1e-13 (accel ' &
                   // etoa(relative_l2(pack(acc_direct, .true.), pack(acc_here, .true.))) // ')')
        call direct_sum_here(positions, masses, 0.05_c_double, phi_here, acc_here)
        call tutti_direct_sum_f(positions, masses, 0.05_c_double, phi2, acc2)
        call check(relative_l2(pack(acc2, .true.), pack(acc_here, .true.)) < 1e-13_c_double &
                   .and. relative_l2(phi2, phi_here) < 1e-13_c_double, &
                   'and with softening 0.05 (accel ' &
                   // etoa(relative_l2(pack(acc2, .true.), pack(acc_here, .true.))) // ')')

        call tutti_fmm_options_default_f(options)
        call check(options%order == 7 .and. options%theta == 0.5_c_double &
                   .and. options%leaf_size == 64 .and. options%softening == 0 &
                   .and. options%f32_far_field == 0 &
                   .and. options%resources%kind == TUTTI_KIND_AUTO &
                   .and. options%resources%devices == TUTTI_ALL_DEVICES &
                   .and. options%resources%device_memory_bytes == 0 &
                   .and. options%kernels == TUTTI_KERNELS_AUTO &
                   .and. options%fused_multiply_add == 1, &
                   'defaults: order 7, theta 0.5, leaf size 64, no softening, f64, AUTO, all, ' &
                   // 'kernels AUTO with FMA')

        ! The FMM against the direct sum.
        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 1
        options%leaf_size = 16
        call tutti_fmm_f(positions, masses, phi, acc, options, status)
        call check(status == TUTTI_OK, 'tutti_fmm_f on 1 device: ' // tutti_last_error_f())
        accel_error = relative_l2(pack(acc, .true.), pack(acc_direct, .true.))
        potential_error = relative_l2(phi, phi_direct)
        call check(accel_error <= 1e-4_c_double, 'accelerations within 1e-4 of the direct ' &
                   // 'sum (relative L2 ' // etoa(accel_error) // ')')
        call check(potential_error <= 1e-4_c_double, 'potentials within 1e-4 of the direct ' &
                   // 'sum (relative L2 ' // etoa(potential_error) // ')')
        options%order = 2
        call tutti_fmm_f(positions, masses, accel=acc2, options=options)
        low_order_error = relative_l2(pack(acc2, .true.), pack(acc_direct, .true.))
        call check(low_order_error >= 10 * accel_error, 'order 2 is less accurate (' &
                   // etoa(low_order_error) // '): the far field is in use')
        options%order = 7

        options%resources%devices = 2
        call tutti_fmm_f(positions, masses, phi2, acc2, options, status)
        call check(status == TUTTI_OK .and. all(phi2 == phi) .and. all(acc2 == acc), &
                   '2 devices give the same bits as 1')

        ! Separate targets: the first 10 bodies, moved by a quarter of the box, and body 1
        ! itself, against the direct sum written here (which leaves a coincident source out).
        targets(:, 1:10) = positions(:, 1:10) + 0.25_c_double
        targets(:, 11) = positions(:, 1)
        call tutti_fmm_targets_f(positions, masses, targets, phi2, acc2, options, status)
        call check(status == TUTTI_OK .and. size(phi2) == 11 .and. size(acc2, 2) == 11, &
                   'tutti_fmm_targets_f at 11 targets: ' // tutti_last_error_f())
        call direct_at_targets_here(positions, masses, targets, phi_t, acc_t)
        call check(relative_l2(pack(acc2, .true.), pack(acc_t, .true.)) <= 1e-4_c_double &
                   .and. relative_l2(phi2, phi_t) <= 1e-4_c_double, 'the fields at targets ' &
                   // 'are within 1e-4 of the direct sum (accel ' &
                   // etoa(relative_l2(pack(acc2, .true.), pack(acc_t, .true.))) // ')')
        targets(2, 4) = ieee_value(targets(2, 4), ieee_quiet_nan)
        call tutti_fmm_targets_f(positions, masses, targets, phi2, options=options, &
                                 status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'target') > 0, &
                   'a NaN target is refused: "' // tutti_last_error_f() // '"')

        ! Progress: the five phases in order, and the same bits.
        call check(.not. c_associated(options%progress%user_data), 'no progress by default')
        reports = 0
        options%progress%report = c_funloc(count_phases)
        options%progress%user_data = c_loc(reports)
        call tutti_fmm_f(positions, masses, phi2, acc2, options, status)
        call check(status == TUTTI_OK .and. reports == 5, 'the progress callback got the ' &
                   // 'five phases in order (' // itoa(reports) // ' reports)')
        call check(all(phi2 == phi) .and. all(acc2 == acc), 'reporting changes no bit')
        options%progress = tutti_progress_callback_t()

        ! The order for an accuracy, from tutti's committed measurements.
        call tutti_fmm_order_for_accuracy_f(1e-4_c_double, order, measured, status)
        call check(status == TUTTI_OK .and. order >= 1 .and. order <= 12 &
                   .and. measured > 0 .and. measured <= 1e-4_c_double, &
                   'order ' // itoa(order) // ' for 1e-4 (measured ' // etoa(measured) // ')')
        order = -1
        call tutti_fmm_order_for_accuracy_f(1e-12_c_double, order, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. order == -1, &
                   '1e-12 is below the best measured error: "' // tutti_last_error_f() // '"')

        ! Options absent are the defaults; only the wanted output is computed.
        call tutti_fmm_options_default_f(options)
        call tutti_fmm_f(positions, masses, phi, options=options)
        call tutti_fmm_f(positions, masses, phi2, acc2)
        call check(all(phi2 == phi) .and. allocated(acc2), 'options absent are the defaults')
        call tutti_fmm_f(positions, masses, potential=phi2)
        call check(all(phi2 == phi), 'a potential alone')
        call tutti_fmm_f(empty_positions, empty_masses, phi2, acc2, status=status)
        call check(status == TUTTI_OK .and. size(phi2) == 0 .and. size(acc2, 2) == 0, &
                   'zero bodies: TUTTI_OK, empty outputs')

        ! Errors: the outputs stay unallocated, the message names the culprit.
        moved = positions
        moved(3, 18) = ieee_value(moved(3, 18), ieee_quiet_nan)
        call tutti_fmm_f(moved, masses, phi2, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. allocated(phi2) &
                   .and. index(tutti_last_error_f(), 'body 17') > 0, &
                   'a NaN at body 17 (0-based): "' // tutti_last_error_f() // '"')
        moved = positions
        moved(:, 10) = moved(:, 5)
        call tutti_fmm_f(moved, masses, phi2, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. allocated(phi2) &
                   .and. index(tutti_last_error_f(), 'bodies 4 and 9') > 0, &
                   'coincident bodies: "' // tutti_last_error_f() // '"')
        bad = options
        bad%softening = 1e-3_c_double
        call tutti_fmm_f(moved, masses, phi2, options=bad, status=status)
        call check(status == TUTTI_OK, 'with softening they are fine')
        bad = options
        bad%order = 13
        call tutti_fmm_f(positions, masses, phi2, options=bad, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'order') > 0, &
                   'order 13: "' // tutti_last_error_f() // '"')
        bad = options
        bad%resources%devices = 0
        call tutti_fmm_f(positions, masses, phi2, options=bad, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'options->resources.devices is 0') > 0, &
                   'zero devices: "' // tutti_last_error_f() // '"')
        bad = options
        bad%resources%kind = TUTTI_KIND_CPU
        bad%resources%devices = 2
        bad%resources%device_memory_bytes = 16 * 1024_c_int64_t
        call tutti_fmm_f(positions, masses, phi2, options=bad, status=status)
        call check(status == TUTTI_ERROR_OUT_OF_MEMORY .and. .not. allocated(phi2) &
                   .and. index(tutti_last_error_f(), 'does not fit') > 0, &
                   'a 16 KiB device cap is refused up front: "' // tutti_last_error_f() // '"')
    end subroutine run_checks

    ! phi_i = -sum m_j / r_ij, a_i = -sum m_j (x_i - x_j) / r_ij^3 over j /= i, with
    ! r_ij^2 = |x_i - x_j|^2 + softening^2 (Plummer; G = 1).
    subroutine direct_sum_here(x, m, softening, phi, acc)
        real(c_double), intent(in) :: x(:, :), m(:), softening
        real(c_double), intent(out) :: phi(:), acc(:, :)
        real(c_double) :: d(3), r2, r
        integer :: i, j

        phi = 0
        acc = 0
        do i = 1, size(m)
            do j = 1, size(m)
                if (j == i) cycle
                d = x(:, i) - x(:, j)
                r2 = sum(d**2) + softening**2
                r = sqrt(r2)
                phi(i) = phi(i) - m(j) / r
                acc(:, i) = acc(:, i) - m(j) * d / (r2 * r)
            end do
        end do
    end subroutine direct_sum_here

    ! The field of the bodies (x, m) at each target t(:, i), leaving out a body at t(:, i).
    subroutine direct_at_targets_here(x, m, t, phi, acc)
        real(c_double), intent(in) :: x(:, :), m(:), t(:, :)
        real(c_double), intent(out) :: phi(:), acc(:, :)
        real(c_double) :: d(3), r2, inv
        integer :: i, j

        phi = 0
        acc = 0
        do i = 1, size(t, 2)
            do j = 1, size(m)
                d = t(:, i) - x(:, j)
                r2 = sum(d * d)
                if (r2 == 0) cycle
                inv = 1 / sqrt(r2)
                phi(i) = phi(i) - m(j) * inv
                acc(:, i) = acc(:, i) - m(j) * inv**3 * d
            end do
        end do
    end subroutine direct_at_targets_here

    ! A number in (0, 1) from the Park-Miller minimal standard generator (exact in integers).
    function uniform(state) result(value)
        integer, intent(inout) :: state
        real(c_double) :: value
        integer(c_int64_t) :: next

        next = mod(16807_c_int64_t * state, 2147483647_c_int64_t)
        state = int(next)
        value = real(next, c_double) / 2147483647.0_c_double
    end function uniform

end program test_fmm
