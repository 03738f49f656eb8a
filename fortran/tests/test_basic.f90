! The basic C ABI from Fortran: version, resources, device count and info, errors with and
! without `status`, tutti_free_c.
!
! Every check is exact (integers, strings, pointers). The last one runs this program again
! with the argument `unchecked-failure`, in which it calls a wrapper that fails without
! `status`: that child must stop with a non-zero exit code after printing the wrapper's
! name, the status name and tutti's message on stderr.
!
! Built and run by `cargo xtask ffi-test`; stops with a non-zero exit code when a check fails.
program test_basic
    use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_null_ptr, c_associated, c_loc
    use tutti
    use checks
    implicit none

    character(len=64) :: argument

    call get_command_argument(1, argument)
    if (argument == 'unchecked-failure') then
        call fail_without_status()
    else
        call run_checks()
    end if

contains

    subroutine run_checks()
        integer(c_int) :: status, major, minor, patch, cores, auto_count, gpus, count, index
        type(tutti_resources_t) :: resources
        type(tutti_device_t) :: device
        type(tutti_device_info_t) :: info
        integer(c_int), target :: not_a_buffer
        type(c_ptr) :: name

        ! Version: the library's equals the one these bindings (and the header) declare.
        call tutti_version_f(major, minor, patch)
        call check(major == TUTTI_VERSION_MAJOR .and. minor == TUTTI_VERSION_MINOR &
                   .and. patch == TUTTI_VERSION_PATCH, 'library version ' // itoa(major) &
                   // '.' // itoa(minor) // '.' // itoa(patch) // ' equals the bindings'' one')
        major = -1
        minor = -1
        patch = -1
        status = tutti_version(major, minor, patch)
        call check(status == TUTTI_OK .and. major == TUTTI_VERSION_MAJOR, &
                   'the raw tutti_version agrees')
        call check(len(tutti_last_error_f()) == 0, 'the last error is empty after a success')

        ! Resources: the documented defaults, pointers NULL.
        call tutti_resources_default_f(resources, status)
        call check(status == TUTTI_OK .and. resources%kind == TUTTI_KIND_AUTO &
                   .and. resources%devices == TUTTI_ALL_DEVICES &
                   .and. .not. c_associated(resources%ordinals) &
                   .and. resources%device_memory_bytes == 0 &
                   .and. resources%host_memory_bytes == 0 &
                   .and. .not. c_associated(resources%scratch_dir) &
                   .and. resources%scratch_limit_bytes == 0 &
                   .and. .not. c_associated(resources%world), &
                   'default resources: AUTO, all devices, no ordinals, caps, scratch or world')

        ! Device counts: CPU is the host core count; AUTO at least 1; GPU a count or a refusal.
        cores = -1
        call tutti_device_count_f(TUTTI_KIND_CPU, cores)
        call check(cores >= 1, 'CPU device count (host cores) = ' // itoa(cores))
        auto_count = -1
        call tutti_device_count_f(TUTTI_KIND_AUTO, auto_count)
        call check(auto_count >= 1, 'AUTO device count = ' // itoa(auto_count))
        gpus = -1
        call tutti_device_count_f(TUTTI_KIND_GPU, gpus, status)
        call check((status == TUTTI_OK .and. gpus >= 0) .or. ((status == TUTTI_ERROR_UNSUPPORTED &
                   .or. status == TUTTI_ERROR_DEVICE) .and. gpus == -1), &
                   'GPU count: a number, or a refusal that leaves it alone (' &
                   // tutti_status_name_f(status) // ')')

        ! Device info through the wrapper, for each device of a selection of up to two.
        count = min(2_c_int, cores)
        do index = 0, count - 1
            call tutti_device_info_f(TUTTI_KIND_CPU, count, index, device, status)
            call check(status == TUTTI_OK, 'tutti_device_info_f(CPU, ' // itoa(count) // ', ' &
                       // itoa(index) // '): ' // tutti_last_error_f())
            call check(device%index == index .and. device%kind == TUTTI_KIND_CPU &
                       .and. device%ordinal >= 0, 'index ' // itoa(device%index) &
                       // ', kind CPU, ordinal ' // itoa(device%ordinal))
            call check(device%threads >= 1 .and. device%threads <= cores, &
                       'threads = ' // itoa(device%threads))
            call check(device%total_bytes > 0 .and. device%free_bytes <= device%total_bytes, &
                       'free <= total bytes')
            call check(device%name == 'host (simulated)', 'name "' // device%name // '"')
        end do

        ! The raw call: the caller owns info%name; tutti_free_c_f releases it and nulls it.
        status = tutti_device_info(TUTTI_KIND_CPU, 1_c_int, 0_c_int, info)
        call check(status == TUTTI_OK .and. tutti_string(info%name) == 'host (simulated)', &
                   'the raw tutti_device_info fills the bind(C) type')
        name = info%name
        call tutti_free_c_f(info%name, status)
        call check(status == TUTTI_OK .and. .not. c_associated(info%name), &
                   'tutti_free_c_f releases the name and nulls the pointer')
        call tutti_free_c_f(name, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT .and. c_associated(name), &
                   'a second release is refused and leaves the pointer: ' // tutti_last_error_f())
        call tutti_free_c_f(info%name, status)
        call check(status == TUTTI_OK, 'releasing c_null_ptr is a no-op')
        status = tutti_free_c(c_loc(not_a_buffer))
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT, &
                   'a Fortran variable is not a tutti buffer: ' // tutti_last_error_f())

        ! Error path with status: the output is untouched, the message names the argument.
        device%index = -7
        call tutti_device_info_f(TUTTI_KIND_CPU, count, count, device, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT, 'index ' // itoa(count) // ' of ' &
                   // itoa(count) // ' is ' // tutti_status_name_f(status))
        call check(index_of(tutti_last_error_f(), 'index') > 0, &
                   'the message names `index`: "' // tutti_last_error_f() // '"')
        call check(device%index == -7, 'the output is untouched on failure')
        call check(tutti_status_name_f(status) == 'TUTTI_ERROR_INVALID_ARGUMENT' &
                   .and. tutti_status_name_f(-1000_c_int) == 'TUTTI_ERROR_UNKNOWN', &
                   'tutti_status_name_f names the status, and unknown ones')
        call tutti_device_info_f(TUTTI_KIND_CPU, 0_c_int, 0_c_int, device, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index_of(tutti_last_error_f(), 'count') > 0, &
                   'count 0 is refused: "' // tutti_last_error_f() // '"')
        call tutti_device_count_f(99_c_int, count, status)
        call check(status == TUTTI_ERROR_INVALID_ARGUMENT &
                   .and. index_of(tutti_last_error_f(), 'kind') > 0, &
                   'kind 99 is refused: "' // tutti_last_error_f() // '"')

        call check(child_stops_with_message(), 'without status, a failing wrapper prints ' &
                   // 'its name, the status and the message to stderr and stops non-zero')

        call check_summary()
    end subroutine run_checks

    ! The child's part: a call that fails, with no `status` to receive it.
    subroutine fail_without_status()
        type(tutti_device_t) :: device

        call tutti_device_info_f(TUTTI_KIND_CPU, 1_c_int, 5_c_int, device)
        print '(a)', 'tutti_device_info_f returned after a failure without status'
    end subroutine fail_without_status

    ! Runs this program as `<program> unchecked-failure` through the shell (natively, also
    ! when this one runs under valgrind) and checks its exit code and stderr.
    logical function child_stops_with_message() result(ok)
        character(len=4096) :: program
        character(len=:), allocatable :: command
        integer :: exit_code, command_status

        call get_command_argument(0, program)
        ! GFORTRAN_ERROR_BACKTRACE=0: the child's `error stop` without gfortran's backtrace.
        command = 'out=$(GFORTRAN_ERROR_BACKTRACE=0 ''' // trim(program) &
                  // ''' unchecked-failure 2>&1); code=$?; ' &
                  // 'printf "      child (exit %s): %s\n" "$code" "$out"; ' &
                  // '[ "$code" -ne 0 ] || exit 1; case "$out" in ' &
                  // '*"tutti_device_info_f: TUTTI_ERROR_INVALID_ARGUMENT: tutti_device_info"*) ' &
                  // 'exit 0;; esac; exit 1'
        exit_code = -1
        command_status = -1
        call execute_command_line(command, wait=.true., exitstat=exit_code, &
                                  cmdstat=command_status)
        ok = command_status == 0 .and. exit_code == 0
    end function child_stops_with_message

    ! The position of `part` in `text` (index() without the clash with a variable).
    integer function index_of(text, part)
        character(len=*), intent(in) :: text, part
        index_of = index(text, part)
    end function index_of

end program test_basic
