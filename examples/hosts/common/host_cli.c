/* The command line shared by the C hosts; see host_cli.h. */
#include "host_cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int usage(const char *host_name) {
    fprintf(stderr,
            "usage: %s MANIFEST [NAME=VALUE ...] [NAME=@FILE ...] [-o DIR] [--zeros] [--repeat N]\n"
            "  NAME=VALUE   a dim or a scalar parameter, e.g. N=37 scale=0.5\n"
            "  NAME=@FILE   an input or inout buffer: a .npy file (its shape gives the dims), or\n"
            "               raw little-endian bytes (bool_ as u32)\n"
            "  -o DIR       write each output and updated inout buffer to DIR/NAME.bin\n"
            "  --zeros      fill every input not given with zeros (else a missing one is an error)\n",
            host_name);
    return 2;
}

/* A buffer's shape as the manifest writes it: `[N, 20]`. */
static void shape_text(const manifest_buffer *b, char *out, size_t size) {
    size_t used = (size_t)snprintf(out, size, "[");
    for (int a = 0; a < b->rank && used < size; a++) {
        const cJSON *e = b->shape_expr[a];
        if (cJSON_IsString(e))
            used += (size_t)snprintf(out + used, size - used, "%s%.60s", a ? ", " : "", e->valuestring);
        else
            used += (size_t)snprintf(out + used, size - used, "%s%lld", a ? ", " : "",
                                     (long long)e->valuedouble);
    }
    if (used < size) snprintf(out + used, size - used, "]");
}

static void dims_text(const int64_t *shape, int rank, char *out, size_t size) {
    size_t used = (size_t)snprintf(out, size, "[");
    for (int a = 0; a < rank && used < size; a++)
        used += (size_t)snprintf(out + used, size - used, "%s%lld", a ? ", " : "", (long long)shape[a]);
    if (used < size) snprintf(out + used, size - used, "]");
}

/* The dim a shape entry names by itself (`"N"`), when it is not bound yet; NULL otherwise. */
static manifest_dim *open_dim(manifest *m, const cJSON *expr) {
    if (!cJSON_IsString(expr)) return NULL;
    for (int i = 0; i < m->dim_count; i++)
        if (!strcmp(m->dims[i].name, expr->valuestring)) return m->dims[i].bound ? NULL : &m->dims[i];
    return NULL;
}

/* A shape entry's value before the manifest is bound: an integer, or a dim given already. */
static int known_size(const manifest *m, const cJSON *expr, int64_t *out) {
    if (cJSON_IsNumber(expr)) {
        *out = (int64_t)expr->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(expr)) return 0;
    for (int i = 0; i < m->dim_count; i++)
        if (!strcmp(m->dims[i].name, expr->valuestring) && m->dims[i].bound) {
            *out = m->dims[i].value;
            return 1;
        }
    return 0;
}

/* Dims not given on the command line, read from the inputs: each axis of a .npy file that the
 * manifest's shape names by a dim alone, then a raw file whose shape leaves one dim open. */
static int infer_dims(host_run *run, const char *host_name) {
    manifest *m = &run->m;
    char error[512], want[256], got[256];
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        if (!run->files[b] || !npy_is_npy(run->files[b])) continue;
        npy_header *h = &run->npy[b];
        if (!npy_read_header(run->files[b], h, error, sizeof error)) {
            fprintf(stderr, "%s: error: [GPU040] input `%s`: %s\n", host_name, buf->name, error);
            return 2;
        }
        if (!npy_accepts(buf->dtype, h->descr)) {
            fprintf(stderr,
                    "%s: error: [GPU041] input `%s` in %s holds '%s'; the kernel takes %s ('%s'): "
                    "save it with .astype(np.%s)\n",
                    host_name, buf->name, run->files[b], h->descr, buf->dtype,
                    npy_descr_for(buf->dtype), !strcmp(buf->dtype, "bool_") ? "bool_"
                    : !strcmp(buf->dtype, "bfloat16") ? "uint16 (the raw bits)" : buf->dtype);
            return 2;
        }
        if (h->rank != buf->rank) {
            shape_text(buf, want, sizeof want);
            dims_text(h->shape, h->rank, got, sizeof got);
            fprintf(stderr, "%s: error: [GPU040] input `%s` in %s has shape %s; the kernel takes %s\n",
                    host_name, buf->name, run->files[b], got, want);
            return 2;
        }
        for (int a = 0; a < buf->rank; a++) {
            manifest_dim *d = open_dim(m, buf->shape_expr[a]);
            if (d) {
                d->value = h->shape[a];
                d->bound = 1;
            }
        }
    }
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        struct stat st;
        if (!run->files[b] || npy_is_npy(run->files[b]) || !strcmp(buf->dtype, "bfloat16")) continue;
        if (stat(run->files[b], &st) || !S_ISREG(st.st_mode)) continue; /* reported when read */
        manifest_dim *open = NULL;
        int64_t rest = 1, size;
        int opens = 0;
        for (int a = 0; a < buf->rank; a++) {
            manifest_dim *d = open_dim(m, buf->shape_expr[a]);
            if (d && d != open) {
                opens++;
                open = d;
            } else if (!d && known_size(m, buf->shape_expr[a], &size) && size >= 0) {
                rest = size && rest <= INT64_MAX / size ? rest * size : 0;
            } else {
                opens = 2; /* an expression over a dim not known yet */
            }
        }
        int64_t count = (int64_t)st.st_size / buf->element_size;
        if (opens == 1 && rest > 0 && (int64_t)st.st_size % buf->element_size == 0 &&
            count % rest == 0) {
            open->value = count / rest;
            open->bound = 1;
        }
    }
    /* then the dims an equation fixes (`solve`), from the shapes of the .npy inputs */
    const int64_t **shapes = calloc((size_t)m->buffer_count + 1, sizeof *shapes);
    if (!shapes) return 1;
    for (int b = 0; b < m->buffer_count; b++)
        if (run->files[b] && npy_is_npy(run->files[b])) shapes[b] = run->npy[b].shape;
    int solved = manifest_solve(m, (const int64_t *const *)shapes, error, sizeof error);
    free(shapes);
    if (!solved) {
        fprintf(stderr, "%s: error: %s\n", host_name, error);
        return 2;
    }
    return -1;
}

/* `mkdir -p DIR`: each missing folder on the way made. */
static int make_folder(const char *dir) {
    char path[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof path) {
        errno = ENAMETOOLONG;
        return 0;
    }
    memcpy(path, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) && errno != EEXIST) return 0;
        path[i] = saved;
    }
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return 0;
    }
    return 1;
}

static int setup(host_run *run, int argc, char **argv, const char *host_name, const char *backend) {
    char error[512];
    memset(run, 0, sizeof *run);
    if (argc < 2 || argv[1][0] == '-') return usage(host_name);
    if (!manifest_load(&run->m, argv[1], backend, error, sizeof error)) {
        fprintf(stderr, "%s: error: %s\n", host_name, error);
        return 2;
    }
    manifest *m = &run->m;
    run->files = calloc((size_t)m->buffer_count + 1, sizeof *run->files);
    run->npy = calloc((size_t)m->buffer_count + 1, sizeof *run->npy);
    if (!run->files || !run->npy) return 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) { run->output_dir = argv[++i]; continue; }
        if (!strcmp(argv[i], "--repeat") && i + 1 < argc) { run->repeat = atoi(argv[++i]); continue; }
        if (!strcmp(argv[i], "--zeros")) { run->zeros = 1; continue; }
        char *eq = strchr(argv[i], '=');
        if (!eq) return usage(host_name);
        *eq = '\0';
        if (eq[1] == '@') {
            int found = 0;
            for (int b = 0; b < m->buffer_count; b++)
                if (!strcmp(m->buffers[b].name, argv[i]) && ROLE_UPLOADED(m->buffers[b].role)) {
                    run->files[b] = eq + 2;
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "%s: error: [GPU040] `%s` has no input buffer `%s`\n", host_name,
                        m->function, argv[i]);
                return 2;
            }
        } else if (!manifest_set(m, argv[i], eq + 1, error, sizeof error)) {
            fprintf(stderr, "%s: error: %s\n", host_name, error);
            return 2;
        }
    }
    int code = infer_dims(run, host_name);
    if (code >= 0) return code;
    if (!manifest_bind(m, error, sizeof error)) {
        fprintf(stderr, "%s: error: %s\n", host_name, error);
        return 2;
    }
    if (run->output_dir && !make_folder(run->output_dir)) {
        fprintf(stderr, "%s: error: cannot make the output folder `%s`: %s\n", host_name,
                run->output_dir, strerror(errno));
        return 2;
    }
    return -1;
}

int host_setup(host_run *run, int argc, char **argv, const char *host_name, const char *backend) {
    int code = setup(run, argc, argv, host_name, backend);
    if (code >= 0) host_free(run); /* an error: nothing of the run is used */
    return code;
}

int host_check_limits(host_run *run, const manifest_limits *limits, const char *host_name) {
    char error[512];
    if (manifest_check_limits(&run->m, limits, error, sizeof error)) return -1;
    fprintf(stderr, "%s: error: %s\n", host_name, error);
    host_free(run);
    return 2;
}

static int read_inputs(host_run *run, const char *host_name) {
    char error[512];
    const manifest *m = &run->m;
    run->host = calloc((size_t)m->buffer_count + 1, sizeof *run->host);
    if (!run->host) return 1;
    char want[256], got[256];
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        if (!run->files[b]) continue;
        if (npy_is_npy(run->files[b])) {
            const npy_header *h = &run->npy[b];
            for (int a = 0; a < buf->rank; a++) {
                if (h->shape[a] == buf->shape[a]) continue;
                shape_text(buf, want, sizeof want);
                dims_text(h->shape, h->rank, got, sizeof got);
                fprintf(stderr, "%s: error: [GPU040] input `%s` in %s has shape %s; the kernel takes %s",
                        host_name, buf->name, run->files[b], got, want);
                dims_text(buf->shape, buf->rank, got, sizeof got);
                fprintf(stderr, " = %s\n", got);
                return 2;
            }
            size_t size, bytes = h->data_offset + (size_t)h->count * h->item_size;
            uint8_t *file = read_file(run->files[b], bytes, &size);
            if (!file || size != bytes) {
                fprintf(stderr, "%s: error: [GPU040] input `%s`: %s holds %s bytes; its header "
                        "says %zu\n", host_name, buf->name, run->files[b],
                        file ? "a different number of" : "more than", bytes);
                free(file);
                return 2;
            }
            run->host[b] = calloc(1, (size_t)buf->bytes + 4);
            if (!run->host[b]) {
                free(file);
                return 1;
            }
            npy_to_manifest(buf->dtype, h->descr, file + h->data_offset, h->count, run->host[b]);
            free(file);
            continue;
        }
        size_t size;
        /* at most one byte more than the buffer holds (an endless file, /dev/zero, is refused),
         * and memory only as the file's bytes arrive */
        uint8_t *data = read_file(run->files[b], (size_t)buf->bytes, &size);
        if (!data && errno == EFBIG) {
            fprintf(stderr, "%s: error: [GPU040] input `%s` has more than the %lld bytes its %lld %s values need\n",
                    host_name, buf->name, (long long)buf->bytes, (long long)buf->count, buf->dtype);
            return 2;
        }
        if (!data) {
            fprintf(stderr, "%s: error: cannot read `%s`: %s\n", host_name, run->files[b], strerror(errno));
            return 2;
        }
        if ((int64_t)size == buf->count * buf->element_size && (int64_t)size < buf->bytes) {
            /* bfloat16, an odd count: the file holds the values, the device a whole last word */
            uint8_t *whole = realloc(data, (size_t)buf->bytes);
            if (!whole) {
                free(data);
                fprintf(stderr, "%s: error: no memory for the %lld bytes of buffer `%s`\n", host_name,
                        (long long)buf->bytes, buf->name);
                return 2;
            }
            memset(whole + size, 0, (size_t)buf->bytes - size);
            data = whole;
            size = (size_t)buf->bytes;
        }
        run->host[b] = data;
        if ((int64_t)size != buf->bytes) {
            fprintf(stderr, "%s: error: [GPU040] input `%s` has %zu bytes; its %lld %s values need %lld\n",
                    host_name, buf->name, size, (long long)buf->count, buf->dtype, (long long)buf->bytes);
            return 2;
        }
    }
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        if (ROLE_UPLOADED(buf->role) && !run->files[b] && !run->zeros) {
            fprintf(stderr, "%s: error: [GPU040] no data for input `%s`: give it as %s=@FILE "
                    "(a .npy file or raw bytes), or --zeros to fill every input not given with "
                    "zeros\n", host_name, buf->name, buf->name);
            return 2;
        }
    }
    /* Every value of a `range` input, the zeros of one not given included, before any launch:
     * the kernel's bounds proofs assume them in range, so one outside would read out of bounds. */
    for (int b = 0; b < m->buffer_count; b++) {
        if (!manifest_check_range(&m->buffers[b], run->host[b], error, sizeof error)) {
            fprintf(stderr, "%s: error: %s\n", host_name, error);
            return 2;
        }
    }
    return -1;
}

int host_read_inputs(host_run *run, const char *host_name) {
    int code = read_inputs(run, host_name);
    if (code >= 0) host_free(run);
    return code;
}

int host_allocate(host_run *run, const char *host_name) {
    const manifest *m = &run->m;
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        if (run->host[b]) continue;
        run->host[b] = calloc(1, (size_t)buf->bytes + 4);
        if (!run->host[b]) {
            fprintf(stderr, "%s: error: no memory for the %lld bytes of buffer `%s`\n", host_name,
                    (long long)buf->bytes, buf->name);
            host_free(run);
            return 1;
        }
    }
    return -1;
}

static double half_to_double(uint16_t h) {
    int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    double value = exponent == 0    ? ldexp(mantissa, -24)
                   : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                    : ldexp(mantissa | 0x400, exponent - 25);
    return (h & 0x8000) ? -value : value;
}

static void print_value(const manifest_buffer *b, const uint8_t *p) {
    uint32_t word = 0;
    for (int i = 0; i < (int)b->element_size && i < 4; i++) word |= (uint32_t)p[i] << (8 * i);
    if (!strcmp(b->dtype, "float32")) {
        float f;
        memcpy(&f, &word, 4);
        printf(" %.6g", f);
    } else if (!strcmp(b->dtype, "bfloat16")) {
        uint32_t bits = (word & 0xFFFF) << 16;
        float f;
        memcpy(&f, &bits, 4);
        printf(" %.4g", f);
    } else if (!strcmp(b->dtype, "float16")) {
        printf(" %.5g", half_to_double((uint16_t)word));
    } else if (!strcmp(b->dtype, "int32")) {
        printf(" %d", (int32_t)word);
    } else if (!strcmp(b->dtype, "bool_")) {
        printf(" %s", word ? "true" : "false");
    } else {
        printf(" %u", word);
    }
}

int host_finish(host_run *run) {
    const manifest *m = &run->m;
    for (int b = 0; b < m->buffer_count; b++) {
        const manifest_buffer *buf = &m->buffers[b];
        if (!ROLE_RESULT(buf->role)) continue; /* outputs, and inout buffers as updated */
        printf("%s %s [", buf->name, buf->dtype);
        for (int a = 0; a < buf->rank; a++) printf(a ? ", %lld" : "%lld", (long long)buf->shape[a]);
        printf("]:");
        for (int64_t i = 0; i < buf->count && i < 8; i++)
            print_value(buf, run->host[b] + i * buf->element_size);
        printf(buf->count > 8 ? " ...\n" : "\n");
        if (run->output_dir) {
            char path[4096];
            /* buf->name is an identifier (manifest_load refused any other): no `/`, no `..` */
            snprintf(path, sizeof path, "%s/%s.bin", run->output_dir, buf->name);
            /* the values only: a bfloat16 buffer's padding to a whole word stays on the device */
            if (!write_file(path, run->host[b], (size_t)(buf->count * buf->element_size))) {
                fprintf(stderr, "error: cannot write `%s`: %s\n", path, strerror(errno));
                return 1;
            }
        }
    }
    return 0;
}

void host_free(host_run *run) {
    for (int b = 0; run->host && b < run->m.buffer_count; b++) free(run->host[b]);
    free(run->host);
    free(run->files);
    free(run->npy);
    run->host = NULL;
    run->files = NULL;
    run->npy = NULL;
    manifest_free(&run->m);
}
