! Tensor trains and tutti_src from Fortran (the twin of ffi-tests/c/test_sweep.c).
!
! H (an MPO: 4 sites, d = 2, bond 3) and psi (an MPS, bond 2) are filled with the C test's
! fixed numbers, sin(0.37 * index + 1.3 * site + salt) by C-order index, from Fortran-order
! cores. This test computes every reference itself, densely: the 16-entry vector of an MPS
! and the 16 x 16 matrix of H, site by site. Checks and tolerances:
! - every core reads back bit for bit (the wrappers' transposition to C order and back);
! - SRC with chi = 8, above every exact bond of H psi (1, 2, 4, 2, 1), equals the dense
!   H psi to 1e-12 relative on 1 to 3 simulated devices, and in complex128 for a real H
!   and a complex psi: SRC is then exact, so only rounding of O(1) numbers over 4 sites
!   (about 1e-15) remains;
! - the same with distributed_qr on 2 devices, and the tutti_src_info_t it fills: 2 devices,
!   sketch width 4 (the largest bond the product can have), 3 QRs of which some distributed,
!   3 environments on the device tier, nothing spilled, the result's norm;
! - tutti_train_norm_f equals the dense norm, and tutti_train_distance_f equals exact
!   values: ||psi - 3 psi|| = 2 ||psi||, ||psi - psi|| = 0, and ||psi - psi_c|| from the
!   dense vectors (a real train against a complex one), all to 1e-12 relative;
! - a directory round trip gives distance 0 (to 1e-13 relative);
! - the error paths: a bond mismatch, an MPS in the middle of a stack, chi_out 0, options
!   absent (chi_out 0), a missing directory.
! Stops with a non-zero exit code when a check fails.
program test_sweep
    use, intrinsic :: iso_c_binding, only: c_int, c_int64_t, c_double, c_double_complex, &
                                           c_char, c_null_char, c_ptr, c_null_ptr, &
                                           c_associated, c_loc
    use tutti
    use checks
    implicit none

    integer, parameter :: SITES = 4, D = 2, DH = 3, DP = 2, DIM = D**SITES

    interface
        ! POSIX rmdir, to remove the directory of the round trip.
        function c_rmdir(path) bind(c, name="rmdir") result(rc)
            import :: c_char, c_int
            character(kind=c_char), intent(in) :: path(*)
            integer(c_int) :: rc
        end function c_rmdir
    end interface

    call run_checks()
    call check_summary()

contains

    subroutine run_checks()
        type(tutti_mpo_core_t) :: h_cores(SITES)
        type(tutti_mps_core_t) :: psi_cores(SITES), psi_complex(SITES), scaled(SITES)
        type(tutti_mps_core_t) :: bad_cores(SITES), core
        type(tutti_mpo_core_t) :: h_core
        type(tutti_src_options_t) :: options
        type(tutti_src_info_t), target :: info
        type(c_ptr) :: h, psi, psi_c, psi3, result, result_c, back, none
        complex(c_double_complex) :: psi_dense(DIM), psi_dense_c(DIM), expected(DIM)
        complex(c_double_complex) :: expected_c(DIM), got(DIM), h_dense(DIM, DIM)
        integer(c_int), allocatable :: shapes(:, :)
        integer(c_int) :: status, kind, dtype, n_sites, devices
        real(c_double) :: norm, distance, dense_norm, error
        character(len=:), allocatable :: dir
        logical :: same
        integer :: k, a, s, o, i, b, hl, hr, pl, pr

        ! Fortran-order cores holding the C test's numbers.
        do k = 1, SITES
            hl = merge(1, DH, k == 1)
            hr = merge(1, DH, k == SITES)
            pl = merge(1, DP, k == 1)
            pr = merge(1, DP, k == SITES)
            allocate (h_cores(k)%f64(hl, D, D, hr), psi_cores(k)%f64(pl, D, pr), &
                      psi_complex(k)%c128(pl, D, pr))
            do a = 1, hl
                do o = 1, D
                    do i = 1, D
                        do b = 1, hr
                            h_cores(k)%f64(a, o, i, b) = entry(k - 1, &
                                (((a - 1) * D + o - 1) * D + i - 1) * hr + b - 1, 0.1_c_double)
                        end do
                    end do
                end do
            end do
            do a = 1, pl
                do s = 1, D
                    do b = 1, pr
                        psi_cores(k)%f64(a, s, b) = entry(k - 1, ((a - 1) * D + s - 1) * pr &
                                                          + b - 1, 2.0_c_double)
                        psi_complex(k)%c128(a, s, b) = cmplx(psi_cores(k)%f64(a, s, b), &
                            entry(k - 1, ((a - 1) * D + s - 1) * pr + b - 1, 4.5_c_double), &
                            c_double_complex)
                    end do
                end do
            end do
        end do

        h = c_null_ptr
        psi = c_null_ptr
        psi_c = c_null_ptr
        call tutti_train_from_arrays_f(h_cores, h)
        call tutti_train_from_arrays_f(psi_cores, psi)
        call tutti_train_from_arrays_f(psi_complex, psi_c, status)
        call check(status == TUTTI_OK .and. c_associated(h) .and. c_associated(psi) &
                   .and. c_associated(psi_c), 'an MPO, an MPS and a complex MPS from arrays')

        ! Read back: info, shapes and every core, bit for bit.
        call tutti_train_info_f(h, kind, dtype, n_sites)
        call check(kind == TUTTI_TRAIN_MPO .and. dtype == TUTTI_DTYPE_FLOAT64 &
                   .and. n_sites == SITES, 'H is a float64 MPO of 4 sites')
        call tutti_train_shapes_f(h, shapes)
        call check(all(shape(shapes) == [4, SITES]) .and. all(shapes(:, 1) == [1, D, D, DH]) &
                   .and. all(shapes(:, 2) == [DH, D, D, DH]) &
                   .and. all(shapes(:, SITES) == [DH, D, D, 1]), &
                   'its shapes are (Dl, d_out, d_in, Dr) per site')
        same = .true.
        do k = 1, SITES
            call tutti_train_site_f(h, int(k - 1, c_int), h_core)
            same = same .and. all(shape(h_core%f64) == shape(h_cores(k)%f64))
            if (same) same = all(h_core%f64 == h_cores(k)%f64)
            call tutti_train_site_f(psi, int(k - 1, c_int), core)
            same = same .and. all(shape(core%f64) == shape(psi_cores(k)%f64))
            if (same) same = all(core%f64 == psi_cores(k)%f64)
            call tutti_train_site_f(psi_c, int(k - 1, c_int), core)
            same = same .and. .not. allocated(core%f64) .and. allocated(core%c128)
            if (same) same = all(core%c128 == psi_complex(k)%c128)
        end do
        call check(same, 'every core of H, psi and psi_c reads back bit for bit')
        call tutti_train_site_f(psi, int(SITES, c_int), core, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT, 'site 4 of 4 is refused: "' &
                   // tutti_last_error_f() // '"')

        ! The references, densely.
        psi_dense = mps_vector(psi_cores)
        psi_dense_c = mps_vector(psi_complex)
        h_dense = mpo_matrix(h_cores)
        expected = matmul(h_dense, psi_dense)
        expected_c = matmul(h_dense, psi_dense_c)

        ! Norms and distances against exact values.
        dense_norm = sqrt(sum(abs(psi_dense)**2))
        norm = -1
        call tutti_train_norm_f(psi, norm)
        call check(abs(norm - dense_norm) <= 1e-12_c_double * dense_norm, &
                   'tutti_train_norm_f ' // etoa(norm, 15) // ' equals the dense norm')
        scaled = psi_cores
        scaled(1)%f64 = 3 * scaled(1)%f64
        psi3 = c_null_ptr
        call tutti_train_from_arrays_f(scaled, psi3)
        distance = -1
        call tutti_train_distance_f(psi, psi3, distance)
        call check(abs(distance - 2 * dense_norm) <= 1e-12_c_double * dense_norm, &
                   '||psi - 3 psi|| = ' // etoa(distance, 15) // ' = 2 ||psi||')
        call tutti_train_distance_f(psi, psi, distance)
        call check(distance <= 1e-12_c_double * dense_norm, '||psi - psi|| = ' // etoa(distance))
        call tutti_train_distance_f(psi, psi_c, distance)
        error = sqrt(sum(abs(psi_dense - psi_dense_c)**2))
        call check(abs(distance - error) <= 1e-12_c_double * error, '||psi - psi_c|| = ' &
                   // etoa(distance, 15) // ', dense ' // etoa(error, 15))
        call tutti_train_free_f(psi3)

        ! SRC of H psi, exact at chi = 8.
        call tutti_src_options_default_f(options)
        call check(options%chi_out == 0 .and. options%oversample == 0 &
                   .and. options%cutoff == 0 .and. options%seed == 0 &
                   .and. options%resources%kind == TUTTI_KIND_AUTO &
                   .and. options%resources%devices == TUTTI_ALL_DEVICES, &
                   'defaults: chi_out 0 (to be set), no oversampling or cutoff, seed 0, AUTO')
        options%chi_out = 8
        options%seed = 7
        options%resources%kind = TUTTI_KIND_CPU
        do devices = 1, 3
            options%resources%devices = devices
            result = c_null_ptr
            call tutti_src_f([h, psi], result, options, status)
            call check(status == TUTTI_OK .and. c_associated(result), 'tutti_src_f on ' &
                       // itoa(devices) // ' device(s): ' // tutti_last_error_f())
            if (status /= TUTTI_OK) cycle
            got = train_vector(result, TUTTI_DTYPE_FLOAT64)
            error = relative_difference(got, expected)
            call check(error < 1e-12_c_double, 'H psi equals the dense product to ' &
                       // etoa(error) // ' relative')
            call tutti_train_shapes_f(result, shapes)
            call check(all(shapes(3, 1:SITES - 1) == [2, 4, 2]), 'exact bonds 1, 2, 4, 2, 1')
            call tutti_train_norm_f(result, norm)
            call check(abs(norm - sqrt(sum(abs(expected)**2))) <= 1e-12_c_double * norm, &
                       'its norm equals the dense one')
            call tutti_train_free_f(result, status)
            call check(status == TUTTI_OK .and. .not. c_associated(result), &
                       'released; the handle is now c_null_ptr')
        end do

        ! The QR split among 2 devices, with the sweep's diagnostics: the same product.
        call tutti_src_options_default_f(options)
        call check(options%distributed_qr == 0 .and. .not. c_associated(options%info_out), &
                   'defaults: the QR at rank 0, no diagnostics')
        options%chi_out = 8
        options%seed = 7
        options%resources%kind = TUTTI_KIND_CPU
        options%resources%devices = 2
        options%distributed_qr = 1
        options%info_out = c_loc(info)
        result = c_null_ptr
        call tutti_src_f([h, psi], result, options, status)
        call check(status == TUTTI_OK, 'tutti_src_f with distributed_qr: ' // tutti_last_error_f())
        got = train_vector(result, TUTTI_DTYPE_FLOAT64)
        error = relative_difference(got, expected)
        call check(error < 1e-12_c_double, 'distributed QR: H psi equals the dense product to ' &
                   // etoa(error) // ' relative')
        call check(info%devices == 2 .and. info%sketch_width == 4 &
                   .and. info%exact_fallback == 0, 'info: 2 devices, sketch width 4 (the ' &
                   // 'largest bond H psi can have), sketched: ' // itoa(int(info%sketch_width)))
        call check(info%qr_distributed > 0 .and. &
                   info%qr_distributed + info%qr_householder == SITES - 1, &
                   'info: ' // itoa(int(info%qr_distributed)) // ' of 3 QRs distributed')
        call check(info%environments_on_device == SITES - 1 .and. info%environments_on_disk == 0 &
                   .and. info%spilled_bytes == 0_c_int64_t, 'info: no caps, nothing spilled')
        call tutti_train_norm_f(result, norm)
        call check(abs(info%norm - norm) <= 1e-12_c_double * norm, 'info: the norm ' &
                   // etoa(info%norm, 15))
        call tutti_train_free_f(result)
        options%distributed_qr = 0
        options%info_out = c_null_ptr

        ! A mixed stack is computed in complex128.
        options%resources%devices = 2
        result_c = c_null_ptr
        call tutti_src_f([h, psi_c], result_c, options)
        call tutti_train_info_f(result_c, dtype=dtype)
        got = train_vector(result_c, TUTTI_DTYPE_COMPLEX128)
        error = relative_difference(got, expected_c)
        call check(dtype == TUTTI_DTYPE_COMPLEX128 .and. error < 1e-12_c_double, &
                   'real H, complex psi: complex128, equal to the dense product to ' &
                   // etoa(error) // ' relative')

        ! A directory round trip.
        dir = scratch_name()
        back = c_null_ptr
        call tutti_train_write_dir_f(result_c, dir)
        call tutti_train_from_dir_f(dir, back)
        call tutti_train_norm_f(back, norm)
        call tutti_train_distance_f(result_c, back, distance)
        call check(distance <= 1e-13_c_double * norm, 'written to ' // dir &
                   // ' and read back: distance ' // etoa(distance))
        call remove_train_dir(dir)

        ! Errors. A bond mismatch: site 2's left bond 3 against site 1's right bond 2.
        bad_cores = psi_cores
        deallocate (bad_cores(3)%f64)
        allocate (bad_cores(3)%f64(3, D, DP))
        bad_cores(3)%f64 = 1
        none = c_null_ptr
        call tutti_train_from_arrays_f(bad_cores, none, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. c_associated(none) &
                   .and. index(tutti_last_error_f(), 'bond mismatch at site 2') > 0, &
                   'a bond mismatch names the site: "' // tutti_last_error_f() // '"')
        call tutti_src_f([h, psi, h], none, options, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. .not. c_associated(none), &
                   'an MPS in the middle: "' // tutti_last_error_f() // '"')
        options%chi_out = 0
        call tutti_src_f([h, psi], none, options, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'chi_out') > 0, &
                   'chi_out 0: "' // tutti_last_error_f() // '"')
        call tutti_src_f([h, psi], none, status=status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index(tutti_last_error_f(), 'chi_out') > 0, &
                   'options absent are the defaults, chi_out 0 included')
        call tutti_train_from_dir_f('/nonexistent/tutti', none, status)
        call check(status == TUTTI_ERROR_IO .and. .not. c_associated(none), &
                   'a missing directory: "' // tutti_last_error_f() // '"')
        call tutti_train_free_f(none, status)
        call check(status == TUTTI_OK, 'releasing c_null_ptr is a no-op')

        call tutti_train_free_f(back)
        call tutti_train_free_f(result_c)
        call tutti_train_free_f(h)
        call tutti_train_free_f(psi)
        call tutti_train_free_f(psi_c)
    end subroutine run_checks

    ! The C test's fixed entries in [-1, 1]: site and index 0-based, index in C order.
    real(c_double) function entry(site, index, salt)
        integer, intent(in) :: site, index
        real(c_double), intent(in) :: salt
        entry = sin(0.37_c_double * index + 1.3_c_double * site + salt)
    end function entry

    ! Core k of an MPS as complex numbers, whichever dtype it holds.
    function complex_core(core) result(values)
        type(tutti_mps_core_t), intent(in) :: core
        complex(c_double_complex), allocatable :: values(:, :, :)
        if (allocated(core%f64)) then
            values = cmplx(core%f64, 0, c_double_complex)
        else
            values = core%c128
        end if
    end function complex_core

    ! The dense vector of an MPS: entry 1 + (s_0 s_1 ... s_{n-1} in base d), site 0 most
    ! significant.
    function mps_vector(cores) result(vector)
        type(tutti_mps_core_t), intent(in) :: cores(:)
        complex(c_double_complex) :: vector(DIM)
        complex(c_double_complex), allocatable :: environment(:), values(:, :, :)
        integer :: state, k

        do state = 0, DIM - 1
            environment = [(1.0_c_double, 0.0_c_double)]
            do k = 1, size(cores)
                values = complex_core(cores(k))
                environment = matmul(environment, values(:, digit(state, k) + 1, :))
            end do
            vector(state + 1) = environment(1)
        end do
    end function mps_vector

    ! The dense matrix of an MPO: H(out + 1, in + 1), states numbered as in mps_vector.
    function mpo_matrix(cores) result(matrix)
        type(tutti_mpo_core_t), intent(in) :: cores(:)
        complex(c_double_complex) :: matrix(DIM, DIM)
        real(c_double), allocatable :: environment(:)
        integer :: row, column, k

        do row = 0, DIM - 1
            do column = 0, DIM - 1
                environment = [1.0_c_double]
                do k = 1, size(cores)
                    environment = matmul(environment, cores(k)%f64(:, digit(row, k) + 1, &
                                                                   digit(column, k) + 1, :))
                end do
                matrix(row + 1, column + 1) = environment(1)
            end do
        end do
    end function mpo_matrix

    ! Site k's (1-based) digit of a state, site 1 most significant.
    integer function digit(state, k)
        integer, intent(in) :: state, k
        digit = mod(state / D**(SITES - k), D)
    end function digit

    ! The dense vector of a 4-site MPS train of dtype `dtype`, read back core by core.
    function train_vector(train, dtype) result(vector)
        type(c_ptr), intent(in) :: train
        integer(c_int), intent(in) :: dtype
        complex(c_double_complex) :: vector(DIM)
        type(tutti_mps_core_t) :: cores(SITES)
        integer(c_int) :: kind, found_dtype, n_sites
        integer :: k

        call tutti_train_info_f(train, kind, found_dtype, n_sites)
        vector = 0
        if (kind /= TUTTI_TRAIN_MPS .or. found_dtype /= dtype .or. n_sites /= SITES) return
        do k = 1, SITES
            call tutti_train_site_f(train, int(k - 1, c_int), cores(k))
        end do
        vector = mps_vector(cores)
    end function train_vector

    real(c_double) function relative_difference(a, b)
        complex(c_double_complex), intent(in) :: a(:), b(:)
        relative_difference = sqrt(sum(abs(a - b)**2) / sum(abs(b)**2))
    end function relative_difference

    ! A fresh directory name under /tmp.
    function scratch_name() result(path)
        character(len=:), allocatable :: path
        character(len=64) :: buffer
        real :: draw

        call random_seed()
        call random_number(draw)
        write (buffer, '(a, i9.9)') '/tmp/tutti-fortran-sweep-', int(draw * 1e9)
        path = trim(buffer)
    end function scratch_name

    ! Deletes the .npy files of a SITES-site train directory, then the directory.
    subroutine remove_train_dir(path)
        character(len=*), intent(in) :: path
        character(len=8) :: file
        integer :: k, unit, iostat

        do k = 0, SITES - 1
            write (file, '(a, i3.3, a)') '/', k, '.npy'
            open (newunit=unit, file=path // trim(file), status='old', iostat=iostat)
            if (iostat == 0) close (unit, status='delete')
        end do
        call check(c_rmdir(path // c_null_char) == 0, 'removed ' // path)
    end subroutine remove_train_dir

end program test_sweep
