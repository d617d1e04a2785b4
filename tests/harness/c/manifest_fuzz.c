/* libFuzzer target for the C hosts' manifest reader (examples/hosts/common/manifest.c):
 *
 *   clang -fsanitize=fuzzer,address,undefined -I examples/hosts/common manifest_fuzz.c \
 *       examples/hosts/common/{manifest.c,json_check.c,cjson/cJSON.c} -lm
 *
 * Every input is a manifest's text. It is parsed and checked (as manifest_load does, without the
 * kernel files), then bound at several sizes and checked against a device's limits; ASan and
 * UBSan catch what goes out of bounds or overflows, and the properties below abort on what the
 * contract promises and the reader does not keep:
 * - a refusal is a message that starts with a code in brackets;
 * - an accepted manifest has identifiers for names and plain kernel file names;
 * - after a successful bind, every buffer holds at most 2^32 - 1 elements, its bytes are its
 *   elements times its element size (a bfloat16 count padded to whole words), and every
 *   workgroup count is at most 2^32 - 1; the uniform block is at most 4096 bytes.
 * tests/test_manifest_fuzz.py runs it for a fixed number of inputs from a fixed seed;
 * benchmarks/fuzz_manifests.py runs it for as long as it is asked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

static void require(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "manifest_fuzz: property broken: %s\n", what);
    abort();
}

static int is_identifier(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MANIFEST_MAX_NAME) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
        if (!alpha && !(i && c >= '0' && c <= '9')) return 0;
    }
    return 1;
}

static void refused(const char *error) {
    require(error[0] == '[' && strchr(error, ']') != NULL, "a refusal without a code");
}

static void bound(const manifest *m) {
    for (int i = 0; i < m->buffer_count; i++) {
        const manifest_buffer *b = &m->buffers[i];
        require(b->count >= 0 && b->count <= 4294967295LL, "a buffer over 2^32 - 1 elements");
        int64_t product = 1;
        for (int a = 0; a < b->rank; a++) {
            require(b->shape[a] >= 0 && b->shape[a] <= 4294967295LL, "an axis out of range");
            if (b->shape[a] == 0 || product == 0) product = 0;
            else if (product > 4294967296LL / b->shape[a]) product = 4294967296LL;
            else product *= b->shape[a];
        }
        require(product == b->count, "a count that is not the product of the shape");
        int64_t bytes = b->count * b->element_size;
        if (!strcmp(b->dtype, "bfloat16")) bytes += bytes % 4;
        require(b->bytes == bytes, "bytes that are not elements times their size");
    }
    for (int k = 0; k < m->kernel_count; k++)
        for (int a = 0; a < 3; a++)
            require(m->kernels[k].groups[a] >= 0 && m->kernels[k].groups[a] <= 4294967295LL,
                    "a workgroup count out of range");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    manifest m;
    char error[512] = "";
    if (!manifest_parse(&m, (const char *)data, size, "/nonexistent", NULL, error, sizeof error)) {
        refused(error);
        manifest_free(&m);
        return 0;
    }
    require(is_identifier(m.function), "a function name that is not an identifier");
    for (int i = 0; i < m.buffer_count; i++) require(is_identifier(m.buffers[i].name), "a buffer name");
    for (int i = 0; i < m.kernel_count; i++) {
        require(!strchr(m.kernels[i].file, '/') && m.kernels[i].file[0] != '.', "a kernel file path");
        require(is_identifier(m.kernels[i].entry_point), "an entry point");
    }
    static const char *const sizes[] = {"0", "1", "37", "65536", "4294967295"};
    for (int round = 0; round < 5; round++) {
        for (int d = 0; d < m.dim_count; d++) {
            char value[32];
            snprintf(value, sizeof value, "%s", sizes[(round + d) % 5]);
            require(manifest_set(&m, m.dims[d].name, value, error, sizeof error), "a dim refused");
        }
        for (int f = 0; f < m.field_count; f++)
            if (!m.fields[f].is_dim) manifest_set(&m, m.fields[f].name, "1", error, sizeof error);
        if (!manifest_bind(&m, error, sizeof error)) {
            refused(error);
            continue;
        }
        bound(&m);
        manifest_limits limits = {{65535, 65535, 65535}, {1024, 1024, 64}, 1024, 134217728, 16};
        if (!manifest_check_limits(&m, &limits, error, sizeof error)) refused(error);
        uint8_t block[4096];
        size_t n = manifest_pack_uniform(&m, block, sizeof block);
        require(n <= sizeof block && n % 16 == 0, "a uniform block past 4096 bytes");
        for (int i = 0; i < m.buffer_count; i++)
            if (!manifest_check_range(&m.buffers[i], NULL, error, sizeof error)) refused(error);
    }
    manifest_free(&m);
    return 0;
}
