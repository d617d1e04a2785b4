/* Reading a Mimir manifest (`mimir-manifest/1`) in C: what any host program needs.
 *
 *   manifest m;
 *   if (manifest_load(&m, "out/spirv/softmax.manifest.json", err, sizeof err)) ...
 *   manifest_set(&m, "N", "37", err, sizeof err);      dims and scalar uniform fields
 *   manifest_bind(&m, err, sizeof err);                 check dims, evaluate every size
 *   m.buffers[i].bytes, m.kernels[k].groups[0..2], manifest_pack_uniform(&m, bytes)
 *   manifest_check_range(&m.buffers[i], data, err, sizeof err);   before every launch
 *
 * Roles: `input` buffers are uploaded, `output` buffers read back, `inout`
 * buffers (an `InOut[...]` parameter the kernel updates in place) both,
 * `scratch` buffers neither. An integer input with a `range` [lo, hi) must hold
 * only values lo <= v < hi: the kernel's bounds proofs assume it.
 *
 * Layout rules (the manifest's contract): buffers are dense and row-major;
 * elements are little-endian float32, float16, int32, uint32, bfloat16 (the
 * upper 16 bits of a float32; an odd count padded with one zero element to a
 * whole 32-bit word), and bool_ as a 4-byte u32 holding 0 or 1 (a buffer's
 * `element_size` overrides); the uniform
 * block holds its fields in order, 4 bytes each (u32, i32, f32), padded with
 * zeros to a multiple of 16 bytes. Dim expressions use + - * // % (Python's
 * floor division and modulo), unary minus, parentheses, integers, dim names
 * and cdiv(a, b).
 */
#ifndef MIMIR_MANIFEST_H
#define MIMIR_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

#define MANIFEST_MAX_RANK 8
#define MANIFEST_MAX_BINDINGS 32

typedef enum { ROLE_INPUT, ROLE_OUTPUT, ROLE_INOUT, ROLE_SCRATCH } buffer_role;

/* Filled from the caller's data before the launches / read back after them. */
#define ROLE_UPLOADED(role) ((role) == ROLE_INPUT || (role) == ROLE_INOUT)
#define ROLE_RESULT(role) ((role) == ROLE_OUTPUT || (role) == ROLE_INOUT)

typedef struct {
    const char *name;
    int has_min, has_max, has_multiple_of;
    int64_t min, max, multiple_of;
    int64_t value;
    int bound;
} manifest_dim;

typedef struct {
    const char *name, *dtype;
    buffer_role role;
    int rank;
    const json_value *shape_expr[MANIFEST_MAX_RANK];
    int64_t shape[MANIFEST_MAX_RANK]; /* after manifest_bind */
    int64_t count, element_size, bytes;
    int has_range;                      /* an integer input's `range`: lo <= value < hi */
    const json_value *range_expr[2];
    int64_t range[2];                   /* after manifest_bind */
} manifest_buffer;

typedef struct {
    const char *name, *type; /* "u32", "i32" or "f32" */
    int is_dim;
    double scalar;
    int scalar_set;
} manifest_field;

typedef struct {
    int buffer;         /* index into manifest.buffers */
    int group, binding; /* WGSL/SPIR-V: descriptor set and binding; PTX: parameter position */
    int read_only;
} manifest_binding;

typedef struct {
    const char *file, *entry_point;
    int64_t workgroup_size[3];
    const json_value *groups_expr[3];
    int64_t groups[3]; /* after manifest_bind */
    int binding_count;
    manifest_binding bindings[MANIFEST_MAX_BINDINGS];
    int has_uniform;
    int uniform_group, uniform_binding;
} manifest_kernel;

typedef struct {
    json_value *root;
    char directory[4096]; /* the folder the kernel files are in */
    const char *function, *backend;
    int dim_count, buffer_count, field_count, kernel_count, has_uniform;
    manifest_dim *dims;
    manifest_buffer *buffers;
    manifest_field *fields;
    manifest_kernel *kernels;
} manifest;

int manifest_load(manifest *m, const char *path, char *error, size_t error_size);
void manifest_free(manifest *m);

/* Give a dim or a scalar uniform field its value ("37", "0.5"). */
int manifest_set(manifest *m, const char *name, const char *value, char *error, size_t error_size);

/* Check every dim against its constraints, then evaluate buffer shapes and workgroup counts. */
int manifest_bind(manifest *m, char *error, size_t error_size);

/* Every value of buffer `b` (its `count` elements of little-endian `data`) within its `range`,
 * when it has one; else 0 and an error naming the buffer, the first value outside and its index
 * (code GPU043, as the Python host and the shim report it). Call it before every launch. */
int manifest_check_range(const manifest_buffer *b, const uint8_t *data, char *error,
                         size_t error_size);

/* The uniform block's bytes (a multiple of 16); returns its size, 0 without a uniform. */
size_t manifest_pack_uniform(const manifest *m, uint8_t *out, size_t capacity);

/* Evaluate one dim expression (a JSON number or string) under the bound dims. */
int manifest_eval(const manifest *m, const json_value *expr, int64_t *out, char *error,
                  size_t error_size);

/* Whole-file helpers: read (malloc'd, *size set) and write. */
void *read_file(const char *path, size_t *size);
int write_file(const char *path, const void *data, size_t size);

#endif
