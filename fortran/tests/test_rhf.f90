! tutti_rhf_energy and tutti_rhf_energy_bohr from Fortran (the twin of
! ffi-tests/c/test_adjoint.c, sto-3g only: this runs under valgrind).
!
! Reference: PySCF 2.14.0, conv_tol 1e-12, water with r(OH) = 0.9572 A and angle 104.52 deg
! (crates/tutti-adjoint/tests/data/h2o_sto3g.json: "e_rhf", and the nuclear repulsion),
! PySCF's built-in sto-3g, which this test writes to an NWChem file so that tutti uses the
! same digits. Checks and tolerances:
! - E within 1e-8 Eh of PySCF, as the C test: both SCFs converge far below that (tutti's
!   energy change < 1e-10 Eh, the energy error being second order in the density's), so
!   what remains is integral accuracy, well under 1e-8 Eh;
! - E_nuc within 1e-10 Eh of PySCF's (a closed formula, the same coordinates), and
!   E = E_el + E_nuc to 1e-10;
! - 2 devices agree with 1 to 1e-12 relative (the same SCF, sums in another order);
! - the same molecule from atomic numbers and bohr coordinates gives the same energy to
!   1e-10 Eh (coordinates equal to ~1e-16 relative after the Angstrom conversion);
! - the shipped sto-3g by name: within 1e-6 Eh of PySCF's (its digits differ slightly);
! - the JSON summary names nao and devices, and is released;
! - options%matrices_out: 7 AOs and MOs, 5 occupied, ascending orbital energies, and
!   P = 2 C_occ C_occ^T to 1e-12 (the same products summed in another order); released;
! - the error paths: an unknown basis, a missing basis file, an SCF of 2 iterations, a
!   1 KiB device cap; the result stays untouched.
! Stops with a non-zero exit code when a check fails.
program test_rhf
    use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double, c_loc, c_null_ptr, &
                                           c_f_pointer, c_associated
    use tutti
    use checks
    implicit none

    real(c_double), parameter :: PYSCF_H2O_STO3G = -74.96292824643292_c_double
    real(c_double), parameter :: PYSCF_H2O_NUCLEAR = 9.194964854506077_c_double
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
        type(tutti_rhf_options_t) :: options
        type(tutti_rhf_result_t) :: one, two, shipped, from_bohr, untouched
        character(len=:), allocatable :: basis_path, json
        integer(c_int), parameter :: numbers(3) = [8, 1, 1]
        real(c_double), parameter :: bohr(3, 3) = reshape([ &
            0.0_c_double, 0.0_c_double, 0.0_c_double, &
            0.0_c_double, 1.4304288084282137_c_double, 1.107157044045246_c_double, &
            0.0_c_double, -1.4304288084282137_c_double, 1.107157044045246_c_double], [3, 3])
        integer(c_int) :: status
        type(tutti_rhf_matrices_t), target :: matrices
        real(c_double), pointer :: energies(:), coefficients(:, :), density(:, :)

        basis_path = write_basis_file('sto3g')

        call tutti_rhf_options_default_f(options)
        call check(options%resources%kind == TUTTI_KIND_AUTO &
                   .and. options%resources%devices == TUTTI_ALL_DEVICES &
                   .and. options%charge == 0 .and. options%cartesian == 0 &
                   .and. options%max_iterations == 128 &
                   .and. options%energy_tolerance == 1e-10_c_double &
                   .and. options%density_tolerance == 1e-8_c_double, &
                   'defaults: the default resources, neutral, spherical, 128 iterations, ' &
                   // '1e-10 Eh, 1e-8')

        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 1
        call tutti_rhf_energy_f(WATER_XYZ, basis_path, one, options, status=status)
        call check(status == TUTTI_OK, 'h2o/sto-3g on 1 device: ' // tutti_last_error_f())
        call check(abs(one%energy - PYSCF_H2O_STO3G) < 1e-8_c_double, 'E = ' &
                   // etoa(one%energy, 13) // ' Eh, PySCF ' // etoa(PYSCF_H2O_STO3G, 13) &
                   // ', |diff| ' // etoa(abs(one%energy - PYSCF_H2O_STO3G)) // ' < 1e-8')
        call check(one%nao == 7 .and. one%electrons == 10 .and. one%converged == 1 &
                   .and. one%iterations > 1, '7 AOs, 10 electrons, converged in ' &
                   // itoa(one%iterations) // ' iterations')
        call check(abs(one%electronic_energy + one%nuclear_repulsion - one%energy) &
                   < 1e-10_c_double .and. abs(one%nuclear_repulsion - PYSCF_H2O_NUCLEAR) &
                   < 1e-10_c_double, 'E = E_el + E_nuc, E_nuc = ' &
                   // etoa(one%nuclear_repulsion, 13) // ' Eh (PySCF 9.194964854506)')

        options%resources%devices = 2
        call tutti_rhf_energy_f(WATER_XYZ, basis_path, two, options, json, status)
        call check(status == TUTTI_OK .and. allocated(json), 'on 2 devices, with the JSON')
        call check(abs((two%energy - one%energy) / one%energy) <= 1e-12_c_double, &
                   '2 devices agree with 1 to ' // etoa(abs((two%energy - one%energy) &
                   / one%energy)) // ' relative (<= 1e-12)')
        if (allocated(json)) then
            call check(json(1:1) == '{' .and. index(json, '"energy":') > 0 &
                       .and. index(json, '"nao":7') > 0 .and. index(json, '"devices":2') > 0, &
                       'the JSON summary has energy, nao 7, devices 2')
        end if

        ! The orbitals and density through options%matrices_out: P = 2 C_occ C_occ^T,
        ! released with tutti_rhf_matrices_free_f (valgrind checks that nothing leaks).
        options%matrices_out = c_loc(matrices)
        call tutti_rhf_energy_f(WATER_XYZ, basis_path, two, options, status=status)
        options%matrices_out = c_null_ptr
        call check(status == TUTTI_OK .and. matrices%nao == 7 .and. matrices%nmo == 7 &
                   .and. matrices%occupied == 5, 'matrices_out: 7 AOs, 7 MOs, 5 occupied')
        if (status == TUTTI_OK) then
            call c_f_pointer(matrices%orbital_energies, energies, [7])
            call c_f_pointer(matrices%coefficients, coefficients, [7, 7])
            call c_f_pointer(matrices%density, density, [7, 7])
            ! C's row-major arrays read in Fortran order are the transposes: coefficients(i, mu)
            ! is AO mu of MO i.
            call check(all(energies(2:7) >= energies(1:6)) .and. maxval(abs(density &
                       - 2 * matmul(transpose(coefficients(1:5, :)), coefficients(1:5, :)))) &
                       < 1e-12_c_double, 'orbital energies ascending, P = 2 C_occ C_occ^T ' &
                       // 'to 1e-12')
            call tutti_rhf_matrices_free_f(matrices)
            call check(.not. c_associated(matrices%density) .and. matrices%nao == 0, &
                       'tutti_rhf_matrices_free_f releases and resets')
        end if

        ! The same water from atomic numbers and bohr coordinates (atom i at bohr(:, i)).
        options%resources%devices = 1
        call tutti_rhf_energy_bohr_f(numbers, bohr, basis_path, from_bohr, options, &
                                     status=status)
        call check(status == TUTTI_OK .and. abs(from_bohr%energy - one%energy) < 1e-10_c_double, &
                   'tutti_rhf_energy_bohr_f gives the same energy (' &
                   // etoa(abs(from_bohr%energy - one%energy)) // ')')

        ! The shipped sto-3g, by name with the default options.
        call tutti_rhf_energy_f(WATER_XYZ, 'STO-3G', shipped, status=status)
        call check(status == TUTTI_OK .and. abs(shipped%energy - PYSCF_H2O_STO3G) &
                   < 1e-6_c_double, 'the shipped sto-3g by name, options absent: ' &
                   // etoa(abs(shipped%energy - PYSCF_H2O_STO3G)) // ' from PySCF''s digits')

        ! Errors: a status, a message, the result untouched.
        untouched%energy = 42
        if (allocated(json)) deallocate (json)
        call tutti_rhf_energy_f(WATER_XYZ, 'no-such-basis', untouched, json=json, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. allocated(json) &
                   .and. index(tutti_last_error_f(), &
                               'tutti_rhf_energy: unknown basis set `no-such-basis`') > 0, &
                   'an unknown basis: "' // tutti_last_error_f() // '"')
        call tutti_rhf_energy_f(WATER_XYZ, '/nonexistent/basis.nw', untouched, status=status)
        call check(status == TUTTI_ERROR_IO &
                   .and. index(tutti_last_error_f(), '/nonexistent/basis.nw') > 0, &
                   'a missing basis file: "' // tutti_last_error_f() // '"')
        call tutti_rhf_options_default_f(options)
        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 1
        options%max_iterations = 2
        call tutti_rhf_energy_f(WATER_XYZ, 'sto-3g', untouched, options, status=status)
        call check(status == TUTTI_ERROR_NOT_CONVERGED &
                   .and. index(tutti_last_error_f(), 'did not converge in 2 iterations') > 0, &
                   '2 iterations: "' // tutti_last_error_f() // '"')
        options%max_iterations = 128
        options%resources%devices = 2
        options%resources%device_memory_bytes = 1024_c_int64_t
        call tutti_rhf_energy_f(WATER_XYZ, 'sto-3g', untouched, options, status=status)
        call check(status == TUTTI_ERROR_OUT_OF_MEMORY &
                   .and. index(tutti_last_error_f(), 'memory plan') > 0, &
                   'a 1 KiB device cap: "' // tutti_last_error_f() // '"')
        call check(untouched%energy == 42, 'the result is untouched after every failure')

        call delete_file(basis_path)
    end subroutine run_checks

end program test_rhf
