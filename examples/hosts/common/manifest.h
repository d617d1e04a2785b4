/* Reading a Mimir manifest (`mimir-manifest/1`) in C: what any host program needs.
 *
 *   manifest m;
 *   if (!manifest_load(&m, "out/spirv/softmax.manifest.json", "spirv", err, sizeof err)) ...
 *   manifest_set(&m, "N", "37", err, sizeof err);      dims and scalar uniform fields
 *   manifest_bind(&m, err, sizeof err);                 check dims, evaluate every size
 *   manifest_check_limits(&m, &limits, err, sizeof err);   against the device's limits
 *   m.buffers[i].bytes, m.kernels[k].groups[0..2], manifest_pack_uniform(&m, bytes)
 *   manifest_check_range(&m.buffers[i], data, err, sizeof err);   before every launch
 *   manifest_read_kernel(&m, k, &size, err, sizeof err);   a kernel file's bytes
 *
 * A manifest is untrusted input. Everything the contract in docs/hosts.md asks of it is
 * checked here, in the same order and with the same codes as the Python and JavaScript
 * hosts: each refusal is an error message "[MANxxx] field: why" (the field a path into
 * the manifest, e.g. `kernels[0].file`), never a crash. After manifest_load, every name
 * is an identifier (so `DIR/NAME.bin` stays in DIR), every kernel file a plain name,
 * every binding unique and in range, the uniform at most 4 KiB; after manifest_bind,
 * every size and workgroup count was computed without overflow and is at most 2^32 - 1.
 *
 * Roles: `input` buffers are uploaded, `output` buffers read back, `inout`
 * buffers (an `InOut[...]` parameter the kernel updates in place) both,
 * `scratch` buffers neither. An integer input with a `range` [lo, hi) must hold
 * only values lo <= v < hi: the kernel's bounds proofs assume it.
 *
 * Layout rules (the manifest's contract): buffers are dense and row-major;
 * elements are little-endian float32, float16, int32, uint32, bfloat16 (the
 * upper 16 bits of a float32; an odd count padded with one zero element to a
 * whole 32-bit word), and bool_ as a 4-byte u32 holding 0 or 1; the uniform
 * block holds its fields in order, 4 bytes each (u32, i32, f32), padded with
 * zeros to a multiple of 16 bytes. Dim expressions use + - * // % (Python's
 * floor division and modulo), unary signs, parentheses, integers, dim names
 * and cdiv(a, b), computed in int64_t with every overflow refused.
 */
#ifndef MIMIR_MANIFEST_H
#define MIMIR_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "cjson/cJSON.h"

/* The contract's limits (docs/hosts.md); the same numbers in every host. */
#define MANIFEST_MAX_BYTES (1 << 20)
#define MANIFEST_MAX_KERNEL_FILE_BYTES (16 << 20)
#define MANIFEST_MAX_JSON_DEPTH 32
#define MANIFEST_MAX_NAME 128
#define MANIFEST_MAX_DIMS 64
#define MANIFEST_MAX_BUFFERS 256
#define MANIFEST_MAX_KERNELS 256
#define MANIFEST_MAX_RANK 8
#define MANIFEST_MAX_BINDINGS 32
#define MANIFEST_MAX_GROUP 3
#define MANIFEST_MAX_BINDING 31
#define MANIFEST_MAX_FIELDS 1024 /* 4 KiB of uniform block */
#define MANIFEST_MAX_EXPR_LENGTH 1024
#define MANIFEST_MAX_EXPR_DEPTH 32
#define MANIFEST_MAX_REQUIRES 16
#define MANIFEST_MAX_REQUIREMENT 64 /* characters of one requirement */

typedef enum { ROLE_INPUT, ROLE_OUTPUT, ROLE_INOUT, ROLE_SCRATCH } buffer_role;

/* Filled from the caller's data before the launches / read back after them. */
#define ROLE_UPLOADED(role) ((role) == ROLE_INPUT || (role) == ROLE_INOUT)
#define ROLE_RESULT(role) ((role) == ROLE_OUTPUT || (role) == ROLE_INOUT)

typedef struct {
    const char *name;
    int has_min, has_max, has_multiple_of;
    int64_t min, max, multiple_of;
    const cJSON *min_expr, *max_expr; /* a relation with other dims (`"max": "MAXT"`), or NULL */
    int64_t value;
    int bound;
    /* `solve`: input buffer `solve_buffer`'s axis `solve_axis` is scale * dim + offset */
    int has_solve, solve_buffer, solve_axis;
    const cJSON *solve_scale, *solve_offset;
} manifest_dim;

typedef struct {
    const char *name, *dtype;
    buffer_role role;
    int rank;
    const cJSON *shape_expr[MANIFEST_MAX_RANK];
    int64_t shape[MANIFEST_MAX_RANK]; /* after manifest_bind */
    int64_t count, element_size, bytes;
    int has_range;                      /* an integer input's `range`: lo <= value < hi */
    const cJSON *range_expr[2];
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
    const cJSON *groups_expr[3];
    int64_t groups[3]; /* after manifest_bind */
    int binding_count;
    manifest_binding bindings[MANIFEST_MAX_BINDINGS];
    int has_uniform;
    int uniform_group, uniform_binding;
    int require_count; /* `requires`: each one the backend's, checked by manifest_load */
    const char *requires[MANIFEST_MAX_REQUIRES];
} manifest_kernel;

typedef struct {
    cJSON *root;
    char directory[4096]; /* the folder the kernel files are in */
    const char *function, *backend;
    int dim_count, buffer_count, field_count, kernel_count, has_uniform;
    manifest_dim *dims;
    manifest_buffer *buffers;
    manifest_field *fields;
    manifest_kernel *kernels;
} manifest;

/* What the device allows; 0 for no limit of the host's own. */
typedef struct {
    uint64_t workgroups[3];        /* Vulkan maxComputeWorkGroupCount, CUDA's grid limits */
    uint64_t workgroup_size[3];    /* maxComputeWorkGroupSize */
    uint64_t workgroup_threads;    /* maxComputeWorkGroupInvocations */
    uint64_t binding_bytes;        /* maxStorageBufferRange */
    uint64_t bindings;             /* maxPerStageDescriptorStorageBuffers */
} manifest_limits;

/* Read and check the manifest at `path` for `backend` ("spirv", "ptx"; NULL: any), and
 * check that each kernel file is a regular file in its folder. */
int manifest_load(manifest *m, const char *path, const char *backend, char *error,
                  size_t error_size);
/* The same from text in memory, with `directory` as the manifest's folder (no file checks). */
int manifest_parse(manifest *m, const char *text, size_t length, const char *directory,
                   const char *backend, char *error, size_t error_size);
void manifest_free(manifest *m);

/* Give a dim or a scalar uniform field its value ("37", "0.5"). */
int manifest_set(manifest *m, const char *name, const char *value, char *error, size_t error_size);

/* Bind each dim with a `solve` that has no value yet from its input's shape (`shapes[b]`: the
 * axis sizes of buffer b, NULL where unknown), again while one more can be solved (its scale and
 * offset name only bound dims): (size - offset) / scale, exactly. 0 and an error for a size the
 * scale does not divide (GPU040) or a scale below 1 (MAN005). Call it before manifest_bind. */
int manifest_solve(manifest *m, const int64_t *const *shapes, char *error, size_t error_size);

/* Check every dim against its constraints, then evaluate buffer shapes and workgroup counts. */
int manifest_bind(manifest *m, char *error, size_t error_size);

/* After manifest_bind: every size and launch within the device's `limits` (MAN006, MAN007,
 * MAN008). */
int manifest_check_limits(const manifest *m, const manifest_limits *limits, char *error,
                          size_t error_size);

/* Every value of buffer `b` (its `count` elements of little-endian `data`; NULL: zeros) within
 * its `range`, when it has one; else 0 and an error naming the buffer, the first value outside and its index
 * (code GPU043, as the Python host and the shim report it). Call it before every launch. */
int manifest_check_range(const manifest_buffer *b, const uint8_t *data, char *error,
                         size_t error_size);

/* Whether a CUDA device of compute capability major.minor (`device` its name) runs every kernel
 * of the PTX manifest `m`: `sm_90a` code runs on 9.0 alone. 0 and an error naming the kernel, its
 * requirement and the device's capability otherwise. Call it before anything is made on it. */
int manifest_check_cuda_capability(const manifest *m, int major, int minor, const char *device,
                                   char *error, size_t error_size);

/* The uniform block's bytes (a multiple of 16, at most 4096); its size, 0 without a uniform. */
size_t manifest_pack_uniform(const manifest *m, uint8_t *out, size_t capacity);

/* Evaluate one dim expression (a JSON number or string) under the bound dims. */
int manifest_eval(const manifest *m, const cJSON *expr, int64_t *out, char *error,
                  size_t error_size);

/* Kernel `k`'s file (malloc'd, NUL-terminated, *size set): a regular file of the manifest's
 * folder, opened without following a link, of at most MANIFEST_MAX_KERNEL_FILE_BYTES. */
void *manifest_read_kernel(const manifest *m, int k, size_t *size, char *error,
                           size_t error_size);

/* At most `limit` bytes of `path` (malloc'd, NUL-terminated, *size set); NULL with errno set
 * when it cannot be read, and with errno EFBIG when it holds more than `limit` bytes. */
void *read_file(const char *path, size_t limit, size_t *size);
int write_file(const char *path, const void *data, size_t size);

#endif
