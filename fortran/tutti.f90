! Fortran bindings to the tutti C ABI (include/tutti.h), through iso_c_binding: module `tutti`.
!
! Build it once with your program (gfortran -std=f2008 or later):
!     gfortran -c -J build path/to/tutti/fortran/tutti.f90 -o build/tutti.o
!     gfortran -I build my_program.f90 build/tutti.o -L target/release -ltutti -o my_program
! docs/c-abi.md ("From Fortran") has a complete example.
!
! Two layers, both public:
!
! 1. The raw interfaces, one per C function, under the C function's own name (tutti_fmm,
!    tutti_train_free, ...), with bind(C) derived types that mirror the header's structs: a
!    struct TuttiFooBar is the type tutti_foo_bar_t, with the same components in the same
!    order. Every raw function returns the C status, an integer(c_int). An argument that C
!    requires is passed by reference (a scalar, an array `(*)`, a bind(C) type, or a string
!    as a NUL-terminated character(kind=c_char) array); an argument where NULL selects a
!    behaviour (options: the defaults; the outputs potential_out, accel_out, covariance_out,
!    json_out and the sparse solve's info_out: not wanted) and every opaque handle
!    (TuttiTrain *, TuttiWorld *, TuttiSparse *) is a type(c_ptr) passed by value.
!    Ownership is C's: see include/tutti.h for each function.
!
! 2. The wrappers: for every C function tutti_X, the Fortran procedure tutti_X_f. A wrapper
!    takes assumed-shape arrays, character(*) strings (trailing blanks removed, then
!    NUL-terminated), optional arguments for what C accepts as NULL, and copies whatever
!    tutti allocates into allocatable Fortran arrays or strings, releasing tutti's memory
!    with the right function before it returns. Every wrapper that calls a status-returning
!    function is a subroutine whose last argument is `status` (optional, intent(out); only
!    tutti_fit_f's `lower` and `upper`, added later, come after it, by keyword):
!    - present: it receives the C status (TUTTI_OK or a negative error) and the program goes
!      on; tutti_last_error_f() gives the message until the thread's next tutti call;
!    - absent: a failure prints "<wrapper>: <status name>: <tutti's message>" to error_unit
!      and stops the program with `error stop`.
!    The two string getters are functions: tutti_last_error_f() and tutti_status_name_f(s)
!    return Fortran strings (tutti_string(ptr) copies any C string).
!    Outputs are written only on success: allocatable outputs are then allocated (and left
!    deallocated on failure), other outputs are left as they were on failure. Arguments whose
!    Fortran shapes disagree (positions that are not 3 x size(masses), a core with neither
!    or both dtypes set, sparse indices that are not pointers(n + 1) - index_base long) are
!    the calling program's bug, like a shape mismatch in an array expression: the wrapper
!    stops the program with a message, whatever `status`.
!
! Conventions of the wrappers:
! - Arrays are 1-based, but numbers that name something to tutti stay 0-based as in C: a
!   device index, a fit experiment, a train site, an atom or an offset in TuttiGradientShell.
!   Sparse matrices are the exception: tutti reads compressed arrays with either base, so
!   give your 1-based pointers and indices as they are and set options%index_base = 1
!   (the default, 0, is C's). TUTTI_SPARSE_CSC (column pointers, row indices) is the
!   layout of Fortran's column order; TUTTI_SPARSE_CSR is the default.
! - Positions are real(c_double) arrays of shape (3, n): body i at positions(:, i), the same
!   memory as C's row-major n x 3. Likewise accelerations and bohr coordinates.
! - A train core is a Fortran array in Fortran order: an MPS core is core(Dl, d, Dr), an MPO
!   core core(Dl, d_out, d_in, Dr), indexed as the header's shapes (tutti_mps_core_t,
!   tutti_mpo_core_t); the wrappers transpose to and from C's order.
! - A handle (a train, a world, a sparse factorization) is a type(c_ptr); the *_free_f
!   wrappers set it to c_null_ptr.
! - uint64_t fields are integer(c_int64_t): Fortran has no unsigned integers. No byte count
!   needs the top bit; a seed of 2**63 or more is its negative two's-complement twin.
!
! The constants, the bind(C) types and the set of raw interfaces mirror include/tutti.h;
! python/tests/test_header_sync.py fails when they drift apart.
module tutti
    use, intrinsic :: iso_c_binding, only: c_int, c_int32_t, c_int64_t, c_size_t, c_double, &
                                           c_double_complex, c_char, c_null_char, c_ptr, &
                                           c_null_ptr, c_funptr, c_null_funptr, &
                                           c_associated, c_f_pointer, c_loc, c_funloc
    use, intrinsic :: iso_fortran_env, only: error_unit
    implicit none
    private

    ! Version of the header these bindings follow (TUTTI_VERSION_* in tutti.h; the string
    ! TUTTI_VERSION has no twin here: Fortran names ignore case, and tutti_version is taken).
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
    integer(c_int), parameter, public :: TUTTI_ERROR_SINGULAR = -11

    ! TuttiKind
    integer(c_int), parameter, public :: TUTTI_KIND_CPU = 0
    integer(c_int), parameter, public :: TUTTI_KIND_GPU = 1
    integer(c_int), parameter, public :: TUTTI_KIND_AUTO = 2

    ! TuttiKernels: the `kernels` component of tutti_fmm_options_t and tutti_src_options_t.
    integer(c_int), parameter, public :: TUTTI_KERNELS_AUTO = 0
    integer(c_int), parameter, public :: TUTTI_KERNELS_ALWAYS = 1
    integer(c_int), parameter, public :: TUTTI_KERNELS_NEVER = 2

    ! TuttiSparseLayout: the `layout` component of tutti_sparse_options_t.
    integer(c_int), parameter, public :: TUTTI_SPARSE_CSR = 0
    integer(c_int), parameter, public :: TUTTI_SPARSE_CSC = 1

    ! TuttiTrainKind
    integer(c_int), parameter, public :: TUTTI_TRAIN_MPS = 0
    integer(c_int), parameter, public :: TUTTI_TRAIN_MPO = 1

    ! TuttiDtype
    integer(c_int), parameter, public :: TUTTI_DTYPE_FLOAT64 = 0
    integer(c_int), parameter, public :: TUTTI_DTYPE_COMPLEX128 = 1

    integer(c_int), parameter, public :: TUTTI_MAX_SIMULATED_DEVICES = 256
    ! TuttiResources%devices: every GPU, or one simulated device using all cores
    integer(c_int), parameter, public :: TUTTI_ALL_DEVICES = -1

    ! tutti_fit_result_t%termination: why the fit stopped (the gradient, the step or the
    ! cost tolerance was met, or, not converged, the iteration limit reached or a callback
    ! asked to stop: the Rust API's; tutti_fit has no callback yet).
    integer(c_int), parameter, public :: TUTTI_TERMINATION_GRADIENT = 1
    integer(c_int), parameter, public :: TUTTI_TERMINATION_STEP = 2
    integer(c_int), parameter, public :: TUTTI_TERMINATION_COST = 3
    integer(c_int), parameter, public :: TUTTI_TERMINATION_MAX_ITERATIONS = 4
    integer(c_int), parameter, public :: TUTTI_TERMINATION_CALLBACK = 5

    ! ---------------------------------------------------------------------------------------
    ! bind(C) mirrors of the header's structs. Pointer components start as c_null_ptr and the
    ! components of results as zero, so a fresh variable is a C `= {0}`; options still come
    ! from their tutti_*_default function.
    ! ---------------------------------------------------------------------------------------

    ! TuttiResources: which devices a call may use. `ordinals` is c_loc of an integer(c_int)
    ! target array (or c_null_ptr), `scratch_dir` c_loc of a NUL-terminated
    ! character(kind=c_char) target string (or c_null_ptr), `world` a handle from
    ! tutti_world_from_fcomm (or c_null_ptr); all are read during the call only.
    type, bind(c), public :: tutti_resources_t
        integer(c_int) :: kind
        integer(c_int) :: devices
        type(c_ptr) :: ordinals = c_null_ptr
        integer(c_int) :: ordinal_count
        integer(c_int64_t) :: device_memory_bytes
        integer(c_int64_t) :: host_memory_bytes
        type(c_ptr) :: scratch_dir = c_null_ptr
        integer(c_int64_t) :: scratch_limit_bytes
        type(c_ptr) :: world = c_null_ptr
    end type tutti_resources_t

    ! TuttiProgress: one progress report, valid during the callback only. `task` and `stage`
    ! are NUL-terminated C strings (tutti_string copies them); `value` holds a figure (the
    ! SCF energy, the fit's cost) when has_value is 1, NaN otherwise.
    type, bind(c), public :: tutti_progress_t
        type(c_ptr) :: task = c_null_ptr
        type(c_ptr) :: stage = c_null_ptr
        integer(c_int64_t) :: done = 0
        integer(c_int64_t) :: total = 0
        real(c_double) :: value = 0
        integer(c_int) :: has_value = 0
    end type tutti_progress_t

    ! TuttiProgressCallback, the `progress` component of every workload's options: `report`
    ! is c_funloc of a procedure(tutti_progress_fn), or c_null_funptr (the default) for no
    ! reports; `user_data` is handed back to it untouched.
    type, bind(c), public :: tutti_progress_callback_t
        type(c_funptr) :: report = c_null_funptr
        type(c_ptr) :: user_data = c_null_ptr
    end type tutti_progress_callback_t

    ! TuttiRhfMatrices: the converged orbitals and density that tutti_rhf_energy writes when
    ! options%matrices_out is c_loc of one. The arrays are tutti's, C row-major (so, read with
    ! c_f_pointer as (nmo, nao) and (nao, nao), transposed): copy them, then release them
    ! with tutti_rhf_matrices_free_f.
    type, bind(c), public :: tutti_rhf_matrices_t
        integer(c_int) :: nao = 0
        integer(c_int) :: nmo = 0
        integer(c_int) :: occupied = 0
        type(c_ptr) :: orbital_energies = c_null_ptr
        type(c_ptr) :: coefficients = c_null_ptr
        type(c_ptr) :: density = c_null_ptr
    end type tutti_rhf_matrices_t

    ! TuttiRhfOptions (tutti_rhf_options_default). `matrices_out` is c_null_ptr or c_loc of
    ! a tutti_rhf_matrices_t target. A positive `gradient_tolerance` (default 1e-5) converges
    ! on the energy change and the orbital gradient (PySCF's conv_tol_grad); 0 on the density
    ! change; tutti_rhf_gradient refuses a non-zero value (its defaults hold 0).
    type, bind(c), public :: tutti_rhf_options_t
        type(tutti_resources_t) :: resources
        integer(c_int) :: charge
        integer(c_int) :: cartesian
        integer(c_int) :: max_iterations
        real(c_double) :: energy_tolerance
        real(c_double) :: density_tolerance
        type(c_ptr) :: matrices_out = c_null_ptr
        type(tutti_progress_callback_t) :: progress
        real(c_double) :: gradient_tolerance
    end type tutti_rhf_options_t

    ! TuttiRhfResult: what tutti_rhf_energy computed (hartree, seconds).
    type, bind(c), public :: tutti_rhf_result_t
        real(c_double) :: energy = 0
        real(c_double) :: electronic_energy = 0
        real(c_double) :: nuclear_repulsion = 0
        real(c_double) :: delta_energy = 0
        real(c_double) :: delta_density = 0
        real(c_double) :: scf_seconds = 0
        integer(c_int) :: nao = 0
        integer(c_int) :: electrons = 0
        integer(c_int) :: iterations = 0
        integer(c_int) :: converged = 0
        real(c_double) :: orbital_gradient = 0
    end type tutti_rhf_result_t

    ! TuttiGradientOptions (tutti_gradient_options_default).
    type, bind(c), public :: tutti_gradient_options_t
        type(tutti_rhf_options_t) :: rhf
        integer(c_int) :: serial
    end type tutti_gradient_options_t

    ! TuttiGradientShell: shell s of a gradient. `atom` and `offset` are 0-based as in C: the
    ! shell's primitives are elements offset+1 .. offset+primitives of the Fortran arrays.
    type, bind(c), public :: tutti_gradient_shell_t
        integer(c_int) :: atom = 0
        integer(c_int) :: l = 0
        integer(c_int) :: primitives = 0
        integer(c_int) :: offset = 0
    end type tutti_gradient_shell_t

    ! TuttiGradientTimings, seconds.
    type, bind(c), public :: tutti_gradient_timings_t
        real(c_double) :: scf = 0
        real(c_double) :: overlap = 0
        real(c_double) :: core_hamiltonian = 0
        real(c_double) :: two_electron = 0
        real(c_double) :: fock = 0
        real(c_double) :: total = 0
    end type tutti_gradient_timings_t

    ! TuttiRhfGradient, as the raw tutti_rhf_gradient writes it: its five arrays belong to the
    ! caller, released by tutti_rhf_gradient_free (which resets it). A fresh variable is
    ! zero-initialised, so releasing it is a no-op on every path. tutti_rhf_gradient_f
    ! returns a tutti_gradient_t instead, with Fortran arrays.
    type, bind(c), public :: tutti_rhf_gradient_t
        real(c_double) :: energy = 0
        integer(c_int) :: iterations = 0
        integer(c_int) :: devices = 0
        integer(c_int) :: n_shells = 0
        integer(c_int) :: n_primitives = 0
        type(c_ptr) :: shells = c_null_ptr
        type(c_ptr) :: exponents = c_null_ptr
        type(c_ptr) :: coefficients = c_null_ptr
        type(c_ptr) :: grad_exponents = c_null_ptr
        type(c_ptr) :: grad_coefficients = c_null_ptr
        type(tutti_gradient_timings_t) :: timings
    end type tutti_rhf_gradient_t

    ! TuttiDeviceInfo, as the raw tutti_device_info writes it: the caller owns `name` and
    ! releases it with tutti_free_c. tutti_device_info_f returns a tutti_device_t instead.
    type, bind(c), public :: tutti_device_info_t
        integer(c_int) :: kind = 0
        integer(c_int) :: ordinal = 0
        integer(c_int) :: index = 0
        integer(c_int) :: threads = 0
        integer(c_int64_t) :: free_bytes = 0
        integer(c_int64_t) :: total_bytes = 0
        type(c_ptr) :: name = c_null_ptr
    end type tutti_device_info_t

    ! TuttiFitOptions (tutti_fit_options_default). `lower` and `upper` are c_loc of
    ! n_parameters real(c_double) target values (or c_null_ptr: unbounded on that side), read
    ! during the call only; tutti_fit_f sets them from its `lower` and `upper` arguments.
    type, bind(c), public :: tutti_fit_options_t
        type(tutti_resources_t) :: resources
        integer(c_int) :: max_iterations
        real(c_double) :: gradient_tolerance
        real(c_double) :: step_tolerance
        real(c_double) :: cost_tolerance
        type(tutti_progress_callback_t) :: progress
        type(c_ptr) :: lower = c_null_ptr
        type(c_ptr) :: upper = c_null_ptr
    end type tutti_fit_options_t

    ! TuttiFitResult: diagnostics of tutti_fit. `termination` is a TUTTI_TERMINATION_*
    ! value; `covariance_rank` the rank of J^T J at the solution (n_parameters, less when some
    ! combination of the parameters is not determined by the data and the covariance is the
    ! pseudo-inverse, -1 when no covariance could be formed).
    type, bind(c), public :: tutti_fit_result_t
        real(c_double) :: cost = 0
        integer(c_int) :: iterations = 0
        integer(c_int) :: evaluations = 0
        integer(c_int) :: converged = 0
        integer(c_int) :: termination = 0
        integer(c_int) :: covariance_rank = 0
    end type tutti_fit_result_t

    ! TuttiFmmOptions (tutti_fmm_options_default; see docs/fmm.md).
    type, bind(c), public :: tutti_fmm_options_t
        integer(c_int) :: order
        real(c_double) :: theta
        integer(c_int) :: leaf_size
        real(c_double) :: softening
        integer(c_int) :: f32_far_field
        type(tutti_resources_t) :: resources
        integer(c_int) :: kernels
        integer(c_int) :: fused_multiply_add
        type(tutti_progress_callback_t) :: progress
    end type tutti_fmm_options_t

    ! TuttiSparseOptions (tutti_sparse_options_default). From Fortran set index_base = 1 and
    ! layout = TUTTI_SPARSE_CSC (or CSR) for 1-based arrays. grid_dims(1:3) are the points
    ! along x, y, z of the grid the unknowns live on (x fastest; all 0, the default: nested
    ! dissection of the matrix's graph), grid_periodic(1:3) 1 for an axis that wraps around.
    ! With `resources%world` (tutti_world_from_fcomm) every process analyses, factors and
    ! solves collectively with the same arguments and gets the whole solution (see
    ! tutti_sparse_analyse in tutti.h). dtype: TUTTI_DTYPE_FLOAT64 (default) or
    ! TUTTI_DTYPE_COMPLEX128 (then factor and solve with the _c128 procedures).
    type, bind(c), public :: tutti_sparse_options_t
        type(tutti_resources_t) :: resources
        integer(c_int) :: layout
        integer(c_int) :: index_base
        integer(c_int) :: block
        integer(c_int) :: leaf_size
        integer(c_int) :: grid_dims(3)
        integer(c_int) :: grid_periodic(3)
        real(c_double) :: pivot_tiny
        real(c_double) :: pivot_perturbation
        integer(c_int) :: max_refinements
        real(c_double) :: refinement_target
        integer(c_int) :: dtype
    end type tutti_sparse_options_t

    ! TuttiSparseSolveInfo: what one sparse solve reached (refinement steps, and the largest
    ! backward error over the right-hand sides).
    type, bind(c), public :: tutti_sparse_solve_info_t
        integer(c_int) :: refinements = 0
        real(c_double) :: backward_error = 0
    end type tutti_sparse_solve_info_t

    ! TuttiSparseInfo: what tutti_sparse_info reports about a handle (counts, flops, bytes;
    ! factored is 1 once a factorization succeeded).
    type, bind(c), public :: tutti_sparse_info_t
        integer(c_int64_t) :: unknowns = 0
        integer(c_int64_t) :: matrix_nnz = 0
        integer(c_int64_t) :: factor_nnz = 0
        real(c_double) :: factor_flops = 0
        real(c_double) :: solve_flops = 0
        integer(c_int64_t) :: fronts = 0
        integer(c_int64_t) :: largest_front = 0
        integer(c_int) :: devices = 0
        integer(c_int) :: factored = 0
        integer(c_int64_t) :: perturbed_pivots = 0
        integer(c_int64_t) :: device_bytes = 0
    end type tutti_sparse_info_t

    ! TuttiSrcInfo: the diagnostics tutti_src writes when options%info_out is c_loc of one
    ! (counts, seconds, the norm; exact_fallback is 1 for a 2-site stack contracted exactly).
    type, bind(c), public :: tutti_src_info_t
        integer(c_int64_t) :: sketch_width = 0
        integer(c_int64_t) :: devices = 0
        real(c_double) :: seconds = 0
        integer(c_int) :: exact_fallback = 0
        real(c_double) :: truncated_weight = 0
        real(c_double) :: norm = 0
        integer(c_int64_t) :: qr_distributed = 0
        integer(c_int64_t) :: qr_shifted = 0
        integer(c_int64_t) :: qr_householder = 0
        real(c_double) :: qr_worst_orthogonality = 0
        real(c_double) :: qr_seconds = 0
        integer(c_int64_t) :: environments_on_device = 0
        integer(c_int64_t) :: environments_on_host = 0
        integer(c_int64_t) :: environments_on_disk = 0
        integer(c_int64_t) :: spilled_bytes = 0
    end type tutti_src_info_t

    ! TuttiSrcOptions (tutti_src_options_default; set chi_out). `distributed_qr` nonzero
    ! splits each site's QR among the devices; `info_out` is c_null_ptr or c_loc of a
    ! tutti_src_info_t target, written on success.
    type, bind(c), public :: tutti_src_options_t
        integer(c_int) :: chi_out
        integer(c_int) :: oversample
        real(c_double) :: cutoff
        integer(c_int64_t) :: seed
        type(tutti_resources_t) :: resources
        integer(c_int) :: kernels
        integer(c_int) :: distributed_qr = 0
        type(c_ptr) :: info_out = c_null_ptr
        type(tutti_progress_callback_t) :: progress
    end type tutti_src_options_t

    ! ---------------------------------------------------------------------------------------
    ! Fortran-side types of the wrappers (not bind(C): they hold allocatable components).
    ! ---------------------------------------------------------------------------------------

    ! One device of a selection (tutti_device_info_f): TuttiDeviceInfo with its name copied.
    type, public :: tutti_device_t
        integer(c_int) :: kind = 0
        integer(c_int) :: ordinal = 0
        integer(c_int) :: index = 0
        integer(c_int) :: threads = 0
        integer(c_int64_t) :: free_bytes = 0
        integer(c_int64_t) :: total_bytes = 0
        character(len=:), allocatable :: name
    end type tutti_device_t

    ! An RHF gradient (tutti_rhf_gradient_f): TuttiRhfGradient with its arrays copied.
    ! shells(s) maps shell s (see tutti_gradient_shell_t); the four other arrays have one
    ! element per primitive, in basis order.
    type, public :: tutti_gradient_t
        real(c_double) :: energy = 0
        integer(c_int) :: iterations = 0
        integer(c_int) :: devices = 0
        type(tutti_gradient_shell_t), allocatable :: shells(:)
        real(c_double), allocatable :: exponents(:)
        real(c_double), allocatable :: coefficients(:)
        real(c_double), allocatable :: grad_exponents(:)
        real(c_double), allocatable :: grad_coefficients(:)
        type(tutti_gradient_timings_t) :: timings
    end type tutti_gradient_t

    ! One site of an MPS, in Fortran order: exactly one of f64(Dl, d, Dr) (float64) and
    ! c128(Dl, d, Dr) (complex128) is allocated.
    type, public :: tutti_mps_core_t
        real(c_double), allocatable :: f64(:, :, :)
        complex(c_double_complex), allocatable :: c128(:, :, :)
    end type tutti_mps_core_t

    ! One site of an MPO, in Fortran order: exactly one of f64(Dl, d_out, d_in, Dr) and
    ! c128(Dl, d_out, d_in, Dr) is allocated.
    type, public :: tutti_mpo_core_t
        real(c_double), allocatable :: f64(:, :, :, :)
        complex(c_double_complex), allocatable :: c128(:, :, :, :)
    end type tutti_mpo_core_t

    ! A C-order copy of one core, kept alive (target) while tutti reads it.
    type :: core_buffer
        real(c_double), allocatable :: f64(:)
        complex(c_double_complex), allocatable :: c128(:)
    end type core_buffer

    ! ---------------------------------------------------------------------------------------
    ! The callback of tutti_fit: a bind(C) Fortran function with this interface.
    ! ---------------------------------------------------------------------------------------
    abstract interface
        ! Residuals and Jacobian of experiment `experiment` (0-based) at `parameters`:
        ! residuals(i) = r_i, jacobian(j, i) = d r_i / d parameter_j (C's row-major
        ! jacobian[i * n_parameters + j], so Fortran's first index is the parameter).
        ! `user_data` is the wrapper's (or the raw call's) `user_data`. Return 0 on success,
        ! anything else to reject the point. tutti may call it from several threads at once
        ! for different experiments: declare it `recursive` (so that its locals live on each
        ! thread's stack, and gfortran's -fcheck=recursion does not stop the program), and
        ! keep any state it updates per experiment.
        recursive function tutti_residual_fn(user_data, experiment, parameters, n_parameters, &
                                   residuals, n_residuals, jacobian) bind(c) result(status)
            import :: c_ptr, c_int, c_double
            type(c_ptr), value :: user_data
            integer(c_int), value :: experiment
            integer(c_int), value :: n_parameters
            integer(c_int), value :: n_residuals
            real(c_double), intent(in) :: parameters(n_parameters)
            real(c_double), intent(out) :: residuals(n_residuals)
            real(c_double), intent(out) :: jacobian(n_parameters, n_residuals)
            integer(c_int) :: status
        end function tutti_residual_fn

        ! A progress report (see tutti_progress_t), on the thread of tutti's reporting rank,
        ! between the steps it reports and never concurrently with itself for one call.
        ! `user_data` is the options' progress%user_data. Keep it quick; declare it
        ! `recursive` for the same reason as tutti_residual_fn.
        recursive subroutine tutti_progress_fn(user_data, progress) bind(c)
            import :: c_ptr, tutti_progress_t
            type(c_ptr), value :: user_data
            type(tutti_progress_t), intent(in) :: progress
        end subroutine tutti_progress_fn
    end interface
    public :: tutti_residual_fn, tutti_progress_fn

    ! ---------------------------------------------------------------------------------------
    ! The raw interfaces, one per function of include/tutti.h, in the header's order.
    ! ---------------------------------------------------------------------------------------
    public :: tutti_rhf_options_default, tutti_rhf_energy, tutti_rhf_energy_bohr
    public :: tutti_rhf_matrices_free
    public :: tutti_gradient_options_default, tutti_rhf_gradient, tutti_rhf_gradient_free
    public :: tutti_last_error, tutti_device_count, tutti_device_info
    public :: tutti_fit_options_default, tutti_fit
    public :: tutti_fmm_options_default, tutti_fmm_order_for_accuracy, tutti_fmm
    public :: tutti_fmm_targets
    public :: tutti_direct_sum
    public :: tutti_free_c, tutti_resources_default, tutti_status_name
    public :: tutti_sparse_options_default, tutti_sparse_analyse, tutti_sparse_factor
    public :: tutti_sparse_factor_c128, tutti_sparse_solve, tutti_sparse_solve_c128
    public :: tutti_sparse_info, tutti_sparse_free
    public :: tutti_src_options_default, tutti_src
    public :: tutti_train_from_arrays, tutti_train_from_dir, tutti_train_info
    public :: tutti_train_shapes, tutti_train_site, tutti_train_write_dir, tutti_train_free
    public :: tutti_train_norm, tutti_train_distance, tutti_version
    public :: tutti_world_from_fcomm, tutti_world_info, tutti_world_fail, tutti_world_free

    interface
        function tutti_rhf_options_default(options) &
                bind(c, name="tutti_rhf_options_default") result(status)
            import :: c_int, tutti_rhf_options_t
            type(tutti_rhf_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_rhf_options_default

        ! `options`: c_loc of a tutti_rhf_options_t, or c_null_ptr for the defaults;
        ! `json_out`: c_loc of a type(c_ptr) that receives a JSON string to release with
        ! tutti_free_c, or c_null_ptr.
        function tutti_rhf_energy(xyz_text, basis, options, result_out, json_out) &
                bind(c, name="tutti_rhf_energy") result(status)
            import :: c_int, c_char, c_ptr, tutti_rhf_result_t
            character(kind=c_char), intent(in) :: xyz_text(*)
            character(kind=c_char), intent(in) :: basis(*)
            type(c_ptr), value :: options
            type(tutti_rhf_result_t), intent(inout) :: result_out
            type(c_ptr), value :: json_out
            integer(c_int) :: status
        end function tutti_rhf_energy

        function tutti_rhf_energy_bohr(n_atoms, atomic_numbers, coordinates_bohr, basis, &
                                       options, result_out, json_out) &
                bind(c, name="tutti_rhf_energy_bohr") result(status)
            import :: c_int, c_double, c_char, c_ptr, tutti_rhf_result_t
            integer(c_int), value :: n_atoms
            integer(c_int), intent(in) :: atomic_numbers(*)
            real(c_double), intent(in) :: coordinates_bohr(*)
            character(kind=c_char), intent(in) :: basis(*)
            type(c_ptr), value :: options
            type(tutti_rhf_result_t), intent(inout) :: result_out
            type(c_ptr), value :: json_out
            integer(c_int) :: status
        end function tutti_rhf_energy_bohr

        function tutti_rhf_matrices_free(matrices) bind(c, name="tutti_rhf_matrices_free") &
                result(status)
            import :: c_int, tutti_rhf_matrices_t
            type(tutti_rhf_matrices_t), intent(inout) :: matrices
            integer(c_int) :: status
        end function tutti_rhf_matrices_free

        function tutti_gradient_options_default(options) &
                bind(c, name="tutti_gradient_options_default") result(status)
            import :: c_int, tutti_gradient_options_t
            type(tutti_gradient_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_gradient_options_default

        ! The caller releases `result_out`'s arrays with tutti_rhf_gradient_free.
        function tutti_rhf_gradient(xyz_text, basis, options, result_out, json_out) &
                bind(c, name="tutti_rhf_gradient") result(status)
            import :: c_int, c_char, c_ptr, tutti_rhf_gradient_t
            character(kind=c_char), intent(in) :: xyz_text(*)
            character(kind=c_char), intent(in) :: basis(*)
            type(c_ptr), value :: options
            type(tutti_rhf_gradient_t), intent(inout) :: result_out
            type(c_ptr), value :: json_out
            integer(c_int) :: status
        end function tutti_rhf_gradient

        function tutti_rhf_gradient_free(result) bind(c, name="tutti_rhf_gradient_free") &
                result(status)
            import :: c_int, tutti_rhf_gradient_t
            type(tutti_rhf_gradient_t), intent(inout) :: result
            integer(c_int) :: status
        end function tutti_rhf_gradient_free

        ! The calling thread's last message, borrowed (see tutti_last_error_f).
        function tutti_last_error() bind(c, name="tutti_last_error") result(message)
            import :: c_ptr
            type(c_ptr) :: message
        end function tutti_last_error

        function tutti_device_count(kind, count) bind(c, name="tutti_device_count") &
                result(status)
            import :: c_int
            integer(c_int), value :: kind
            integer(c_int), intent(inout) :: count
            integer(c_int) :: status
        end function tutti_device_count

        ! Describes device `index` (0-based) of a selection of `count` devices of `kind`; the
        ! caller releases info%name with tutti_free_c.
        function tutti_device_info(kind, count, index, info) &
                bind(c, name="tutti_device_info") result(status)
            import :: c_int, tutti_device_info_t
            integer(c_int), value :: kind
            integer(c_int), value :: count
            integer(c_int), value :: index
            type(tutti_device_info_t), intent(inout) :: info
            integer(c_int) :: status
        end function tutti_device_info

        function tutti_fit_options_default(options) &
                bind(c, name="tutti_fit_options_default") result(status)
            import :: c_int, tutti_fit_options_t
            type(tutti_fit_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_fit_options_default

        ! `residual_fn`: c_funloc of a procedure(tutti_residual_fn); `options`: c_loc of a
        ! tutti_fit_options_t or c_null_ptr; `covariance_out`: c_loc of n_parameters**2
        ! doubles or c_null_ptr.
        function tutti_fit(residual_fn, user_data, n_experiments, residual_counts, &
                           n_parameters, initial, options, parameters_out, covariance_out, &
                           result_out) bind(c, name="tutti_fit") result(status)
            import :: c_int, c_double, c_ptr, c_funptr, tutti_fit_result_t
            type(c_funptr), value :: residual_fn
            type(c_ptr), value :: user_data
            integer(c_int), value :: n_experiments
            integer(c_int), intent(in) :: residual_counts(*)
            integer(c_int), value :: n_parameters
            real(c_double), intent(in) :: initial(*)
            type(c_ptr), value :: options
            real(c_double), intent(inout) :: parameters_out(*)
            type(c_ptr), value :: covariance_out
            type(tutti_fit_result_t), intent(inout) :: result_out
            integer(c_int) :: status
        end function tutti_fit

        function tutti_fmm_options_default(options) &
                bind(c, name="tutti_fmm_options_default") result(status)
            import :: c_int, tutti_fmm_options_t
            type(tutti_fmm_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_fmm_options_default

        function tutti_fmm_order_for_accuracy(eps, order_out, measured_error_out) &
                bind(c, name="tutti_fmm_order_for_accuracy") result(status)
            import :: c_int, c_double
            real(c_double), value :: eps
            integer(c_int), intent(inout) :: order_out
            real(c_double), intent(inout) :: measured_error_out
            integer(c_int) :: status
        end function tutti_fmm_order_for_accuracy

        ! `positions`: 3 * n doubles (a (3, n) array); `options`: c_loc or c_null_ptr;
        ! `potential_out` (n doubles), `accel_out` (3 * n): c_loc, or c_null_ptr when unwanted.
        function tutti_fmm(n, positions, masses, options, potential_out, accel_out) &
                bind(c, name="tutti_fmm") result(status)
            import :: c_int, c_int64_t, c_double, c_ptr
            integer(c_int64_t), value :: n
            real(c_double), intent(in) :: positions(*)
            real(c_double), intent(in) :: masses(*)
            type(c_ptr), value :: options
            type(c_ptr), value :: potential_out
            type(c_ptr), value :: accel_out
            integer(c_int) :: status
        end function tutti_fmm

        function tutti_fmm_targets(n_sources, sources, masses, n_targets, targets, options, &
                                   potential_out, accel_out) &
                bind(c, name="tutti_fmm_targets") result(status)
            import :: c_int, c_int64_t, c_double, c_ptr
            integer(c_int64_t), value :: n_sources
            real(c_double), intent(in) :: sources(*)
            real(c_double), intent(in) :: masses(*)
            integer(c_int64_t), value :: n_targets
            real(c_double), intent(in) :: targets(*)
            type(c_ptr), value :: options
            type(c_ptr), value :: potential_out
            type(c_ptr), value :: accel_out
            integer(c_int) :: status
        end function tutti_fmm_targets

        function tutti_direct_sum(n, positions, masses, softening, potential_out, accel_out) &
                bind(c, name="tutti_direct_sum") result(status)
            import :: c_int, c_int64_t, c_double, c_ptr
            integer(c_int64_t), value :: n
            real(c_double), intent(in) :: positions(*)
            real(c_double), intent(in) :: masses(*)
            real(c_double), value :: softening
            type(c_ptr), value :: potential_out
            type(c_ptr), value :: accel_out
            integer(c_int) :: status
        end function tutti_direct_sum

        ! Releases a buffer tutti returned; c_null_ptr is a no-op.
        function tutti_free_c(ptr) bind(c, name="tutti_free_c") result(status)
            import :: c_ptr, c_int
            type(c_ptr), value :: ptr
            integer(c_int) :: status
        end function tutti_free_c

        function tutti_resources_default(resources) bind(c, name="tutti_resources_default") &
                result(status)
            import :: c_int, tutti_resources_t
            type(tutti_resources_t), intent(out) :: resources
            integer(c_int) :: status
        end function tutti_resources_default

        function tutti_sparse_options_default(options) &
                bind(c, name="tutti_sparse_options_default") result(status)
            import :: c_int, tutti_sparse_options_t
            type(tutti_sparse_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_sparse_options_default

        ! `pointers`: n + 1 entries; `indices`: pointers(n + 1) - index_base entries;
        ! `options`: c_loc of a tutti_sparse_options_t, or c_null_ptr for the defaults (0-based
        ! CSR); `handle_out` receives a new handle, to release with tutti_sparse_free.
        function tutti_sparse_analyse(n, pointers, indices, options, handle_out) &
                bind(c, name="tutti_sparse_analyse") result(status)
            import :: c_int, c_int64_t, c_ptr
            integer(c_int64_t), value :: n
            integer(c_int64_t), intent(in) :: pointers(*)
            integer(c_int64_t), intent(in) :: indices(*)
            type(c_ptr), value :: options
            type(c_ptr), intent(inout) :: handle_out
            integer(c_int) :: status
        end function tutti_sparse_analyse

        function tutti_sparse_factor(handle, values, nnz) bind(c, name="tutti_sparse_factor") &
                result(status)
            import :: c_int, c_int64_t, c_double, c_ptr
            type(c_ptr), value :: handle
            real(c_double), intent(in) :: values(*)
            integer(c_int64_t), value :: nnz
            integer(c_int) :: status
        end function tutti_sparse_factor

        ! `values`: nnz complex values (C's 2 * nnz doubles, real part first), for a handle
        ! analysed with options%dtype = TUTTI_DTYPE_COMPLEX128.
        function tutti_sparse_factor_c128(handle, values, nnz) &
                bind(c, name="tutti_sparse_factor_c128") result(status)
            import :: c_int, c_int64_t, c_double_complex, c_ptr
            type(c_ptr), value :: handle
            complex(c_double_complex), intent(in) :: values(*)
            integer(c_int64_t), value :: nnz
            integer(c_int) :: status
        end function tutti_sparse_factor_c128

        ! `b`: n * n_rhs doubles, an (n, n_rhs) array, overwritten by the solutions on
        ! success; `info_out`: c_loc of a tutti_sparse_solve_info_t, or c_null_ptr.
        function tutti_sparse_solve(handle, b, n_rhs, info_out) &
                bind(c, name="tutti_sparse_solve") result(status)
            import :: c_int, c_int64_t, c_double, c_ptr
            type(c_ptr), value :: handle
            real(c_double), intent(inout) :: b(*)
            integer(c_int64_t), value :: n_rhs
            type(c_ptr), value :: info_out
            integer(c_int) :: status
        end function tutti_sparse_solve

        ! `b`: n * n_rhs complex values (C's 2 * n * n_rhs doubles), an (n, n_rhs) array,
        ! overwritten by the solutions on success; `info_out` as for tutti_sparse_solve.
        function tutti_sparse_solve_c128(handle, b, n_rhs, info_out) &
                bind(c, name="tutti_sparse_solve_c128") result(status)
            import :: c_int, c_int64_t, c_double_complex, c_ptr
            type(c_ptr), value :: handle
            complex(c_double_complex), intent(inout) :: b(*)
            integer(c_int64_t), value :: n_rhs
            type(c_ptr), value :: info_out
            integer(c_int) :: status
        end function tutti_sparse_solve_c128

        function tutti_sparse_info(handle, info_out) bind(c, name="tutti_sparse_info") &
                result(status)
            import :: c_int, c_ptr, tutti_sparse_info_t
            type(c_ptr), value :: handle
            type(tutti_sparse_info_t), intent(inout) :: info_out
            integer(c_int) :: status
        end function tutti_sparse_info

        ! Releases a handle; c_null_ptr is a no-op.
        function tutti_sparse_free(handle) bind(c, name="tutti_sparse_free") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: handle
            integer(c_int) :: status
        end function tutti_sparse_free

        ! The static name of a status value (not to be released).
        function tutti_status_name(status) bind(c, name="tutti_status_name") result(name)
            import :: c_ptr, c_int
            integer(c_int), value :: status
            type(c_ptr) :: name
        end function tutti_status_name

        function tutti_src_options_default(options) &
                bind(c, name="tutti_src_options_default") result(status)
            import :: c_int, tutti_src_options_t
            type(tutti_src_options_t), intent(out) :: options
            integer(c_int) :: status
        end function tutti_src_options_default

        ! `stack`: n train handles in mathematical order; `out` receives a new train.
        function tutti_src(stack, n, options, out) bind(c, name="tutti_src") result(status)
            import :: c_int, c_ptr
            type(c_ptr), intent(in) :: stack(*)
            integer(c_int), value :: n
            type(c_ptr), value :: options
            type(c_ptr), intent(inout) :: out
            integer(c_int) :: status
        end function tutti_src

        ! `cores`: n_sites c_loc's of C-order cores (see tutti_train_from_arrays_f).
        function tutti_train_from_arrays(kind, dtype, n_sites, shapes, cores, out) &
                bind(c, name="tutti_train_from_arrays") result(status)
            import :: c_int, c_ptr
            integer(c_int), value :: kind
            integer(c_int), value :: dtype
            integer(c_int), value :: n_sites
            integer(c_int), intent(in) :: shapes(*)
            type(c_ptr), intent(in) :: cores(*)
            type(c_ptr), intent(inout) :: out
            integer(c_int) :: status
        end function tutti_train_from_arrays

        function tutti_train_from_dir(path, out) bind(c, name="tutti_train_from_dir") &
                result(status)
            import :: c_int, c_char, c_ptr
            character(kind=c_char), intent(in) :: path(*)
            type(c_ptr), intent(inout) :: out
            integer(c_int) :: status
        end function tutti_train_from_dir

        function tutti_train_info(train, kind, dtype, n_sites) &
                bind(c, name="tutti_train_info") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: train
            integer(c_int), intent(inout) :: kind
            integer(c_int), intent(inout) :: dtype
            integer(c_int), intent(inout) :: n_sites
            integer(c_int) :: status
        end function tutti_train_info

        function tutti_train_shapes(train, shapes, len) bind(c, name="tutti_train_shapes") &
                result(status)
            import :: c_int, c_size_t, c_ptr
            type(c_ptr), value :: train
            integer(c_int), intent(inout) :: shapes(*)
            integer(c_size_t), value :: len
            integer(c_int) :: status
        end function tutti_train_shapes

        ! Copies site `site` (0-based) in C order; complex128 as (re, im) pairs.
        function tutti_train_site(train, site, data, len) bind(c, name="tutti_train_site") &
                result(status)
            import :: c_int, c_size_t, c_double, c_ptr
            type(c_ptr), value :: train
            integer(c_int), value :: site
            real(c_double), intent(inout) :: data(*)
            integer(c_size_t), value :: len
            integer(c_int) :: status
        end function tutti_train_site

        function tutti_train_write_dir(train, path) bind(c, name="tutti_train_write_dir") &
                result(status)
            import :: c_int, c_char, c_ptr
            type(c_ptr), value :: train
            character(kind=c_char), intent(in) :: path(*)
            integer(c_int) :: status
        end function tutti_train_write_dir

        function tutti_train_free(train) bind(c, name="tutti_train_free") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: train
            integer(c_int) :: status
        end function tutti_train_free

        function tutti_train_norm(train, norm_out) bind(c, name="tutti_train_norm") &
                result(status)
            import :: c_int, c_double, c_ptr
            type(c_ptr), value :: train
            real(c_double), intent(inout) :: norm_out
            integer(c_int) :: status
        end function tutti_train_norm

        function tutti_train_distance(a, b, distance_out) &
                bind(c, name="tutti_train_distance") result(status)
            import :: c_int, c_double, c_ptr
            type(c_ptr), value :: a
            type(c_ptr), value :: b
            real(c_double), intent(inout) :: distance_out
            integer(c_int) :: status
        end function tutti_train_distance

        function tutti_version(major, minor, patch) bind(c, name="tutti_version") &
                result(status)
            import :: c_int
            integer(c_int), intent(inout) :: major
            integer(c_int), intent(inout) :: minor
            integer(c_int), intent(inout) :: patch
            integer(c_int) :: status
        end function tutti_version

        ! Adopts an MPI communicator given as its Fortran handle (collective over it); a
        ! library built without MPI returns TUTTI_ERROR_UNSUPPORTED.
        function tutti_world_from_fcomm(fcomm, world_out) &
                bind(c, name="tutti_world_from_fcomm") result(status)
            import :: c_int, c_int32_t, c_ptr
            integer(c_int32_t), value :: fcomm
            type(c_ptr), intent(inout) :: world_out
            integer(c_int) :: status
        end function tutti_world_from_fcomm

        function tutti_world_info(world, rank, size, local_rank, local_size) &
                bind(c, name="tutti_world_info") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: world
            integer(c_int), intent(inout) :: rank
            integer(c_int), intent(inout) :: size
            integer(c_int), intent(inout) :: local_rank
            integer(c_int), intent(inout) :: local_size
            integer(c_int) :: status
        end function tutti_world_info

        ! `message`: NUL-terminated, "text"//c_null_char.
        function tutti_world_fail(world, message) bind(c, name="tutti_world_fail") &
                result(status)
            import :: c_int, c_ptr, c_char
            type(c_ptr), value :: world
            character(kind=c_char), intent(in) :: message(*)
            integer(c_int) :: status
        end function tutti_world_fail

        ! Releases a world (collective); c_null_ptr is a no-op.
        function tutti_world_free(world) bind(c, name="tutti_world_free") result(status)
            import :: c_int, c_ptr
            type(c_ptr), value :: world
            integer(c_int) :: status
        end function tutti_world_free

        ! The C library's strlen, to copy tutti's strings.
        function c_strlen(text) bind(c, name="strlen") result(length)
            import :: c_ptr, c_size_t
            type(c_ptr), value :: text
            integer(c_size_t) :: length
        end function c_strlen
    end interface

    ! ---------------------------------------------------------------------------------------
    ! The wrappers: tutti_X_f for every tutti_X.
    ! ---------------------------------------------------------------------------------------
    public :: tutti_string
    public :: tutti_rhf_options_default_f, tutti_rhf_energy_f, tutti_rhf_energy_bohr_f
    public :: tutti_rhf_matrices_free_f
    public :: tutti_gradient_options_default_f, tutti_rhf_gradient_f, tutti_rhf_gradient_free_f
    public :: tutti_last_error_f, tutti_device_count_f, tutti_device_info_f
    public :: tutti_fit_options_default_f, tutti_fit_f
    public :: tutti_fmm_options_default_f, tutti_fmm_order_for_accuracy_f, tutti_fmm_f, tutti_fmm_targets_f
    public :: tutti_direct_sum_f
    public :: tutti_free_c_f, tutti_resources_default_f, tutti_status_name_f
    public :: tutti_sparse_options_default_f, tutti_sparse_analyse_f, tutti_sparse_factor_f
    public :: tutti_sparse_factor_c128_f, tutti_sparse_solve_f, tutti_sparse_solve_c128_f
    public :: tutti_sparse_info_f, tutti_sparse_free_f
    public :: tutti_src_options_default_f, tutti_src_f
    public :: tutti_train_from_arrays_f, tutti_train_from_dir_f, tutti_train_info_f
    public :: tutti_train_shapes_f, tutti_train_site_f, tutti_train_write_dir_f
    public :: tutti_train_free_f, tutti_train_norm_f, tutti_train_distance_f, tutti_version_f
    public :: tutti_world_from_fcomm_f, tutti_world_info_f, tutti_world_fail_f
    public :: tutti_world_free_f

    ! A train from Fortran-order cores: an array of tutti_mps_core_t or of tutti_mpo_core_t.
    interface tutti_train_from_arrays_f
        module procedure train_from_mps_cores, train_from_mpo_cores
    end interface tutti_train_from_arrays_f

    ! One site of a train into a tutti_mps_core_t or a tutti_mpo_core_t.
    interface tutti_train_site_f
        module procedure train_site_mps, train_site_mpo
    end interface tutti_train_site_f

    ! A sparse solve in place: one right-hand side b(n) or several, b(n, n_rhs).
    interface tutti_sparse_solve_f
        module procedure sparse_solve_one, sparse_solve_many
    end interface tutti_sparse_solve_f

    ! A complex sparse solve in place: one right-hand side b(n) or several, b(n, n_rhs).
    interface tutti_sparse_solve_c128_f
        module procedure sparse_solve_c128_one, sparse_solve_c128_many
    end interface tutti_sparse_solve_c128_f

contains

    ! ------------------------------------------------------------------ strings and errors

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

    ! A copy of the calling thread's last message: '' after a successful call.
    function tutti_last_error_f() result(text)
        character(len=:), allocatable :: text
        text = tutti_string(tutti_last_error())
    end function tutti_last_error_f

    ! The name of a status value, e.g. 'TUTTI_ERROR_NULL_POINTER' for -2.
    function tutti_status_name_f(status) result(name)
        integer(c_int), intent(in) :: status
        character(len=:), allocatable :: name
        name = tutti_string(tutti_status_name(status))
    end function tutti_status_name_f

    ! `text` without trailing blanks, NUL-terminated, for C.
    function c_string(text) result(chars)
        character(len=*), intent(in) :: text
        character(kind=c_char, len=:), allocatable :: chars
        chars = trim(text) // c_null_char
    end function c_string

    ! Hands a C status to the caller: into `status` when present, else a failure stops the
    ! program with tutti's message.
    subroutine finish(code, wrapper, status)
        integer(c_int), intent(in) :: code
        character(len=*), intent(in) :: wrapper
        integer(c_int), intent(out), optional :: status

        if (present(status)) then
            status = code
        else if (code /= TUTTI_OK) then
            write (error_unit, '(a)') wrapper // ': ' // tutti_status_name_f(code) // ': ' &
                // tutti_last_error_f()
            error stop
        end if
    end subroutine finish

    ! Stops the program: the Fortran arguments of `wrapper` disagree with each other.
    subroutine misuse(wrapper, what)
        character(len=*), intent(in) :: wrapper, what
        write (error_unit, '(a)') wrapper // ': ' // what
        error stop
    end subroutine misuse

    ! c_loc of an options argument, or c_null_ptr (the defaults) when it is absent.
    function fit_options_ptr(options) result(ptr)
        type(tutti_fit_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function fit_options_ptr

    function fmm_options_ptr(options) result(ptr)
        type(tutti_fmm_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function fmm_options_ptr

    function rhf_options_ptr(options) result(ptr)
        type(tutti_rhf_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function rhf_options_ptr

    function gradient_options_ptr(options) result(ptr)
        type(tutti_gradient_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function gradient_options_ptr

    function src_options_ptr(options) result(ptr)
        type(tutti_src_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function src_options_ptr

    function sparse_options_ptr(options) result(ptr)
        type(tutti_sparse_options_t), intent(in), optional, target :: options
        type(c_ptr) :: ptr
        ptr = c_null_ptr
        if (present(options)) ptr = c_loc(options)
    end function sparse_options_ptr

    ! Releases a string tutti returned (after the caller copied it).
    subroutine release_string(ptr)
        type(c_ptr), intent(inout) :: ptr
        integer(c_int) :: ignored

        ignored = tutti_free_c(ptr)
        ptr = c_null_ptr
    end subroutine release_string

    ! ------------------------------------------------------------ version, devices, memory

    ! The library's version (compare with TUTTI_VERSION_*).
    subroutine tutti_version_f(major, minor, patch, status)
        integer(c_int), intent(out) :: major, minor, patch
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: values(3)

        values = -1
        call finish(tutti_version(values(1), values(2), values(3)), 'tutti_version_f', status)
        major = values(1)
        minor = values(2)
        patch = values(3)
    end subroutine tutti_version_f

    ! The default resources: TUTTI_KIND_AUTO, TUTTI_ALL_DEVICES, no ordinals, no caps.
    subroutine tutti_resources_default_f(resources, status)
        type(tutti_resources_t), intent(out) :: resources
        integer(c_int), intent(out), optional :: status
        call finish(tutti_resources_default(resources), 'tutti_resources_default_f', status)
    end subroutine tutti_resources_default_f

    ! How many devices of `kind` a computation may use by default (see tutti.h).
    subroutine tutti_device_count_f(kind, count, status)
        integer(c_int), intent(in) :: kind
        integer(c_int), intent(inout) :: count
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code, found

        found = 0
        code = tutti_device_count(kind, found)
        if (code == TUTTI_OK) count = found
        call finish(code, 'tutti_device_count_f', status)
    end subroutine tutti_device_count_f

    ! Describes device `index` (0-based) of a selection of the first `count` devices of
    ! `kind`; the name is copied into device%name and tutti's copy released.
    subroutine tutti_device_info_f(kind, count, index, device, status)
        integer(c_int), intent(in) :: kind, count, index
        type(tutti_device_t), intent(inout) :: device
        integer(c_int), intent(out), optional :: status
        type(tutti_device_info_t) :: info
        integer(c_int) :: code

        code = tutti_device_info(kind, count, index, info)
        if (code == TUTTI_OK) then
            device%kind = info%kind
            device%ordinal = info%ordinal
            device%index = info%index
            device%threads = info%threads
            device%free_bytes = info%free_bytes
            device%total_bytes = info%total_bytes
            device%name = tutti_string(info%name)
            code = tutti_free_c(info%name)
        end if
        call finish(code, 'tutti_device_info_f', status)
    end subroutine tutti_device_info_f

    ! Releases a buffer tutti returned and sets `ptr` to c_null_ptr; c_null_ptr is a no-op.
    subroutine tutti_free_c_f(ptr, status)
        type(c_ptr), intent(inout) :: ptr
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        code = tutti_free_c(ptr)
        if (code == TUTTI_OK) ptr = c_null_ptr
        call finish(code, 'tutti_free_c_f', status)
    end subroutine tutti_free_c_f

    ! --------------------------------------------------------------------------------- fit

    subroutine tutti_fit_options_default_f(options, status)
        type(tutti_fit_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_fit_options_default(options), 'tutti_fit_options_default_f', status)
    end subroutine tutti_fit_options_default_f

    ! Fits size(initial) parameters to size(residual_counts) experiments by
    ! Levenberg-Marquardt; experiment e (0-based) has residual_counts(e + 1) residuals, which
    ! `residual_fn` computes (see tutti_residual_fn), receiving `user_data` (default
    ! c_null_ptr). `lower` and `upper` (each size(initial) values, optional: unbounded on that
    ! side) bound the parameters, lower(i) <= parameters(i) <= upper(i), with
    ! ieee_value(x, ieee_negative_inf) (ieee_positive_inf) for no bound on one side of one
    ! parameter and lower(i) == upper(i) to fix it; `initial` must lie inside them (bad
    ! bounds are TUTTI_ERROR_INVALID_ARGUMENT). They replace options%lower and
    ! options%upper; a size other than size(initial) stops the program. They come after
    ! `status`, the one exception to the rule, so that calls passing `status` by position
    ! (from before the bounds) keep working: pass them by keyword. On success `parameters` holds the solution,
    ! `result` the diagnostics (result%covariance_rank the rank of J^T J, result%termination
    ! why it stopped) and `covariance` (n, n) the inverse of J^T J at the solution: its
    ! pseudo-inverse when J^T J is singular (result%covariance_rank < n), which is not an
    ! error.
    subroutine tutti_fit_f(residual_fn, residual_counts, initial, parameters, result, &
                           covariance, options, user_data, status, lower, upper)
        procedure(tutti_residual_fn) :: residual_fn
        integer(c_int), intent(in) :: residual_counts(:)
        real(c_double), intent(in) :: initial(:)
        real(c_double), allocatable, intent(out) :: parameters(:)
        type(tutti_fit_result_t), intent(inout), optional :: result
        real(c_double), allocatable, intent(out), optional :: covariance(:, :)
        type(tutti_fit_options_t), intent(in), optional, target :: options
        type(c_ptr), intent(in), optional :: user_data
        integer(c_int), intent(out), optional :: status
        real(c_double), intent(in), optional :: lower(:), upper(:)
        real(c_double), allocatable :: solution(:)
        real(c_double), allocatable, target :: inverse(:, :), lower_c(:), upper_c(:)
        type(tutti_fit_options_t), target :: bounded
        type(tutti_fit_result_t) :: diagnostics
        type(c_ptr) :: data, covariance_ptr, options_c
        integer(c_int) :: code, n
        character(len=80) :: shapes

        n = int(size(initial), c_int)
        allocate (solution(max(n, 1_c_int)))
        data = c_null_ptr
        if (present(user_data)) data = user_data
        covariance_ptr = c_null_ptr
        if (present(covariance) .and. n > 0) then
            allocate (inverse(n, n))
            covariance_ptr = c_loc(inverse)
        end if
        options_c = fit_options_ptr(options)
        if (present(lower) .or. present(upper)) then
            if (present(options)) then
                bounded = options
            else
                code = tutti_fit_options_default(bounded)
            end if
            ! Contiguous copies for C; with no parameter tutti refuses n_parameters anyway.
            if (present(lower) .and. n > 0) then
                if (size(lower) /= n) then
                    write (shapes, '(a, i0, a, i0)') 'size(lower) is ', size(lower), &
                        ', not size(initial) = ', n
                    call misuse('tutti_fit_f', trim(shapes))
                end if
                lower_c = lower
                bounded%lower = c_loc(lower_c)
            end if
            if (present(upper) .and. n > 0) then
                if (size(upper) /= n) then
                    write (shapes, '(a, i0, a, i0)') 'size(upper) is ', size(upper), &
                        ', not size(initial) = ', n
                    call misuse('tutti_fit_f', trim(shapes))
                end if
                upper_c = upper
                bounded%upper = c_loc(upper_c)
            end if
            options_c = c_loc(bounded)
        end if
        code = tutti_fit(c_funloc(residual_fn), data, int(size(residual_counts), c_int), &
                         residual_counts, n, initial, options_c, solution, &
                         covariance_ptr, diagnostics)
        if (code == TUTTI_OK) then
            parameters = solution(1:n)
            ! C's row-major inverse is its transpose in Fortran; J^T J is symmetric anyway.
            if (present(covariance)) covariance = transpose(inverse)
            if (present(result)) result = diagnostics
        end if
        call finish(code, 'tutti_fit_f', status)
    end subroutine tutti_fit_f

    ! --------------------------------------------------------------------------------- fmm

    subroutine tutti_fmm_options_default_f(options, status)
        type(tutti_fmm_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_fmm_options_default(options), 'tutti_fmm_options_default_f', status)
    end subroutine tutti_fmm_options_default_f

    ! The lowest expansion order whose measured relative L2 error on accelerations (at the
    ! default theta) is at most `eps`, and that error; set options%order from it.
    subroutine tutti_fmm_order_for_accuracy_f(eps, order, measured_error, status)
        real(c_double), intent(in) :: eps
        integer(c_int), intent(inout) :: order
        real(c_double), intent(inout), optional :: measured_error
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code, found
        real(c_double) :: error

        found = -1
        error = -1
        code = tutti_fmm_order_for_accuracy(eps, found, error)
        if (code == TUTTI_OK) then
            order = found
            if (present(measured_error)) measured_error = error
        end if
        call finish(code, 'tutti_fmm_order_for_accuracy_f', status)
    end subroutine tutti_fmm_order_for_accuracy_f

    ! Potentials and accelerations of n = size(masses) bodies by the fast multipole method:
    ! positions(:, i) is body i; potential(i) and accel(:, i) are its results (each computed
    ! only when present). `options` absent: the defaults.
    subroutine tutti_fmm_f(positions, masses, potential, accel, options, status)
        real(c_double), intent(in) :: positions(:, :)
        real(c_double), intent(in) :: masses(:)
        real(c_double), allocatable, intent(out), optional :: potential(:)
        real(c_double), allocatable, intent(out), optional :: accel(:, :)
        type(tutti_fmm_options_t), intent(in), optional, target :: options
        integer(c_int), intent(out), optional :: status
        real(c_double), allocatable, target :: phi(:), acc(:, :)
        type(c_ptr) :: phi_ptr, acc_ptr
        integer(c_int) :: code

        call check_bodies('tutti_fmm_f', positions, masses)
        call body_outputs(size(masses), present(potential), present(accel), phi, acc, &
                          phi_ptr, acc_ptr)
        code = tutti_fmm(int(size(masses), c_int64_t), positions, masses, &
                         fmm_options_ptr(options), phi_ptr, acc_ptr)
        if (code == TUTTI_OK) then
            if (present(potential)) call move_alloc(phi, potential)
            if (present(accel)) call move_alloc(acc, accel)
        end if
        call finish(code, 'tutti_fmm_f', status)
    end subroutine tutti_fmm_f

    ! The potential and acceleration that the bodies (sources(:, j), masses(j)) produce at
    ! each target targets(:, i), by the FMM (tutti_fmm_targets): a source at exactly a
    ! target's position is left out of that target's sum. `potential` gets size(targets, 2)
    ! values, `accel` (3, size(targets, 2)).
    subroutine tutti_fmm_targets_f(sources, masses, targets, potential, accel, options, status)
        real(c_double), intent(in) :: sources(:, :)
        real(c_double), intent(in) :: masses(:)
        real(c_double), intent(in) :: targets(:, :)
        real(c_double), allocatable, intent(out), optional :: potential(:)
        real(c_double), allocatable, intent(out), optional :: accel(:, :)
        type(tutti_fmm_options_t), intent(in), optional, target :: options
        integer(c_int), intent(out), optional :: status
        real(c_double), allocatable, target :: phi(:), acc(:, :)
        type(c_ptr) :: phi_ptr, acc_ptr
        integer(c_int) :: code
        character(len=80) :: shapes

        call check_bodies('tutti_fmm_targets_f', sources, masses)
        if (size(targets, 1) /= 3) then
            write (shapes, '(a, i0, a, i0, a)') 'targets is ', size(targets, 1), ' x ', &
                size(targets, 2), ', not 3 x m'
            call misuse('tutti_fmm_targets_f', trim(shapes))
        end if
        call body_outputs(size(targets, 2), present(potential), present(accel), phi, acc, &
                          phi_ptr, acc_ptr)
        code = tutti_fmm_targets(int(size(masses), c_int64_t), sources, masses, &
                                 int(size(targets, 2), c_int64_t), targets, &
                                 fmm_options_ptr(options), phi_ptr, acc_ptr)
        if (code == TUTTI_OK) then
            if (present(potential)) call move_alloc(phi, potential)
            if (present(accel)) call move_alloc(acc, accel)
        end if
        call finish(code, 'tutti_fmm_targets_f', status)
    end subroutine tutti_fmm_targets_f

    ! The same quantities by the direct O(n^2) sum, with Plummer softening `softening`.
    subroutine tutti_direct_sum_f(positions, masses, softening, potential, accel, status)
        real(c_double), intent(in) :: positions(:, :)
        real(c_double), intent(in) :: masses(:)
        real(c_double), intent(in) :: softening
        real(c_double), allocatable, intent(out), optional :: potential(:)
        real(c_double), allocatable, intent(out), optional :: accel(:, :)
        integer(c_int), intent(out), optional :: status
        real(c_double), allocatable, target :: phi(:), acc(:, :)
        type(c_ptr) :: phi_ptr, acc_ptr
        integer(c_int) :: code

        call check_bodies('tutti_direct_sum_f', positions, masses)
        call body_outputs(size(masses), present(potential), present(accel), phi, acc, &
                          phi_ptr, acc_ptr)
        code = tutti_direct_sum(int(size(masses), c_int64_t), positions, masses, softening, &
                                phi_ptr, acc_ptr)
        if (code == TUTTI_OK) then
            if (present(potential)) call move_alloc(phi, potential)
            if (present(accel)) call move_alloc(acc, accel)
        end if
        call finish(code, 'tutti_direct_sum_f', status)
    end subroutine tutti_direct_sum_f

    subroutine check_bodies(wrapper, positions, masses)
        character(len=*), intent(in) :: wrapper
        real(c_double), intent(in) :: positions(:, :), masses(:)
        character(len=80) :: shapes

        if (size(positions, 1) /= 3 .or. size(positions, 2) /= size(masses)) then
            write (shapes, '(a, i0, a, i0, a, i0)') 'positions is ', size(positions, 1), &
                ' x ', size(positions, 2), ', not 3 x size(masses) = 3 x ', size(masses)
            call misuse(wrapper, trim(shapes))
        end if
    end subroutine check_bodies

    ! The outputs of n bodies that are wanted, and the pointers tutti writes through.
    subroutine body_outputs(n, want_potential, want_accel, phi, acc, phi_ptr, acc_ptr)
        integer, intent(in) :: n
        logical, intent(in) :: want_potential, want_accel
        real(c_double), allocatable, target, intent(inout) :: phi(:), acc(:, :)
        type(c_ptr), intent(out) :: phi_ptr, acc_ptr

        phi_ptr = c_null_ptr
        acc_ptr = c_null_ptr
        if (want_potential) then
            allocate (phi(n))
            if (n > 0) phi_ptr = c_loc(phi)
        end if
        if (want_accel) then
            allocate (acc(3, n))
            if (n > 0) acc_ptr = c_loc(acc)
        end if
    end subroutine body_outputs

    ! --------------------------------------------------------------------------------- rhf

    subroutine tutti_rhf_options_default_f(options, status)
        type(tutti_rhf_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_rhf_options_default(options), 'tutti_rhf_options_default_f', status)
    end subroutine tutti_rhf_options_default_f

    ! The closed-shell RHF energy of the molecule in `xyz_text` (the text of an XYZ file,
    ! Angstrom; lines separated by new_line('a')) in the basis `basis` (a shipped name or an
    ! NWChem file's path). `json`, when present, receives the JSON summary.
    subroutine tutti_rhf_energy_f(xyz_text, basis, result, options, json, status)
        character(len=*), intent(in) :: xyz_text, basis
        type(tutti_rhf_result_t), intent(inout) :: result
        type(tutti_rhf_options_t), intent(in), optional, target :: options
        character(len=:), allocatable, intent(inout), optional :: json
        integer(c_int), intent(out), optional :: status
        type(tutti_rhf_result_t) :: computed
        type(c_ptr), target :: json_ptr
        type(c_ptr) :: json_out
        integer(c_int) :: code

        json_ptr = c_null_ptr
        json_out = c_null_ptr
        if (present(json)) json_out = c_loc(json_ptr)
        code = tutti_rhf_energy(c_string(xyz_text), c_string(basis), rhf_options_ptr(options), &
                                computed, json_out)
        if (code == TUTTI_OK) then
            result = computed
            if (present(json)) json = tutti_string(json_ptr)
            call release_string(json_ptr)
        end if
        call finish(code, 'tutti_rhf_energy_f', status)
    end subroutine tutti_rhf_energy_f

    ! tutti_rhf_energy_f for atoms given as atomic numbers (1 = H) and coordinates in bohr:
    ! atom i is atomic_numbers(i) at coordinates_bohr(:, i).
    subroutine tutti_rhf_energy_bohr_f(atomic_numbers, coordinates_bohr, basis, result, &
                                       options, json, status)
        integer(c_int), intent(in) :: atomic_numbers(:)
        real(c_double), intent(in) :: coordinates_bohr(:, :)
        character(len=*), intent(in) :: basis
        type(tutti_rhf_result_t), intent(inout) :: result
        type(tutti_rhf_options_t), intent(in), optional, target :: options
        character(len=:), allocatable, intent(inout), optional :: json
        integer(c_int), intent(out), optional :: status
        type(tutti_rhf_result_t) :: computed
        type(c_ptr), target :: json_ptr
        type(c_ptr) :: json_out
        integer(c_int) :: code

        if (size(coordinates_bohr, 1) /= 3 .or. &
            size(coordinates_bohr, 2) /= size(atomic_numbers)) then
            call misuse('tutti_rhf_energy_bohr_f', &
                        'coordinates_bohr is not 3 x size(atomic_numbers)')
        end if
        json_ptr = c_null_ptr
        json_out = c_null_ptr
        if (present(json)) json_out = c_loc(json_ptr)
        code = tutti_rhf_energy_bohr(int(size(atomic_numbers), c_int), atomic_numbers, &
                                     coordinates_bohr, c_string(basis), &
                                     rhf_options_ptr(options), computed, json_out)
        if (code == TUTTI_OK) then
            result = computed
            if (present(json)) json = tutti_string(json_ptr)
            call release_string(json_ptr)
        end if
        call finish(code, 'tutti_rhf_energy_bohr_f', status)
    end subroutine tutti_rhf_energy_bohr_f

    subroutine tutti_gradient_options_default_f(options, status)
        type(tutti_gradient_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_gradient_options_default(options), &
                    'tutti_gradient_options_default_f', status)
    end subroutine tutti_gradient_options_default_f

    ! The RHF energy and its gradient with respect to every primitive exponent and library
    ! contraction coefficient (inputs as for tutti_rhf_energy_f). On success `gradient`
    ! holds copies of tutti's arrays, which are released before the return.
    subroutine tutti_rhf_gradient_f(xyz_text, basis, gradient, options, json, status)
        character(len=*), intent(in) :: xyz_text, basis
        type(tutti_gradient_t), intent(inout) :: gradient
        type(tutti_gradient_options_t), intent(in), optional, target :: options
        character(len=:), allocatable, intent(inout), optional :: json
        integer(c_int), intent(out), optional :: status
        type(tutti_rhf_gradient_t) :: raw
        type(tutti_gradient_shell_t), pointer :: shells(:)
        type(c_ptr), target :: json_ptr
        type(c_ptr) :: json_out
        integer(c_int) :: code

        json_ptr = c_null_ptr
        json_out = c_null_ptr
        if (present(json)) json_out = c_loc(json_ptr)
        code = tutti_rhf_gradient(c_string(xyz_text), c_string(basis), &
                                  gradient_options_ptr(options), raw, json_out)
        if (code == TUTTI_OK) then
            gradient%energy = raw%energy
            gradient%iterations = raw%iterations
            gradient%devices = raw%devices
            gradient%timings = raw%timings
            if (raw%n_shells > 0) then
                call c_f_pointer(raw%shells, shells, [raw%n_shells])
                gradient%shells = shells
            else
                allocate (gradient%shells(0))
            end if
            gradient%exponents = c_doubles(raw%exponents, raw%n_primitives)
            gradient%coefficients = c_doubles(raw%coefficients, raw%n_primitives)
            gradient%grad_exponents = c_doubles(raw%grad_exponents, raw%n_primitives)
            gradient%grad_coefficients = c_doubles(raw%grad_coefficients, raw%n_primitives)
            code = tutti_rhf_gradient_free(raw)
            if (present(json)) json = tutti_string(json_ptr)
            call release_string(json_ptr)
        end if
        call finish(code, 'tutti_rhf_gradient_f', status)
    end subroutine tutti_rhf_gradient_f

    ! A copy of the `n` doubles tutti allocated at `ptr`.
    function c_doubles(ptr, n) result(copy)
        type(c_ptr), intent(in) :: ptr
        integer(c_int), intent(in) :: n
        real(c_double), allocatable :: copy(:)
        real(c_double), pointer :: values(:)

        allocate (copy(max(n, 0_c_int)))
        if (n <= 0) return
        call c_f_pointer(ptr, values, [n])
        copy = values
    end function c_doubles

    ! Releases the arrays of a tutti_rhf_matrices_t and resets it (a no-op when reset).
    subroutine tutti_rhf_matrices_free_f(matrices, status)
        type(tutti_rhf_matrices_t), intent(inout) :: matrices
        integer(c_int), intent(out), optional :: status
        call finish(tutti_rhf_matrices_free(matrices), 'tutti_rhf_matrices_free_f', status)
    end subroutine tutti_rhf_matrices_free_f

    ! Releases the arrays of a raw tutti_rhf_gradient_t and resets it (a no-op when reset).
    subroutine tutti_rhf_gradient_free_f(result, status)
        type(tutti_rhf_gradient_t), intent(inout) :: result
        integer(c_int), intent(out), optional :: status
        call finish(tutti_rhf_gradient_free(result), 'tutti_rhf_gradient_free_f', status)
    end subroutine tutti_rhf_gradient_free_f

    ! ------------------------------------------------------------------------------ sparse

    subroutine tutti_sparse_options_default_f(options, status)
        type(tutti_sparse_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_sparse_options_default(options), 'tutti_sparse_options_default_f', &
                    status)
    end subroutine tutti_sparse_options_default_f

    ! Analyses the pattern of an n x n sparse matrix and makes a factorization handle for it
    ! in `handle` (release it with tutti_sparse_free_f): pointers(n + 1) and indices (the
    ! entries, pointers(n + 1) - index_base of them) are compressed per options%layout and
    ! options%index_base, and passed unchanged: for 1-based arrays set options%index_base = 1.
    ! `options` absent: the defaults (0-based CSR). Then tutti_sparse_factor_f, and
    ! tutti_sparse_solve_f.
    subroutine tutti_sparse_analyse_f(n, pointers, indices, handle, options, status)
        integer(c_int64_t), intent(in) :: n
        integer(c_int64_t), intent(in) :: pointers(:)
        integer(c_int64_t), intent(in) :: indices(:)
        type(c_ptr), intent(inout) :: handle
        type(tutti_sparse_options_t), intent(in), optional, target :: options
        integer(c_int), intent(out), optional :: status
        integer(c_int64_t) :: base, entries
        character(len=160) :: shapes

        if (size(pointers, kind=c_int64_t) /= n + 1) then
            write (shapes, '(a, i0, a, i0)') 'pointers has ', size(pointers), &
                ' entries, not n + 1 = ', n + 1
            call misuse('tutti_sparse_analyse_f', trim(shapes))
        end if
        base = 0
        if (present(options)) base = options%index_base
        ! tutti reads pointers(n + 1) - index_base indices, which must not run past the array.
        ! An n below 1, a base other than 0 or 1, or a last pointer below the base is refused
        ! by tutti before any index is read.
        if (n >= 1 .and. (base == 0 .or. base == 1)) then
            entries = pointers(n + 1) - base
            if (entries >= 0 .and. entries /= size(indices, kind=c_int64_t)) then
                write (shapes, '(a, i0, a, i0, a, i0, a)') 'indices has ', size(indices), &
                    ' entries, not pointers(n + 1) - index_base = ', entries, &
                    ' (options%index_base is ', base, '; 1 for 1-based arrays)'
                call misuse('tutti_sparse_analyse_f', trim(shapes))
            end if
        end if
        call finish(tutti_sparse_analyse(n, pointers, indices, sparse_options_ptr(options), &
                                         handle), 'tutti_sparse_analyse_f', status)
    end subroutine tutti_sparse_analyse_f

    ! Factors the handle's matrix with `values`, one per index given to
    ! tutti_sparse_analyse_f, in that order (duplicates summed). Call again with new values
    ! on the same pattern to refactor. On failure the handle holds no factors until a
    ! factorization succeeds.
    subroutine tutti_sparse_factor_f(handle, values, status)
        type(c_ptr), intent(in) :: handle
        real(c_double), intent(in) :: values(:)
        integer(c_int), intent(out), optional :: status
        call finish(tutti_sparse_factor(handle, values, size(values, kind=c_int64_t)), &
                    'tutti_sparse_factor_f', status)
    end subroutine tutti_sparse_factor_f

    ! Factors a complex handle's matrix (analysed with options%dtype =
    ! TUTTI_DTYPE_COMPLEX128) with `values`, as tutti_sparse_factor_f.
    subroutine tutti_sparse_factor_c128_f(handle, values, status)
        type(c_ptr), intent(in) :: handle
        complex(c_double_complex), intent(in) :: values(:)
        integer(c_int), intent(out), optional :: status
        call finish(tutti_sparse_factor_c128(handle, values, size(values, kind=c_int64_t)), &
                    'tutti_sparse_factor_c128_f', status)
    end subroutine tutti_sparse_factor_c128_f

    ! Solves A x = b in place for one right-hand side b(n); `info` receives the refinement
    ! steps and the backward error.
    subroutine sparse_solve_one(handle, b, info, status)
        type(c_ptr), intent(in) :: handle
        real(c_double), intent(inout) :: b(:)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        call solve_in_place(handle, size(b), 1, b, info, code)
        call finish(code, 'tutti_sparse_solve_f', status)
    end subroutine sparse_solve_one

    ! Solves A X = B in place for the n_rhs = size(b, 2) right-hand sides b(:, k); `info`
    ! receives the refinement steps and the largest backward error.
    subroutine sparse_solve_many(handle, b, info, status)
        type(c_ptr), intent(in) :: handle
        real(c_double), intent(inout) :: b(:, :)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        call solve_in_place(handle, size(b, 1), size(b, 2), b, info, code)
        call finish(code, 'tutti_sparse_solve_f', status)
    end subroutine sparse_solve_many

    ! Solves A x = b in place for one complex right-hand side b(n) with a complex handle's
    ! factors; `info` receives the refinement steps and the backward error.
    subroutine sparse_solve_c128_one(handle, b, info, status)
        type(c_ptr), intent(in) :: handle
        complex(c_double_complex), intent(inout) :: b(:)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        call solve_c128_in_place(handle, size(b), 1, b, info, code)
        call finish(code, 'tutti_sparse_solve_c128_f', status)
    end subroutine sparse_solve_c128_one

    ! Solves A X = B in place for the n_rhs = size(b, 2) complex right-hand sides b(:, k);
    ! `info` receives the refinement steps and the largest backward error.
    subroutine sparse_solve_c128_many(handle, b, info, status)
        type(c_ptr), intent(in) :: handle
        complex(c_double_complex), intent(inout) :: b(:, :)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        call solve_c128_in_place(handle, size(b, 1), size(b, 2), b, info, code)
        call finish(code, 'tutti_sparse_solve_c128_f', status)
    end subroutine sparse_solve_c128_many

    ! Checks that b has the handle's `rows`: other rows are the caller's bug (tutti would read
    ! past b), reported by `wrapper`. `code` is tutti_sparse_info's status.
    subroutine check_rhs_rows(handle, rows, wrapper, code)
        type(c_ptr), intent(in) :: handle
        integer, intent(in) :: rows
        character(len=*), intent(in) :: wrapper
        integer(c_int), intent(out) :: code
        type(tutti_sparse_info_t) :: matrix
        character(len=120) :: shapes

        code = tutti_sparse_info(handle, matrix)
        if (code /= TUTTI_OK) return
        if (rows /= matrix%unknowns) then
            write (shapes, '(a, i0, a, i0, a)') 'b has ', rows, ' rows, not the matrix''s ', &
                matrix%unknowns, ' unknowns'
            call misuse(wrapper, trim(shapes))
        end if
    end subroutine check_rhs_rows

    ! The solve of both forms of tutti_sparse_solve_f, on b as `rows` x `columns`.
    subroutine solve_in_place(handle, rows, columns, b, info, code)
        type(c_ptr), intent(in) :: handle
        integer, intent(in) :: rows, columns
        real(c_double), intent(inout) :: b(rows, columns)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out) :: code
        type(tutti_sparse_solve_info_t), target :: reached

        call check_rhs_rows(handle, rows, 'tutti_sparse_solve_f', code)
        if (code /= TUTTI_OK) return
        code = tutti_sparse_solve(handle, b, int(columns, c_int64_t), c_loc(reached))
        if (code == TUTTI_OK .and. present(info)) info = reached
    end subroutine solve_in_place

    ! The solve of both forms of tutti_sparse_solve_c128_f, on b as `rows` x `columns`.
    subroutine solve_c128_in_place(handle, rows, columns, b, info, code)
        type(c_ptr), intent(in) :: handle
        integer, intent(in) :: rows, columns
        complex(c_double_complex), intent(inout) :: b(rows, columns)
        type(tutti_sparse_solve_info_t), intent(inout), optional :: info
        integer(c_int), intent(out) :: code
        type(tutti_sparse_solve_info_t), target :: reached

        call check_rhs_rows(handle, rows, 'tutti_sparse_solve_c128_f', code)
        if (code /= TUTTI_OK) return
        code = tutti_sparse_solve_c128(handle, b, int(columns, c_int64_t), c_loc(reached))
        if (code == TUTTI_OK .and. present(info)) info = reached
    end subroutine solve_c128_in_place

    ! What the analysis predicts (fill, flops, fronts), the devices, whether the handle holds
    ! factors and how many pivots they perturbed, the plan's largest per-device bytes.
    subroutine tutti_sparse_info_f(handle, info, status)
        type(c_ptr), intent(in) :: handle
        type(tutti_sparse_info_t), intent(inout) :: info
        integer(c_int), intent(out), optional :: status
        call finish(tutti_sparse_info(handle, info), 'tutti_sparse_info_f', status)
    end subroutine tutti_sparse_info_f

    ! Releases a sparse handle and sets `handle` to c_null_ptr; c_null_ptr is a no-op.
    subroutine tutti_sparse_free_f(handle, status)
        type(c_ptr), intent(inout) :: handle
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        code = tutti_sparse_free(handle)
        if (code == TUTTI_OK) handle = c_null_ptr
        call finish(code, 'tutti_sparse_free_f', status)
    end subroutine tutti_sparse_free_f

    ! ------------------------------------------------------------------------------ trains

    subroutine tutti_src_options_default_f(options, status)
        type(tutti_src_options_t), intent(out) :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_src_options_default(options), 'tutti_src_options_default_f', status)
    end subroutine tutti_src_options_default_f

    ! Compresses the product of the trains `stack` (mathematical order: [h, psi] is H|psi>)
    ! to bonds <= options%chi_out; `out` receives the new train (release it with
    ! tutti_train_free_f). `options` absent: the defaults, whose chi_out 0 is refused. Set
    ! options%info_out = c_loc(info), `info` a type(tutti_src_info_t), target, to get the
    ! sweep's diagnostics.
    subroutine tutti_src_f(stack, out, options, status)
        type(c_ptr), intent(in) :: stack(:)
        type(c_ptr), intent(inout) :: out
        type(tutti_src_options_t), intent(in), optional, target :: options
        integer(c_int), intent(out), optional :: status
        call finish(tutti_src(stack, int(size(stack), c_int), src_options_ptr(options), out), &
                    'tutti_src_f', status)
    end subroutine tutti_src_f

    ! A train (an MPS) from one Fortran-order core per site; cores(k) is site k - 1.
    subroutine train_from_mps_cores(cores, train, status)
        type(tutti_mps_core_t), intent(in) :: cores(:)
        type(c_ptr), intent(inout) :: train
        integer(c_int), intent(out), optional :: status
        type(core_buffer), allocatable, target :: buffers(:)
        integer(c_int), allocatable :: shapes(:, :)
        type(c_ptr), allocatable :: pointers(:)
        integer(c_int) :: dtype
        integer :: k, dims(3)

        allocate (buffers(size(cores)), shapes(3, size(cores)), pointers(size(cores)))
        dtype = TUTTI_DTYPE_FLOAT64
        if (size(cores) > 0) then
            if (allocated(cores(1)%c128)) dtype = TUTTI_DTYPE_COMPLEX128
        end if
        do k = 1, size(cores)
            if ((allocated(cores(k)%f64) .eqv. allocated(cores(k)%c128)) .or. &
                (allocated(cores(k)%c128) .neqv. (dtype == TUTTI_DTYPE_COMPLEX128))) then
                call misuse('tutti_train_from_arrays_f', 'every core must have f64 or c128 ' &
                            // 'allocated, not both, and the same one at every site')
            end if
            if (dtype == TUTTI_DTYPE_FLOAT64) then
                dims = shape(cores(k)%f64)
                buffers(k)%f64 = reshape(reshape(cores(k)%f64, dims(3:1:-1), &
                                                 order=[3, 2, 1]), [product(dims)])
                if (product(dims) > 0) pointers(k) = c_loc(buffers(k)%f64)
            else
                dims = shape(cores(k)%c128)
                buffers(k)%c128 = reshape(reshape(cores(k)%c128, dims(3:1:-1), &
                                                  order=[3, 2, 1]), [product(dims)])
                if (product(dims) > 0) pointers(k) = c_loc(buffers(k)%c128)
            end if
            if (product(dims) == 0) pointers(k) = c_null_ptr
            shapes(:, k) = int(dims, c_int)
        end do
        call finish(tutti_train_from_arrays(TUTTI_TRAIN_MPS, dtype, int(size(cores), c_int), &
                                            shapes, pointers, train), &
                    'tutti_train_from_arrays_f', status)
    end subroutine train_from_mps_cores

    ! A train (an MPO) from one Fortran-order core per site; cores(k) is site k - 1.
    subroutine train_from_mpo_cores(cores, train, status)
        type(tutti_mpo_core_t), intent(in) :: cores(:)
        type(c_ptr), intent(inout) :: train
        integer(c_int), intent(out), optional :: status
        type(core_buffer), allocatable, target :: buffers(:)
        integer(c_int), allocatable :: shapes(:, :)
        type(c_ptr), allocatable :: pointers(:)
        integer(c_int) :: dtype
        integer :: k, dims(4)

        allocate (buffers(size(cores)), shapes(4, size(cores)), pointers(size(cores)))
        dtype = TUTTI_DTYPE_FLOAT64
        if (size(cores) > 0) then
            if (allocated(cores(1)%c128)) dtype = TUTTI_DTYPE_COMPLEX128
        end if
        do k = 1, size(cores)
            if ((allocated(cores(k)%f64) .eqv. allocated(cores(k)%c128)) .or. &
                (allocated(cores(k)%c128) .neqv. (dtype == TUTTI_DTYPE_COMPLEX128))) then
                call misuse('tutti_train_from_arrays_f', 'every core must have f64 or c128 ' &
                            // 'allocated, not both, and the same one at every site')
            end if
            if (dtype == TUTTI_DTYPE_FLOAT64) then
                dims = shape(cores(k)%f64)
                buffers(k)%f64 = reshape(reshape(cores(k)%f64, dims(4:1:-1), &
                                                 order=[4, 3, 2, 1]), [product(dims)])
                if (product(dims) > 0) pointers(k) = c_loc(buffers(k)%f64)
            else
                dims = shape(cores(k)%c128)
                buffers(k)%c128 = reshape(reshape(cores(k)%c128, dims(4:1:-1), &
                                                  order=[4, 3, 2, 1]), [product(dims)])
                if (product(dims) > 0) pointers(k) = c_loc(buffers(k)%c128)
            end if
            if (product(dims) == 0) pointers(k) = c_null_ptr
            shapes(:, k) = int(dims, c_int)
        end do
        call finish(tutti_train_from_arrays(TUTTI_TRAIN_MPO, dtype, int(size(cores), c_int), &
                                            shapes, pointers, train), &
                    'tutti_train_from_arrays_f', status)
    end subroutine train_from_mpo_cores

    ! Opens the train in the directory `path` (000.npy, 001.npy, ...).
    subroutine tutti_train_from_dir_f(path, train, status)
        character(len=*), intent(in) :: path
        type(c_ptr), intent(inout) :: train
        integer(c_int), intent(out), optional :: status
        call finish(tutti_train_from_dir(c_string(path), train), 'tutti_train_from_dir_f', &
                    status)
    end subroutine tutti_train_from_dir_f

    ! A train's kind (TUTTI_TRAIN_*), dtype (TUTTI_DTYPE_*) and site count; each optional.
    subroutine tutti_train_info_f(train, kind, dtype, n_sites, status)
        type(c_ptr), intent(in) :: train
        integer(c_int), intent(inout), optional :: kind, dtype, n_sites
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code, values(3)

        values = -1
        code = tutti_train_info(train, values(1), values(2), values(3))
        if (code == TUTTI_OK) then
            if (present(kind)) kind = values(1)
            if (present(dtype)) dtype = values(2)
            if (present(n_sites)) n_sites = values(3)
        end if
        call finish(code, 'tutti_train_info_f', status)
    end subroutine tutti_train_info_f

    ! Every core's shape: shapes(:, k) is site k - 1's (Dl, d, Dr) for an MPS, (Dl, d_out,
    ! d_in, Dr) for an MPO.
    subroutine tutti_train_shapes_f(train, shapes, status)
        type(c_ptr), intent(in) :: train
        integer(c_int), allocatable, intent(out) :: shapes(:, :)
        integer(c_int), intent(out), optional :: status
        integer(c_int), allocatable :: found(:, :)
        integer(c_int) :: code, kind, dtype, n_sites, axes

        kind = -1
        dtype = -1
        n_sites = 0
        code = tutti_train_info(train, kind, dtype, n_sites)
        if (code == TUTTI_OK) then
            axes = 3
            if (kind == TUTTI_TRAIN_MPO) axes = 4
            allocate (found(axes, n_sites))
            code = tutti_train_shapes(train, found, int(size(found), c_size_t))
            if (code == TUTTI_OK) call move_alloc(found, shapes)
        end if
        call finish(code, 'tutti_train_shapes_f', status)
    end subroutine tutti_train_shapes_f

    ! Site `site` (0-based) of an MPS train, in Fortran order, into core%f64 or core%c128
    ! (the other one is deallocated).
    subroutine train_site_mps(train, site, core, status)
        type(c_ptr), intent(in) :: train
        integer(c_int), intent(in) :: site
        type(tutti_mps_core_t), intent(inout) :: core
        integer(c_int), intent(out), optional :: status
        real(c_double), allocatable :: flat(:)
        integer(c_int), allocatable :: shapes(:)
        integer(c_int) :: code, dtype
        integer :: dims(3)

        call read_site(train, site, TUTTI_TRAIN_MPS, 3, shapes, dtype, flat, code)
        if (code == TUTTI_OK) then
            dims = shapes
            if (allocated(core%f64)) deallocate (core%f64)
            if (allocated(core%c128)) deallocate (core%c128)
            if (dtype == TUTTI_DTYPE_FLOAT64) then
                core%f64 = reshape(flat, dims, order=[3, 2, 1])
            else
                core%c128 = reshape(cmplx(flat(1::2), flat(2::2), c_double_complex), dims, &
                                    order=[3, 2, 1])
            end if
        end if
        call finish(code, 'tutti_train_site_f', status)
    end subroutine train_site_mps

    ! Site `site` (0-based) of an MPO train, in Fortran order, into core%f64 or core%c128.
    subroutine train_site_mpo(train, site, core, status)
        type(c_ptr), intent(in) :: train
        integer(c_int), intent(in) :: site
        type(tutti_mpo_core_t), intent(inout) :: core
        integer(c_int), intent(out), optional :: status
        real(c_double), allocatable :: flat(:)
        integer(c_int), allocatable :: shapes(:)
        integer(c_int) :: code, dtype
        integer :: dims(4)

        call read_site(train, site, TUTTI_TRAIN_MPO, 4, shapes, dtype, flat, code)
        if (code == TUTTI_OK) then
            dims = shapes
            if (allocated(core%f64)) deallocate (core%f64)
            if (allocated(core%c128)) deallocate (core%c128)
            if (dtype == TUTTI_DTYPE_FLOAT64) then
                core%f64 = reshape(flat, dims, order=[4, 3, 2, 1])
            else
                core%c128 = reshape(cmplx(flat(1::2), flat(2::2), c_double_complex), dims, &
                                    order=[4, 3, 2, 1])
            end if
        end if
        call finish(code, 'tutti_train_site_f', status)
    end subroutine train_site_mpo

    ! Site `site`'s shape and C-order entries ((re, im) pairs for complex128). A train of
    ! another kind than `kind` is the caller's bug; a site out of range is tutti's error.
    subroutine read_site(train, site, kind, axes, site_shape, dtype, flat, code)
        type(c_ptr), intent(in) :: train
        integer(c_int), intent(in) :: site, kind
        integer, intent(in) :: axes
        integer(c_int), allocatable, intent(out) :: site_shape(:)
        integer(c_int), intent(out) :: dtype
        real(c_double), allocatable, intent(out) :: flat(:)
        integer(c_int), intent(out) :: code
        integer(c_int), allocatable :: shapes(:, :)
        integer(c_int) :: found_kind, n_sites
        integer(c_size_t) :: length

        found_kind = -1
        dtype = -1
        n_sites = 0
        code = tutti_train_info(train, found_kind, dtype, n_sites)
        if (code /= TUTTI_OK) return
        if (found_kind /= kind) then
            call misuse('tutti_train_site_f', 'the train is not of the kind of the core ' &
                        // 'argument (tutti_mps_core_t for an MPS, tutti_mpo_core_t for an MPO)')
        end if
        allocate (shapes(axes, n_sites))
        code = tutti_train_shapes(train, shapes, int(size(shapes), c_size_t))
        if (code /= TUTTI_OK) return
        if (site >= 0 .and. site < n_sites) then
            site_shape = shapes(:, site + 1)
            length = product(int(site_shape, c_size_t))
        else
            ! tutti refuses the site and says why.
            allocate (site_shape(axes))
            site_shape = 1
            length = 1
        end if
        if (dtype == TUTTI_DTYPE_COMPLEX128) length = 2 * length
        allocate (flat(length))
        code = tutti_train_site(train, site, flat, length)
    end subroutine read_site

    ! Writes the train to the directory `path` (.npy files), atomically.
    subroutine tutti_train_write_dir_f(train, path, status)
        type(c_ptr), intent(in) :: train
        character(len=*), intent(in) :: path
        integer(c_int), intent(out), optional :: status
        call finish(tutti_train_write_dir(train, c_string(path)), 'tutti_train_write_dir_f', &
                    status)
    end subroutine tutti_train_write_dir_f

    ! Releases a train and sets `train` to c_null_ptr; c_null_ptr is a no-op.
    subroutine tutti_train_free_f(train, status)
        type(c_ptr), intent(inout) :: train
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        code = tutti_train_free(train)
        if (code == TUTTI_OK) train = c_null_ptr
        call finish(code, 'tutti_train_free_f', status)
    end subroutine tutti_train_free_f

    ! norm = ||train|| (the Frobenius norm for an MPO).
    subroutine tutti_train_norm_f(train, norm, status)
        type(c_ptr), intent(in) :: train
        real(c_double), intent(inout) :: norm
        integer(c_int), intent(out), optional :: status
        call finish(tutti_train_norm(train, norm), 'tutti_train_norm_f', status)
    end subroutine tutti_train_norm_f

    ! distance = ||a - b||.
    subroutine tutti_train_distance_f(a, b, distance, status)
        type(c_ptr), intent(in) :: a, b
        real(c_double), intent(inout) :: distance
        integer(c_int), intent(out), optional :: status
        call finish(tutti_train_distance(a, b, distance), 'tutti_train_distance_f', status)
    end subroutine tutti_train_distance_f

    ! ------------------------------------------------------------------------------ worlds

    ! Adopts the MPI communicator whose Fortran handle is `fcomm` (an `integer`
    ! communicator, or comm%MPI_VAL); collective. Release `world` with tutti_world_free_f.
    subroutine tutti_world_from_fcomm_f(fcomm, world, status)
        integer, intent(in) :: fcomm
        type(c_ptr), intent(inout) :: world
        integer(c_int), intent(out), optional :: status
        call finish(tutti_world_from_fcomm(int(fcomm, c_int32_t), world), &
                    'tutti_world_from_fcomm_f', status)
    end subroutine tutti_world_from_fcomm_f

    ! This process's rank and the process count, in the world and on its node; each optional.
    subroutine tutti_world_info_f(world, rank, size, local_rank, local_size, status)
        type(c_ptr), intent(in) :: world
        integer(c_int), intent(inout), optional :: rank, size, local_rank, local_size
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code, values(4)

        values = -1
        code = tutti_world_info(world, values(1), values(2), values(3), values(4))
        if (code == TUTTI_OK) then
            if (present(rank)) rank = values(1)
            if (present(size)) size = values(2)
            if (present(local_rank)) local_rank = values(3)
            if (present(local_size)) local_size = values(4)
        end if
        call finish(code, 'tutti_world_info_f', status)
    end subroutine tutti_world_info_f

    ! Fails this process's next call over `world` with `message` (see tutti.h).
    subroutine tutti_world_fail_f(world, message, status)
        type(c_ptr), intent(in) :: world
        character(len=*), intent(in) :: message
        integer(c_int), intent(out), optional :: status
        call finish(tutti_world_fail(world, c_string(message)), 'tutti_world_fail_f', status)
    end subroutine tutti_world_fail_f

    ! Releases a world (collective) and sets `world` to c_null_ptr; c_null_ptr is a no-op.
    subroutine tutti_world_free_f(world, status)
        type(c_ptr), intent(inout) :: world
        integer(c_int), intent(out), optional :: status
        integer(c_int) :: code

        code = tutti_world_free(world)
        if (code == TUTTI_OK) world = c_null_ptr
        call finish(code, 'tutti_world_free_f', status)
    end subroutine tutti_world_free_f

end module tutti
