/* The command line shared by the C hosts (Vulkan, CUDA):
 *
 *   HOST MANIFEST [NAME=VALUE ...] [NAME=@FILE ...] [-o DIR]
 *
 * NAME=VALUE gives a dim or a scalar parameter; NAME=@FILE an input or inout
 * buffer: a NumPy `.npy` file (its dtype must be the buffer's, and its shape gives
 * the dims its axes name) or raw bytes (little-endian, the manifest's layout:
 * bool_ as u32; a dim that is the only one left open in the buffer's shape is read
 * from the file's size). Every input must be given, unless --zeros fills those
 * not given with zeros. A `range` input is checked value by value before any
 * launch (exit 2 naming the first value outside). Each output, and each inout
 * buffer as the kernel left it, is printed (dtype, shape, first values) and, with
 * -o DIR (made, with its parents, when missing), written to DIR/NAME.bin (NAME is
 * an identifier: the manifest contract checks it, so the file stays in DIR).
 *
 * Every refusal is printed as `HOST: error: [CODE] field: why` with exit status 2: the
 * manifest contract's MAN codes (docs/hosts.md) and the checker's codes for arguments
 * (GPU035 a dim not given, GPU040 an input of the wrong size, GPU041 a scalar, GPU042 a
 * dim outside its constraints, GPU043 a value outside its range).
 */
#ifndef MIMIR_HOST_CLI_H
#define MIMIR_HOST_CLI_H

#include "manifest.h"
#include "npy.h"

typedef struct {
    manifest m;
    uint8_t **host;        /* one host copy per buffer (inputs filled, others zeroed) */
    const char **files;    /* per buffer: the NAME=@FILE given for it, or NULL */
    npy_header *npy;       /* per buffer: the header of a .npy file (rank 0 otherwise) */
    const char *output_dir;
    int repeat;            /* --repeat N: launch N more times and print the mean time */
    int zeros;             /* --zeros: an input not given is zeros (else it is an error) */
} host_run;

/* In this order, each returning an exit code (the run freed) or -1 to go on:
 * parse the command line, load the manifest (for `backend`), bind it (dims given, or read
 * from the inputs' shapes) and make the -o folder; */
int host_setup(host_run *run, int argc, char **argv, const char *host_name, const char *backend);

/* check every size and launch against the device's limits (the manifest's faults before the
 * arguments'); */
int host_check_limits(host_run *run, const manifest_limits *limits, const char *host_name);

/* read the inputs' files (every input given, or --zeros) and check every value of a `range`
 * input (nothing else allocated); */
int host_read_inputs(host_run *run, const char *host_name);

/* allocate zeroed host copies of the other buffers. */
int host_allocate(host_run *run, const char *host_name);

/* Print every output and inout buffer (and write it with -o). Exit code. */
int host_finish(host_run *run);

void host_free(host_run *run);

#endif
