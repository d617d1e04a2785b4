/* Reading NumPy's `.npy` files (format versions 1.0 to 3.0), for the C hosts' inputs.
 *
 *   npy_header h;
 *   if (!npy_read_header("x.npy", &h, err, sizeof err)) ...   h.descr "<f4", h.shape {37, 20}
 *   npy_descr_for("float32")                                  "<f4": what a buffer takes
 *
 * A `.npy` file is a 10- (or 12-) byte preamble, a header that is a Python dict literal
 * ({'descr': '<f4', 'fortran_order': False, 'shape': (37, 20), }) and the array's bytes,
 * row-major. Only what `np.save` writes for the manifest's dtypes is accepted: little-endian
 * (`<`, or `|` for one byte), C order, at most MANIFEST_MAX_RANK axes; anything else is an
 * error naming what was found, never a guess.
 */
#ifndef MIMIR_NPY_H
#define MIMIR_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "manifest.h"

#define NPY_MAX_HEADER (1 << 16)

typedef struct {
    char descr[16];                   /* e.g. "<f4", "|b1" */
    int rank;
    int64_t shape[MANIFEST_MAX_RANK];
    int64_t count;                    /* the product of shape */
    size_t item_size;                 /* bytes per element in the file */
    size_t data_offset;               /* where the array's bytes start */
} npy_header;

/* Whether `path` ends in `.npy`. */
int npy_is_npy(const char *path);

/* Parse the preamble and header at the start of `data` (`size` bytes). */
int npy_parse_header(const uint8_t *data, size_t size, npy_header *h, char *error,
                     size_t error_size);

/* Read and parse the header of the file at `path` (its data is not read). */
int npy_read_header(const char *path, npy_header *h, char *error, size_t error_size);

/* The descr a manifest dtype is saved as by NumPy (`<f4` for float32, `|b1` for bool_, `<u2`
 * for bfloat16's raw bits); NULL for an unknown dtype. */
const char *npy_descr_for(const char *dtype);

/* Whether an array of `descr` can fill a buffer of `dtype` (bool_ also takes `<u4` 0/1 words,
 * bfloat16 also `<V2`). */
int npy_accepts(const char *dtype, const char *descr);

/* Convert `count` elements of `descr` at `in` into the manifest's layout for `dtype` at `out`
 * (bool_: one byte each to a u32 0 or 1; every other accepted descr is copied). */
void npy_to_manifest(const char *dtype, const char *descr, const uint8_t *in, int64_t count,
                     uint8_t *out);

#endif
