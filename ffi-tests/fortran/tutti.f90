! Fortran bindings to the tutti C ABI (include/tutti.h), through iso_c_binding.
!
! Every function returns an integer(c_int) status: TUTTI_OK (0) or a negative error kind;
! tutti_error_message() gives the calling thread's message for the last call. Strings that
! tutti returns (such as tutti_device_info_t%name) are owned by the caller: copy them with
! tutti_string() and release them with tutti_free_c().
!
! The constants below mirror include/tutti.h; python/tests/test_header_sync.py fails when
! they drift apart.
module tutti
    use, intrinsic :: iso_c_binding, only: c_int, c_int32_t, c_int64_t, c_size_t, c_ptr, c_char, &
                                           c_associated, c_f_pointer
    implicit none
    private

    ! Version of the header these bindings follow (TUTTI_VERSION_* in tutti.h).
    integer(c_int), parameter, public :: TUTTI_VERSION_MAJOR = 0
    integer(c_int), parameter, public :: TUTTI_VERSION_MINOR = 1
    integer(c_int), parameter, public :: TUTTI_VERSION_PATCH = 0

    ! TuttiStatus
    integer(c_int), parameter, public :: TUTTI_OK = 0
    integer(c_int), parameter, public :: TUTTI_ERROR_INVALID_ARGUMENT = -1
    integer(c_int), parameter, public :: TUTTI_ERROR_NULL_POINTER = -2
    integer(c_int), parameter, public :: TUTTI_ERROR_UNSUPPORTED = -3
    integer(c_int), parameter, public :: TUTTI_ERROR_DEVICE = -4
    integer(c_int), parameter, public :: TUTTI_ERROR_OUT_OF_MEMORY = -5
    integer(c_int), parameter, public :: TUTTI_ERROR_IO = -6
    integer(c_int), parameter, public :: TUTTI_ERROR_PANIC = -7
    integer(c_int), parameter, public :: TUTTI_ERROR_CALLBACK = -8
    integer(c_int), parameter, public :: TUTTI_ERROR_NOT_CONVERGED = -9
    integer(c_int), parameter, public :: TUTTI_ERROR_REMOTE = -10

    ! TuttiKind
    integer(c_int), parameter, public :: TUTTI_KIND_CPU = 0
    integer(c_int), parameter, public :: TUTTI_KIND_GPU = 1
    integer(c_int), parameter, public :: TUTTI_KIND_AUTO = 2

    integer(c_int), parameter, public :: TUTTI_MAX_SIMULATED_DEVICES = 256
    ! TuttiResources.devices: every GPU, or one simulated device using all cores
    integer(c_int), parameter, public :: TUTTI_ALL_DEVICES = -1

    ! TuttiDeviceInfo. free_bytes and total_bytes are uint64_t in C; Fortran has no unsigned
    ! integers, and no device has 2**63 bytes.
    type, bind(c), public :: tutti_device_info_t
        integer(c_int) :: kind
        integer(c_int) :: ordinal
        integer(c_int) :: index
        integer(c_int) :: threads
        integer(c_int64_t) :: free_bytes
        integer(c_int64_t) :: total_bytes
        type(c_ptr) :: name   ! owned by the caller: release with tutti_free_c
    end type tutti_device_info_t

    public :: tutti_version, tutti_device_count, tutti_device_info, tutti_last_error
    public :: tutti_free_c, tutti_status_name, tutti_string, tutti_error_message
    public :: tutti_world_from_fcomm, tutti_world_info, tutti_world_free, tutti_world_fail

    interface
        ! Writes the library's version.
        function tutti_version(major, minor, patch) bind(c, name="tutti_version") result(status)
            import :: c_int
            integer(c_int), intent(inout) :: major, minor, patch
            integer(c_int) :: status
        end function tutti_version

        ! How many devices of `kind` a computation may use by default.
        function tutti_device_count(kind, count) bind(c, name="tutti_device_count") result(status)
            import :: c_int
            integer(c_int), value :: kind
            integer(c_int), intent(inout) :: count
            integer(c_int) :: status
        end function tutti_device_count

        ! Describes device `index` (0-based) of a selection of `count` devices of `kind`.
        function tutti_device_info(kind, count, index, info) &
                bind(c, name="tutti_device_info") result(status)
            import :: c_int, tutti_device_info_t
            integer(c_int), value :: kind, count, index
            type(tutti_device_info_t), intent(inout) :: info
            integer(c_int) :: status
        end function tutti_device_info

        ! The calling thread's last message (borrowed; see tutti_error_message).
        function tutti_last_error() bind(c, name="tutti_last_error") result(message)
            import :: c_ptr
            type(c_ptr) :: message
        end function tutti_last_error

        ! Releases a buffer tutti returned; c_null_ptr is a no-op.
        function tutti_free_c(ptr) bind(c, name="tutti_free_c") result(status)
            import :: c_ptr, c_int
            type(c_ptr), value :: ptr
            integer(c_int) :: status
        end function tutti_free_c

        ! The static name of a status value.
        function tutti_status_name(status) bind(c, name="tutti_status_name") result(name)
            import :: c_ptr, c_int
            integer(c_int), value :: status
            type(c_ptr) :: name
        end function tutti_status_name

        ! Adopts an MPI communicator given as its Fortran handle (collective over it); a
        ! library built without MPI returns TUTTI_ERROR_UNSUPPORTED.
        function tutti_world_from_fcomm(fcomm, world) &
                bind(c, name="tutti_world_from_fcomm") result(status)
            import :: c_int, c_int32_t, c_ptr
            integer(c_int32_t), value :: fcomm
            type(c_ptr), intent(out) :: world
            integer(c_int) :: status
        end function tutti_world_from_fcomm

        ! This process's rank and count, in the world and on its node.
        function tutti_world_info(world, rank, size, local_rank, local_size) &
                bind(c, name="tutti_world_info") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: world
            integer(c_int), intent(out) :: rank, size, local_rank, local_size
            integer(c_int) :: status
        end function tutti_world_info

        ! Releases a world (collective); c_null_ptr is a no-op.
        function tutti_world_free(world) bind(c, name="tutti_world_free") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: world
            integer(c_int) :: status
        end function tutti_world_free

        ! Fails this process's next call over the world (the others get
        ! TUTTI_ERROR_REMOTE with the message): pass a NUL-terminated string,
        ! "text"//c_null_char.
        function tutti_world_fail(world, message) bind(c, name="tutti_world_fail") &
                result(status)
            import :: c_int, c_ptr, c_char
            type(c_ptr), value :: world
            character(kind=c_char), dimension(*), intent(in) :: message
            integer(c_int) :: status
        end function tutti_world_fail

        function c_strlen(text) bind(c, name="strlen") result(length)
            import :: c_ptr, c_size_t
            type(c_ptr), value :: text
            integer(c_size_t) :: length
        end function c_strlen
    end interface

contains

    ! A copy of the NUL-terminated C string at `ptr` ('' for a null pointer). It does not
    ! release `ptr`.
    function tutti_string(ptr) result(text)
        type(c_ptr), intent(in) :: ptr
        character(len=:), allocatable :: text
        character(kind=c_char), pointer :: chars(:)
        integer(c_size_t) :: length, i

        if (.not. c_associated(ptr)) then
            text = ''
            return
        end if
        length = c_strlen(ptr)
        allocate (character(len=length) :: text)
        if (length == 0) return
        call c_f_pointer(ptr, chars, [length])
        do i = 1, length
            text(i:i) = chars(i)
        end do
    end function tutti_string

    ! A copy of the calling thread's last error message: '' after a successful call.
    function tutti_error_message() result(text)
        character(len=:), allocatable :: text
        text = tutti_string(tutti_last_error())
    end function tutti_error_message

end module tutti
