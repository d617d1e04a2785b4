/* Test driver for the CUDA host's device check (examples/hosts/common/manifest.c).
 *
 *   capability MANIFEST MAJOR MINOR
 *
 * reads the PTX manifest (no kernel files needed) and prints `ok` when a device of compute
 * capability MAJOR.MINOR runs every kernel, else `refused: MESSAGE`; `error: ...` when the
 * manifest itself is refused. tests/test_host_c.py runs it where there is no GPU.
 */
#include <stdio.h>
#include <stdlib.h>

#include "manifest.h"

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t size;
    char *text = read_file(argv[1], MANIFEST_MAX_BYTES, &size);
    if (!text) return 2;
    manifest m;
    char error[512];
    if (!manifest_parse(&m, text, size, ".", "ptx", error, sizeof error))
        printf("error: %s\n", error);
    else if (manifest_check_cuda_capability(&m, atoi(argv[2]), atoi(argv[3]), "the device",
                                            error, sizeof error))
        printf("ok\n");
    else
        printf("refused: %s\n", error);
    manifest_free(&m);
    free(text);
    return 0;
}
