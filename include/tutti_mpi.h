/*
 * tutti_mpi.h: the MPI convenience of the C ABI. Include it after <mpi.h> in programs that
 * use MPI; tutti.h itself never includes mpi.h, so one header serves every build.
 *
 *   MPI_Init(&argc, &argv);
 *   TuttiWorld *world = NULL;
 *   tutti_world_from_comm(MPI_COMM_WORLD, &world);   // collective
 *   TuttiFmmOptions options;
 *   tutti_fmm_options_default(&options);
 *   options.resources.world = world;                 // the call spans the processes
 *   ...
 *   tutti_world_free(world);                         // collective, before MPI_Finalize
 *   MPI_Finalize();
 */
#ifndef TUTTI_MPI_H
#define TUTTI_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "tutti.h"

/* tutti_world_from_fcomm for a C communicator: its Fortran handle is the portable integer. */
static inline int tutti_world_from_comm(MPI_Comm comm, TuttiWorld **world_out) {
    return tutti_world_from_fcomm((int32_t)MPI_Comm_c2f(comm), world_out);
}

#endif /* TUTTI_MPI_H */
