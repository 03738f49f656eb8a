! tutti_rhf_gradient from Fortran: the gradient of the RHF energy of water/sto-3g with
! respect to every exponent and contraction coefficient (the twin of
! ffi-tests/c/test_adjoint_gradient.c), through the wrapper and through the raw interface.
!
! Reference: crates/tutti-adjoint/tests/data/h2o_sto3g.json (PySCF 2.14.0, conv_tol 1e-12),
! water with r(OH) = 0.9572 A and angle 104.52 deg, PySCF's built-in sto-3g written to an
! NWChem file: "e_rhf", and "gradient.flat_richardson", central finite differences of the
! energy (exponent step 1e-4 relative, coefficient step 1e-5 absolute) with Richardson
! extrapolation. Checks and tolerances:
! - E within 1e-8 Eh of PySCF (as test_rhf.f90);
! - the layout: 5 shells (O s, O s, O p, H s, H s), 15 primitives, the file's digits;
! - all 30 derivatives within max(1e-6 |reference|, 1e-8) of the finite differences, the
!   C test's tolerance: the extrapolated differences carry truncation and SCF-noise errors
!   of about 1e-8 relative, the analytic gradient none;
! - sum_i c_i dE/dc_i = 0 per shell to 1e-8 (renormalization makes E invariant under
!   scaling a shell's coefficients: an exact identity, up to the SCF's convergence);
! - the raw call on 2 devices agrees with the wrapper on 1 to 1e-10 relative (1e-12 for
!   the energy), and tutti_rhf_gradient_free_f releases and resets the bind(C) struct;
! - the serial reference agrees with the split implementation to 1e-12;
! - the error paths: an unknown basis, an odd electron count, serial = 2.
! Stops with a non-zero exit code when a check fails.
program test_rhf_gradient
    use, intrinsic :: iso_c_binding, only: c_int, c_double, c_loc, c_null_ptr, c_associated, &
                                           c_f_pointer
    use tutti
    use checks
    implicit none

    real(c_double), parameter :: PYSCF_H2O_STO3G = -74.96292824643292_c_double
    ! Per atom (O, H, H), per shell (O: s, s, p from the SP shell; H: s): the three
    ! dE/dalpha_i, then the three dE/dc_i.
    real(c_double), parameter :: PYSCF_FD(30) = [ &
        -0.00454578252269413_c_double, 0.009360970764342292_c_double, &
        0.016171199121206816_c_double, 1.171628446764809_c_double, &
        0.25308802271695185_c_double, -0.7113737924650345_c_double, &
        -0.006927601369552419_c_double, -0.03787756122893911_c_double, &
        0.02833851474853007_c_double, -0.06869106930669962_c_double, &
        -0.033246210999019844_c_double, 0.009163384599257066_c_double, &
        -0.09035962881441541_c_double, 0.0892641506233285_c_double, &
        1.1930220281643462_c_double, -1.771296897364512_c_double, &
        0.7778341914862114_c_double, -0.5013380977914039_c_double, &
        0.0001222605181735594_c_double, -0.006504721318924833_c_double, &
        -0.050006811009561676_c_double, 0.01670402625109091_c_double, &
        -0.005959731671130914_c_double, 0.0013775325176842062_c_double, &
        0.00012226035567690613_c_double, -0.0065047212430016516_c_double, &
        -0.050006811009561676_c_double, 0.016704025303700593_c_double, &
        -0.005959733092216386_c_double, 0.0013775296755132631_c_double]
    character(len=1), parameter :: NL = new_line('a')
    character(len=*), parameter :: WATER_XYZ = '3' // NL &
        // 'water, r(OH) = 0.9572 A, angle 104.52 deg' // NL &
        // 'O   0.0   0.0                  0.0' // NL &
        // 'H   0.0   0.7569503272636612   0.585882276618295' // NL &
        // 'H   0.0  -0.7569503272636612   0.585882276618295' // NL

    call run_checks()
    call check_summary()

contains

    subroutine run_checks()
        type(tutti_gradient_options_t), target :: options
        type(tutti_gradient_t) :: one, serial, untouched
        type(tutti_rhf_gradient_t) :: raw
        type(tutti_gradient_shell_t), pointer :: raw_shells(:)
        real(c_double), pointer :: raw_grad_exponents(:), raw_grad_coefficients(:)
        real(c_double) :: flat(30), other(30), allowed, worst, invariance
        character(len=:), allocatable :: basis_path, json
        integer(c_int), parameter :: layout(4, 5) = reshape([0, 0, 3, 0, 0, 0, 3, 3, &
                                                             0, 1, 3, 6, 1, 0, 3, 9, &
                                                             2, 0, 3, 12], [4, 5])
        integer(c_int) :: status
        integer :: k, s, within
        logical :: layout_ok

        basis_path = write_basis_file('grad-sto3g')

        call tutti_gradient_options_default_f(options)
        call check(options%rhf%resources%kind == TUTTI_KIND_AUTO &
                   .and. options%rhf%resources%devices == TUTTI_ALL_DEVICES &
                   .and. options%rhf%max_iterations == 128 .and. options%rhf%cartesian == 0 &
                   .and. options%rhf%density_tolerance == 1e-9_c_double &
                   .and. options%serial == 0, &
                   'defaults: the RHF ones with density tolerance 1e-9, split')

        ! The wrapper on 1 simulated device, with the JSON.
        options%rhf%resources%kind = TUTTI_KIND_CPU
        options%rhf%resources%devices = 1
        call tutti_rhf_gradient_f(WATER_XYZ, basis_path, one, options, json, status)
        call check(status == TUTTI_OK .and. allocated(json), 'h2o/sto-3g gradient on 1 ' &
                   // 'device: ' // tutti_last_error_f())
        if (status /= TUTTI_OK) then
            call delete_file(basis_path)
            return
        end if
        call check(abs(one%energy - PYSCF_H2O_STO3G) < 1e-8_c_double, 'E = ' &
                   // etoa(one%energy, 13) // ' Eh, PySCF ' // etoa(PYSCF_H2O_STO3G, 13))
        layout_ok = size(one%shells) == 5 .and. size(one%exponents) == 15 &
                    .and. size(one%grad_coefficients) == 15 .and. one%devices == 1
        do s = 1, min(5, size(one%shells))
            layout_ok = layout_ok .and. one%shells(s)%atom == layout(1, s) &
                        .and. one%shells(s)%l == layout(2, s) &
                        .and. one%shells(s)%primitives == layout(3, s) &
                        .and. one%shells(s)%offset == layout(4, s)
        end do
        call check(layout_ok, '5 shells (atom, l, primitives, offset): O s, O s, O p, H s, ' &
                   // 'H s; 15 primitives; ' // itoa(one%iterations) // ' SCF iterations')
        call check(one%exponents(1) == 130.70932_c_double &
                   .and. one%coefficients(9) == 0.39195739_c_double &
                   .and. one%exponents(15) == 0.1688554_c_double, &
                   'exponents and coefficients are the basis file''s digits')

        flat = in_reference_order(one%shells, one%grad_exponents, one%grad_coefficients)
        within = 0
        worst = 0
        do k = 1, 30
            allowed = max(1e-6_c_double * abs(PYSCF_FD(k)), 1e-8_c_double)
            if (abs(flat(k) - PYSCF_FD(k)) <= allowed) then
                within = within + 1
            else
                print '(a, i0, a, es20.12, a, es20.12)', '      parameter ', k, ': ', flat(k), &
                    ' vs PySCF FD ', PYSCF_FD(k)
            end if
            worst = max(worst, abs(flat(k) - PYSCF_FD(k)) / allowed)
        end do
        call check(within == 30, 'all 30 dE/dparameter match PySCF finite differences (rel ' &
                   // '1e-6, abs 1e-8; worst at ' // etoa(worst) // ' of the tolerance)')
        invariance = 0
        do s = 1, size(one%shells)
            associate (first => one%shells(s)%offset + 1, &
                       last => one%shells(s)%offset + one%shells(s)%primitives)
                invariance = max(invariance, abs(sum(one%coefficients(first:last) &
                                                     * one%grad_coefficients(first:last))))
            end associate
        end do
        call check(invariance < 1e-8_c_double, 'sum_i c_i dE/dc_i = 0 per shell (largest ' &
                   // etoa(invariance) // ')')
        call check(json(1:1) == '{' .and. index(json, '"grad_exponents"') > 0 &
                   .and. index(json, '"grad_coefficients"') > 0 &
                   .and. index(json, '"elements"') > 0, &
                   'the JSON has the basis shells with gradients and per-element sums')

        ! The raw interface on 2 devices: the caller owns the arrays of the bind(C) struct.
        options%rhf%resources%devices = 2
        status = tutti_rhf_gradient(to_c(WATER_XYZ), to_c(basis_path), c_loc(options), raw, &
                                    c_null_ptr)
        call check(status == TUTTI_OK .and. raw%n_shells == 5 .and. raw%n_primitives == 15 &
                   .and. raw%devices == 2, 'the raw tutti_rhf_gradient on 2 devices: ' &
                   // tutti_last_error_f())
        if (status == TUTTI_OK) then
            call c_f_pointer(raw%shells, raw_shells, [raw%n_shells])
            call c_f_pointer(raw%grad_exponents, raw_grad_exponents, [raw%n_primitives])
            call c_f_pointer(raw%grad_coefficients, raw_grad_coefficients, [raw%n_primitives])
            other = in_reference_order(raw_shells, raw_grad_exponents, raw_grad_coefficients)
            call check(abs((raw%energy - one%energy) / one%energy) <= 1e-12_c_double &
                       .and. max_relative_difference(other, flat) <= 1e-10_c_double, &
                       '2 devices agree with 1: gradient ' &
                       // etoa(max_relative_difference(other, flat)) // ' relative (<= 1e-10)')
        end if
        call tutti_rhf_gradient_free_f(raw, status)
        call check(status == TUTTI_OK .and. .not. c_associated(raw%shells) &
                   .and. .not. c_associated(raw%grad_exponents) .and. raw%n_primitives == 0, &
                   'tutti_rhf_gradient_free_f releases the arrays and resets the struct')
        call tutti_rhf_gradient_free_f(raw, status)
        call check(status == TUTTI_OK, 'a second release of the reset struct is a no-op')

        ! The serial reference from the same 1-device SCF.
        options%rhf%resources%devices = 1
        options%serial = 1
        call tutti_rhf_gradient_f(WATER_XYZ, basis_path, serial, options, status=status)
        other = in_reference_order(serial%shells, serial%grad_exponents, &
                                   serial%grad_coefficients)
        call check(status == TUTTI_OK .and. max_relative_difference(other, flat) &
                   <= 1e-12_c_double, 'serial agrees with split to ' &
                   // etoa(max_relative_difference(other, flat)) // ' relative (<= 1e-12)')
        call delete_file(basis_path)

        ! Errors: a status, a message naming the function, the output untouched.
        untouched%energy = 42
        call tutti_rhf_gradient_f(WATER_XYZ, 'no-such-basis', untouched, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. index(tutti_last_error_f(), &
                   'tutti_rhf_gradient: unknown basis set `no-such-basis`') > 0, &
                   'an unknown basis: "' // tutti_last_error_f() // '"')
        call tutti_rhf_gradient_f('1' // NL // NL // 'H 0 0 0' // NL, 'sto-3g', untouched, &
                                  status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'even') > 0, &
                   'an odd electron count: "' // tutti_last_error_f() // '"')
        call tutti_gradient_options_default_f(options)
        options%serial = 2
        call tutti_rhf_gradient_f(WATER_XYZ, 'sto-3g', untouched, options, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'options->serial') > 0, &
                   'serial = 2: "' // tutti_last_error_f() // '"')
        call check(untouched%energy == 42 .and. .not. allocated(untouched%shells), &
                   'the output is untouched after every failure')
    end subroutine run_checks

    ! The gradient in the reference's order: per shell, the exponents' derivatives, then the
    ! coefficients'.
    function in_reference_order(shells, grad_exponents, grad_coefficients) result(flat)
        type(tutti_gradient_shell_t), intent(in) :: shells(:)
        real(c_double), intent(in) :: grad_exponents(:), grad_coefficients(:)
        real(c_double) :: flat(30)
        integer :: s, count, first, last

        flat = huge(1.0_c_double)
        count = 0
        do s = 1, size(shells)
            first = shells(s)%offset + 1
            last = shells(s)%offset + shells(s)%primitives
            if (count + 2 * shells(s)%primitives > 30 .or. last > size(grad_exponents)) return
            flat(count + 1:count + shells(s)%primitives) = grad_exponents(first:last)
            count = count + shells(s)%primitives
            flat(count + 1:count + shells(s)%primitives) = grad_coefficients(first:last)
            count = count + shells(s)%primitives
        end do
    end function in_reference_order

    ! The largest |a - b| / max(|b|, 1).
    real(c_double) function max_relative_difference(a, b)
        real(c_double), intent(in) :: a(:), b(:)
        max_relative_difference = maxval(abs(a - b) / max(abs(b), 1.0_c_double))
    end function max_relative_difference

    ! A NUL-terminated copy, for the raw interfaces.
    function to_c(text) result(chars)
        character(len=*), intent(in) :: text
        character(len=:), allocatable :: chars
        chars = text // achar(0)
    end function to_c

end program test_rhf_gradient
