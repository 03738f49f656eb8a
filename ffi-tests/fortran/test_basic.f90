! The basic C ABI from Fortran: version, device count, device info, errors, tutti_free_c.
!
! Built and run by `cargo xtask ffi-test`. Prints each check; stops with a non-zero exit
! code when any fails.
program test_basic
    use, intrinsic :: iso_c_binding, only: c_int, c_null_ptr, c_associated
    use tutti
    implicit none

    integer :: checks = 0, failures = 0
    integer(c_int) :: status, major, minor, patch, cores, auto_count, count, device
    type(tutti_device_info_t) :: info
    character(len=:), allocatable :: name, message

    ! Version: the library's equals the one these bindings (and the header) declare.
    major = -1; minor = -1; patch = -1
    status = tutti_version(major, minor, patch)
    call check(status == TUTTI_OK, 'tutti_version returns TUTTI_OK')
    call check(major == TUTTI_VERSION_MAJOR .and. minor == TUTTI_VERSION_MINOR &
               .and. patch == TUTTI_VERSION_PATCH, 'library version ' // version_text() &
               // ' equals the bindings'' version')
    call check(len(tutti_error_message()) == 0, 'the last error is empty after a success')

    ! Device count: CPU is the host core count; AUTO is at least 1 either way.
    cores = -1
    status = tutti_device_count(TUTTI_KIND_CPU, cores)
    call check(status == TUTTI_OK .and. cores >= 1, 'CPU device count (host cores) = ' // itoa(cores))
    auto_count = -1
    status = tutti_device_count(TUTTI_KIND_AUTO, auto_count)
    call check(status == TUTTI_OK .and. auto_count >= 1, 'AUTO device count = ' // itoa(auto_count))

    ! Device info for each device of a selection of up to two.
    count = min(2_c_int, cores)
    do device = 0, count - 1
        info%index = -1
        info%name = c_null_ptr
        status = tutti_device_info(TUTTI_KIND_CPU, count, device, info)
        call check(status == TUTTI_OK, 'tutti_device_info(CPU, ' // itoa(count) // ', ' &
                   // itoa(device) // ') returns TUTTI_OK: ' // tutti_error_message())
        if (status /= TUTTI_OK) cycle
        call check(info%index == device, 'info%index ' // itoa(info%index) // ' equals the request')
        call check(info%kind == TUTTI_KIND_CPU, 'info%kind is TUTTI_KIND_CPU')
        call check(info%threads >= 1 .and. info%threads <= cores, &
                   'info%threads = ' // itoa(info%threads))
        call check(info%total_bytes > 0 .and. info%free_bytes <= info%total_bytes, &
                   'free <= total bytes')
        name = tutti_string(info%name)
        call check(name == 'host (simulated)', 'info%name is "' // name // '"')
        status = tutti_free_c(info%name)
        call check(status == TUTTI_OK, 'tutti_free_c(info%name) returns TUTTI_OK')
    end do

    ! Error path: an index out of range. The output stays untouched; the message names it.
    info%index = -7
    info%name = c_null_ptr
    status = tutti_device_info(TUTTI_KIND_CPU, count, count, info)
    message = tutti_error_message()
    call check(status == TUTTI_ERROR_INVALID_ARGUMENT, 'index ' // itoa(count) // ' of ' &
               // itoa(count) // ' is TUTTI_ERROR_INVALID_ARGUMENT (' // itoa(status) // ')')
    call check(index(message, 'index') > 0, 'the message names `index`: "' // message // '"')
    call check(info%index == -7 .and. .not. c_associated(info%name), 'info is untouched on failure')
    call check(tutti_string(tutti_status_name(status)) == 'TUTTI_ERROR_INVALID_ARGUMENT', &
               'tutti_status_name names the status')

    status = tutti_device_info(TUTTI_KIND_CPU, 0_c_int, 0_c_int, info)
    message = tutti_error_message()
    call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. index(message, 'count') > 0, &
               'count 0 is refused: "' // message // '"')

    status = tutti_device_count(99_c_int, count)
    message = tutti_error_message()
    call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. index(message, 'kind') > 0, &
               'kind 99 is refused: "' // message // '"')

    call check(tutti_free_c(c_null_ptr) == TUTTI_OK, 'tutti_free_c(c_null_ptr) is a no-op')

    ! Variables of the main program are never deallocated implicitly; valgrind would count them.
    if (allocated(name)) deallocate (name)
    if (allocated(message)) deallocate (message)

    print '(i0, a, i0, a)', checks - failures, ' passed, ', failures, ' failed'
    if (failures /= 0) error stop 1

contains

    subroutine check(passed, what)
        logical, intent(in) :: passed
        character(len=*), intent(in) :: what
        checks = checks + 1
        if (passed) then
            print '(a, a)', 'ok    ', what
        else
            failures = failures + 1
            print '(a, a)', 'FAIL  ', what
        end if
    end subroutine check

    function itoa(value) result(text)
        integer(c_int), intent(in) :: value
        character(len=:), allocatable :: text
        character(len=16) :: buffer
        write (buffer, '(i0)') value
        text = trim(buffer)
    end function itoa

    function version_text() result(text)
        character(len=:), allocatable :: text
        text = itoa(major) // '.' // itoa(minor) // '.' // itoa(patch)
    end function version_text

end program test_basic
