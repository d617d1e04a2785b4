/* Reading NumPy's `.npy` files; see npy.h. */
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *error, size_t size, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, size, format, args);
    va_end(args);
    return 0;
}

int npy_is_npy(const char *path) {
    size_t n = strlen(path);
    return n >= 4 && !strcmp(path + n - 4, ".npy");
}

/* The text after `'key':` in the header dict, spaces skipped; NULL when the key is absent. */
static const char *value_of(const char *header, const char *key) {
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s'", key);
    const char *at = strstr(header, quoted);
    if (!at) return NULL;
    at += strlen(quoted);
    while (*at == ' ') at++;
    if (*at != ':') return NULL;
    at++;
    while (*at == ' ') at++;
    return at;
}

static size_t item_size_of(const char *descr) {
    size_t n = strlen(descr);
    if (n < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '>' && descr[0] != '='))
        return 0;
    char *end;
    long size = strtol(descr + 2, &end, 10);
    return *end || size <= 0 || size > 16 ? 0 : (size_t)size;
}

int npy_parse_header(const uint8_t *data, size_t size, npy_header *h, char *error,
                     size_t error_size) {
    memset(h, 0, sizeof *h);
    if (size < 10 || memcmp(data, "\x93NUMPY", 6))
        return fail(error, error_size, "not a .npy file (no \\x93NUMPY at its start)");
    int major = data[6];
    size_t length, start;
    if (major == 1) {
        length = (size_t)data[8] | (size_t)data[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return fail(error, error_size, "a .npy file cut short in its preamble");
        length = (size_t)data[8] | (size_t)data[9] << 8 | (size_t)data[10] << 16 |
                 (size_t)data[11] << 24;
        start = 12;
    } else {
        return fail(error, error_size, ".npy format version %d.%d, not 1.0 to 3.0", major, data[7]);
    }
    if (length > NPY_MAX_HEADER) return fail(error, error_size, "a .npy header over 64 KiB");
    if (size < start + length) return fail(error, error_size, "a .npy file cut short in its header");
    char header[NPY_MAX_HEADER + 1];
    memcpy(header, data + start, length);
    header[length] = '\0';
    if (strlen(header) != length) return fail(error, error_size, "a NUL byte in the .npy header");
    h->data_offset = start + length;

    const char *descr = value_of(header, "descr");
    if (!descr || *descr != '\'')
        return fail(error, error_size, "the .npy header has no 'descr' string (a structured array?)");
    const char *close = strchr(descr + 1, '\'');
    if (!close || close - descr - 1 >= (long)sizeof h->descr || close == descr + 1)
        return fail(error, error_size, "the .npy header's 'descr' is not a plain dtype");
    memcpy(h->descr, descr + 1, (size_t)(close - descr - 1));
    h->item_size = item_size_of(h->descr);
    if (!h->item_size) return fail(error, error_size, "unknown .npy dtype '%s'", h->descr);

    const char *order = value_of(header, "fortran_order");
    if (!order || strncmp(order, "False", 5))
        return fail(error, error_size,
                    "the array is in Fortran order; save it in C order (np.ascontiguousarray)");

    const char *shape = value_of(header, "shape");
    if (!shape || *shape != '(') return fail(error, error_size, "the .npy header has no 'shape'");
    const char *p = shape + 1;
    h->count = 1;
    for (;;) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p)) return fail(error, error_size, "a bad .npy shape");
        if (h->rank == MANIFEST_MAX_RANK)
            return fail(error, error_size, "an array of more than %d axes", MANIFEST_MAX_RANK);
        errno = 0;
        char *end;
        long long n = strtoll(p, &end, 10);
        if (errno || n > 0xFFFFFFFFLL) return fail(error, error_size, "a .npy axis over 2^32 - 1");
        h->shape[h->rank++] = n;
        p = end;
    }
    for (int a = 0; a < h->rank; a++) {
        if (h->shape[a] == 0) h->count = 0;
    }
    for (int a = 0; a < h->rank && h->count; a++) {
        if (h->count > 0xFFFFFFFFLL / h->shape[a])
            return fail(error, error_size, "an array of more than 2^32 - 1 elements");
        h->count *= h->shape[a];
    }
    return 1;
}

int npy_read_header(const char *path, npy_header *h, char *error, size_t error_size) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(error, error_size, "cannot read `%s`: %s", path, strerror(errno));
    uint8_t *data = malloc(NPY_MAX_HEADER + 12);
    if (!data) {
        fclose(f);
        return fail(error, error_size, "no memory to read `%s`", path);
    }
    size_t used = fread(data, 1, NPY_MAX_HEADER + 12, f);
    fclose(f);
    char why[256];
    int ok = npy_parse_header(data, used, h, why, sizeof why);
    free(data);
    if (!ok) return fail(error, error_size, "`%s`: %s", path, why);
    return 1;
}

const char *npy_descr_for(const char *dtype) {
    if (!strcmp(dtype, "float32")) return "<f4";
    if (!strcmp(dtype, "float16")) return "<f2";
    if (!strcmp(dtype, "int32")) return "<i4";
    if (!strcmp(dtype, "uint32")) return "<u4";
    if (!strcmp(dtype, "bool_")) return "|b1";
    if (!strcmp(dtype, "bfloat16")) return "<u2";
    return NULL;
}

int npy_accepts(const char *dtype, const char *descr) {
    const char *want = npy_descr_for(dtype);
    if (want && !strcmp(want, descr)) return 1;
    if (!strcmp(dtype, "bool_") && !strcmp(descr, "<u4")) return 1;
    if (!strcmp(dtype, "bfloat16") && (!strcmp(descr, "<V2") || !strcmp(descr, "|V2"))) return 1;
    return 0;
}

void npy_to_manifest(const char *dtype, const char *descr, const uint8_t *in, int64_t count,
                     uint8_t *out) {
    if (!strcmp(dtype, "bool_") && !strcmp(descr, "|b1")) {
        for (int64_t i = 0; i < count; i++) {
            uint32_t word = in[i] != 0;
            memcpy(out + 4 * i, &word, 4);
        }
        return;
    }
    memcpy(out, in, (size_t)count * item_size_of(descr));
}
