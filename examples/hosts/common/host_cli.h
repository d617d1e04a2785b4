/* The command line shared by the C hosts (Vulkan, CUDA):
 *
 *   HOST MANIFEST [NAME=VALUE ...] [NAME=@FILE ...] [-o DIR]
 *
 * NAME=VALUE gives a dim or a scalar parameter; NAME=@FILE an input or inout
 * buffer's raw bytes (little-endian, the manifest's layout: bool_ as u32). An
 * input with no file is filled with zeros. A `range` input is checked value by
 * value before any launch (exit 2 naming the first value outside). Each output,
 * and each inout buffer as the kernel left it, is printed (dtype, shape, first
 * values) and, with -o DIR, written to DIR/NAME.bin.
 */
#ifndef MIMIR_HOST_CLI_H
#define MIMIR_HOST_CLI_H

#include "manifest.h"

typedef struct {
    manifest m;
    uint8_t **host;        /* one host copy per buffer (inputs filled, others zeroed) */
    const char *output_dir;
    int repeat;            /* --repeat N: launch N more times and print the mean time */
} host_run;

/* Parse the command line, load and bind the manifest, read the inputs and check their ranges.
 * Exit code or -1. */
int host_setup(host_run *run, int argc, char **argv, const char *host_name);

/* Print every output and inout buffer (and write it with -o). Exit code. */
int host_finish(host_run *run);

void host_free(host_run *run);

#endif
