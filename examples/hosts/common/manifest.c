/* Reading a Mimir manifest in C; see manifest.h for the contract. */
#include "manifest.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int error_out(char *error, size_t size, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, size, format, args);
    va_end(args);
    return 0;
}

void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t used = 0, capacity = 0, n;
    do {
        if (used == capacity) {
            capacity = capacity ? 2 * capacity : 65536;
            char *bigger = realloc(data, capacity + 1);
            if (!bigger) { free(data); fclose(f); return NULL; }
            data = bigger;
        }
        n = fread(data + used, 1, capacity - used, f);
        used += n;
    } while (n > 0);
    fclose(f);
    data[used] = '\0';
    *size = used;
    return data;
}

int write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

/* An integer a double holds exactly (manifest integers are far below 2^53). */
static int is_integer(double x) {
    return x == floor(x) && fabs(x) <= 9007199254740992.0;
}

/* ------------------------------------------------------------ dim expressions */

typedef struct {
    const manifest *m;
    const char *p, *text;
    char *error;
    size_t error_size;
} expr_reader;

static int parse_sum(expr_reader *r, int64_t *out);

static void skip(expr_reader *r) {
    while (*r->p == ' ') r->p++;
}

/* Python's floor division and modulo (they differ from C's for negative operands). */
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int parse_atom(expr_reader *r, int64_t *out) {
    skip(r);
    if (*r->p == '-' || *r->p == '+') {
        int negative = *r->p++ == '-';
        if (!parse_atom(r, out)) return 0;
        if (negative) *out = -*out;
        return 1;
    }
    if (*r->p == '(') {
        r->p++;
        if (!parse_sum(r, out)) return 0;
        skip(r);
        if (*r->p++ != ')') return error_out(r->error, r->error_size, "missing ')' in `%s`", r->text);
        return 1;
    }
    if (isdigit((unsigned char)*r->p)) {
        *out = 0;
        while (isdigit((unsigned char)*r->p)) *out = *out * 10 + (*r->p++ - '0');
        return 1;
    }
    if (isalpha((unsigned char)*r->p) || *r->p == '_') {
        const char *start = r->p;
        while (isalnum((unsigned char)*r->p) || *r->p == '_') r->p++;
        size_t length = (size_t)(r->p - start);
        skip(r);
        if (length == 4 && memcmp(start, "cdiv", 4) == 0 && *r->p == '(') {
            int64_t a, b;
            r->p++;
            if (!parse_sum(r, &a)) return 0;
            skip(r);
            if (*r->p++ != ',') return error_out(r->error, r->error_size, "cdiv needs two arguments in `%s`", r->text);
            if (!parse_sum(r, &b)) return 0;
            skip(r);
            if (*r->p++ != ')') return error_out(r->error, r->error_size, "missing ')' in `%s`", r->text);
            if (b <= 0) return error_out(r->error, r->error_size, "cdiv by %lld in `%s`", (long long)b, r->text);
            *out = -floor_div(-a, b);
            return 1;
        }
        for (int i = 0; i < r->m->dim_count; i++) {
            const manifest_dim *d = &r->m->dims[i];
            if (strlen(d->name) == length && memcmp(d->name, start, length) == 0) {
                if (!d->bound) return error_out(r->error, r->error_size, "dim `%s` has no value", d->name);
                *out = d->value;
                return 1;
            }
        }
        return error_out(r->error, r->error_size, "unknown name `%.*s` in `%s`", (int)length, start, r->text);
    }
    return error_out(r->error, r->error_size, "malformed dim expression `%s`", r->text);
}

static int parse_product(expr_reader *r, int64_t *out) {
    if (!parse_atom(r, out)) return 0;
    for (;;) {
        skip(r);
        char op = *r->p;
        int floor_division = op == '/' && r->p[1] == '/';
        if (op != '*' && op != '%' && !floor_division) return 1;
        r->p += floor_division ? 2 : 1;
        int64_t b;
        if (!parse_atom(r, &b)) return 0;
        if (op == '*') { *out *= b; continue; }
        if (b == 0) return error_out(r->error, r->error_size, "division by zero in `%s`", r->text);
        *out = floor_division ? floor_div(*out, b) : *out - b * floor_div(*out, b);
    }
}

static int parse_sum(expr_reader *r, int64_t *out) {
    if (!parse_product(r, out)) return 0;
    for (;;) {
        skip(r);
        char op = *r->p;
        if (op != '+' && op != '-') return 1;
        r->p++;
        int64_t b;
        if (!parse_product(r, &b)) return 0;
        *out = op == '+' ? *out + b : *out - b;
    }
}

int manifest_eval(const manifest *m, const json_value *expr, int64_t *out, char *error,
                  size_t error_size) {
    if (expr && expr->type == JSON_NUMBER) {
        if (!is_integer(expr->number))
            return error_out(error, error_size, "a size must be an integer, got %g", expr->number);
        *out = (int64_t)expr->number;
        return 1;
    }
    if (!expr || expr->type != JSON_STRING)
        return error_out(error, error_size, "a size must be an integer or a dim expression");
    expr_reader r = {m, expr->string, expr->string, error, error_size};
    if (!parse_sum(&r, out)) return 0;
    skip(&r);
    if (*r.p) return error_out(error, error_size, "malformed dim expression `%s`", expr->string);
    return 1;
}

/* ------------------------------------------------------------ loading */

static const char *string_of(const json_value *object, const char *key) {
    const json_value *v = json_get(object, key);
    return v && v->type == JSON_STRING ? v->string : NULL;
}

static int int_of(const json_value *object, const char *key, int64_t *out) {
    const json_value *v = json_get(object, key);
    if (!v || v->type != JSON_NUMBER || !is_integer(v->number)) return 0;
    *out = (int64_t)v->number;
    return 1;
}

static int64_t dtype_size(const char *dtype) {
    if (!strcmp(dtype, "float16") || !strcmp(dtype, "bfloat16")) return 2;
    if (!strcmp(dtype, "float32") || !strcmp(dtype, "int32") || !strcmp(dtype, "uint32") ||
        !strcmp(dtype, "bool_"))
        return 4; /* bool_ travels as a u32 */
    return 0;
}

static const json_value *array_of(const json_value *object, const char *key) {
    const json_value *v = json_get(object, key);
    return v && v->type == JSON_ARRAY ? v : NULL;
}

static int load_kernel(manifest *m, manifest_kernel *k, const json_value *entry, char *error,
                       size_t error_size) {
    const json_value *size = array_of(entry, "workgroup_size");
    const json_value *groups = array_of(entry, "workgroups");
    const json_value *bindings = array_of(entry, "bindings");
    k->file = string_of(entry, "file");
    k->entry_point = string_of(entry, "entry_point");
    if (!k->file || !k->entry_point || !size || size->count != 3 || !groups ||
        groups->count != 3 || !bindings || bindings->count > MANIFEST_MAX_BINDINGS)
        return error_out(error, error_size, "a kernel entry lacks file, entry_point, "
                         "workgroup_size, workgroups or bindings");
    if (strchr(k->file, '/') || strchr(k->file, '\\') || !strcmp(k->file, ".."))
        return error_out(error, error_size, "kernel file `%s` is not a plain file name", k->file);
    for (int a = 0; a < 3; a++) {
        const json_value *n = size->items[a];
        if (n->type != JSON_NUMBER || !is_integer(n->number) || n->number < 1 || n->number > 1024)
            return error_out(error, error_size, "kernel `%s` has a bad workgroup_size", k->entry_point);
        k->workgroup_size[a] = (int64_t)n->number;
        k->groups_expr[a] = groups->items[a];
    }
    k->binding_count = (int)bindings->count;
    for (int i = 0; i < k->binding_count; i++) {
        const json_value *b = bindings->items[i];
        const char *name = string_of(b, "buffer"), *access = string_of(b, "access");
        int64_t group = 0, binding;
        int_of(b, "group", &group);
        if (!name || !access || !int_of(b, "binding", &binding))
            return error_out(error, error_size, "a binding of `%s` is incomplete", k->entry_point);
        k->bindings[i].buffer = -1;
        for (int j = 0; j < m->buffer_count; j++)
            if (!strcmp(m->buffers[j].name, name)) k->bindings[i].buffer = j;
        if (k->bindings[i].buffer < 0)
            return error_out(error, error_size, "kernel `%s` binds unknown buffer `%s`",
                             k->entry_point, name);
        if (binding < 0 || binding >= MANIFEST_MAX_BINDINGS || group < 0 || group > 7)
            return error_out(error, error_size, "kernel `%s` has a binding out of range",
                             k->entry_point);
        k->bindings[i].group = (int)group;
        k->bindings[i].binding = (int)binding;
        k->bindings[i].read_only = !strcmp(access, "read");
    }
    const json_value *ub = json_get(entry, "uniform_binding");
    if (ub && ub->type == JSON_OBJECT) {
        int64_t group = 0, binding;
        int_of(ub, "group", &group);
        if (!int_of(ub, "binding", &binding))
            return error_out(error, error_size, "the uniform binding of `%s` is incomplete",
                             k->entry_point);
        if (binding < 0 || binding >= MANIFEST_MAX_BINDINGS || group < 0 || group > 7)
            return error_out(error, error_size, "kernel `%s` has a uniform binding out of range",
                             k->entry_point);
        k->has_uniform = 1;
        k->uniform_group = (int)group;
        k->uniform_binding = (int)binding;
    }
    return 1;
}

int manifest_load(manifest *m, const char *path, char *error, size_t error_size) {
    memset(m, 0, sizeof *m);
    size_t size;
    char *text = read_file(path, &size);
    if (!text) return error_out(error, error_size, "cannot read `%s`: %s", path, strerror(errno));
    m->root = json_parse(text, size, error, error_size);
    free(text);
    if (!m->root) return 0;
    const char *slash = strrchr(path, '/');
    snprintf(m->directory, sizeof m->directory, "%.*s", slash ? (int)(slash - path) : 1,
             slash ? path : ".");
    const char *format = string_of(m->root, "format");
    if (!format || strcmp(format, "mimir-manifest/1"))
        return error_out(error, error_size, "`%s` is not a mimir-manifest/1 file", path);
    m->function = string_of(m->root, "function");
    m->backend = string_of(m->root, "backend");
    const json_value *dims = array_of(m->root, "dims"), *buffers = array_of(m->root, "buffers");
    const json_value *kernels = array_of(m->root, "kernels");
    if (!m->function || !m->backend || !dims || !buffers || !kernels)
        return error_out(error, error_size, "`%s` lacks function, backend, dims, buffers or kernels", path);

    m->dim_count = (int)dims->count;
    m->dims = calloc(dims->count + 1, sizeof *m->dims);
    for (int i = 0; i < m->dim_count; i++) {
        manifest_dim *d = &m->dims[i];
        d->name = string_of(dims->items[i], "name");
        if (!d->name) return error_out(error, error_size, "a dim has no name");
        d->has_min = int_of(dims->items[i], "min", &d->min);
        d->has_max = int_of(dims->items[i], "max", &d->max);
        d->has_multiple_of = int_of(dims->items[i], "multiple_of", &d->multiple_of);
    }

    m->buffer_count = (int)buffers->count;
    m->buffers = calloc(buffers->count + 1, sizeof *m->buffers);
    for (int i = 0; i < m->buffer_count; i++) {
        const json_value *entry = buffers->items[i];
        manifest_buffer *b = &m->buffers[i];
        const char *role = string_of(entry, "role");
        const json_value *shape = array_of(entry, "shape");
        b->name = string_of(entry, "name");
        b->dtype = string_of(entry, "dtype");
        if (!b->name || !b->dtype || !role || !shape || shape->count > MANIFEST_MAX_RANK)
            return error_out(error, error_size, "a buffer lacks name, dtype, role or shape");
        if (!strcmp(role, "input")) b->role = ROLE_INPUT;
        else if (!strcmp(role, "output")) b->role = ROLE_OUTPUT;
        else if (!strcmp(role, "inout")) b->role = ROLE_INOUT;
        else if (!strcmp(role, "scratch")) b->role = ROLE_SCRATCH;
        else return error_out(error, error_size, "buffer `%s` has unknown role `%s`", b->name, role);
        const json_value *range = json_get(entry, "range");
        if (range && range->type != JSON_NULL) {
            if (range->type != JSON_ARRAY || range->count != 2 || !ROLE_UPLOADED(b->role) ||
                (strcmp(b->dtype, "int32") && strcmp(b->dtype, "uint32")))
                return error_out(error, error_size, "buffer `%s` has a malformed range", b->name);
            b->has_range = 1;
            b->range_expr[0] = range->items[0];
            b->range_expr[1] = range->items[1];
        }
        b->rank = (int)shape->count;
        for (int a = 0; a < b->rank; a++) b->shape_expr[a] = shape->items[a];
        if (!int_of(entry, "element_size", &b->element_size)) b->element_size = dtype_size(b->dtype);
        if (!b->element_size)
            return error_out(error, error_size, "buffer `%s` has unknown dtype `%s`", b->name, b->dtype);
    }

    const json_value *uniform = json_get(m->root, "uniform");
    const json_value *fields = uniform ? array_of(uniform, "fields") : NULL;
    m->has_uniform = uniform && uniform->type == JSON_OBJECT;
    m->field_count = fields ? (int)fields->count : 0;
    m->fields = calloc((size_t)m->field_count + 1, sizeof *m->fields);
    for (int i = 0; i < m->field_count; i++) {
        manifest_field *f = &m->fields[i];
        f->name = string_of(fields->items[i], "name");
        f->type = string_of(fields->items[i], "type");
        if (!f->name || !f->type) return error_out(error, error_size, "a uniform field is incomplete");
        for (int j = 0; j < m->dim_count; j++) f->is_dim |= !strcmp(m->dims[j].name, f->name);
    }

    m->kernel_count = (int)kernels->count;
    m->kernels = calloc(kernels->count + 1, sizeof *m->kernels);
    for (int i = 0; i < m->kernel_count; i++)
        if (!load_kernel(m, &m->kernels[i], kernels->items[i], error, error_size)) return 0;
    return 1;
}

void manifest_free(manifest *m) {
    json_free(m->root);
    free(m->dims);
    free(m->buffers);
    free(m->fields);
    free(m->kernels);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ values */

int manifest_set(manifest *m, const char *name, const char *value, char *error, size_t error_size) {
    char *end;
    for (int i = 0; i < m->dim_count; i++) {
        if (strcmp(m->dims[i].name, name)) continue;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (*end || end == value || errno)
            return error_out(error, error_size, "dim `%s` must be an integer, got `%s`", name, value);
        m->dims[i].value = v;
        m->dims[i].bound = 1;
        return 1;
    }
    for (int i = 0; i < m->field_count; i++) {
        if (strcmp(m->fields[i].name, name)) continue;
        m->fields[i].scalar = strtod(value, &end);
        if (*end || end == value)
            return error_out(error, error_size, "scalar `%s` must be a number, got `%s`", name, value);
        m->fields[i].scalar_set = 1;
        return 1;
    }
    return error_out(error, error_size, "`%s` has no dim or scalar named `%s`", m->function, name);
}

int manifest_bind(manifest *m, char *error, size_t error_size) {
    for (int i = 0; i < m->dim_count; i++) {
        const manifest_dim *d = &m->dims[i];
        if (!d->bound) return error_out(error, error_size, "no value given for dim `%s`", d->name);
        if (d->has_min && d->value < d->min)
            return error_out(error, error_size, "dim `%s`=%lld is below its minimum %lld", d->name,
                             (long long)d->value, (long long)d->min);
        if (d->has_max && d->value > d->max)
            return error_out(error, error_size, "dim `%s`=%lld is above its maximum %lld", d->name,
                             (long long)d->value, (long long)d->max);
        if (d->has_multiple_of && d->multiple_of && d->value % d->multiple_of)
            return error_out(error, error_size, "dim `%s`=%lld is not a multiple of %lld", d->name,
                             (long long)d->value, (long long)d->multiple_of);
        if (d->value > UINT32_MAX)
            return error_out(error, error_size, "dim `%s` does not fit its u32 uniform field", d->name);
    }
    for (int i = 0; i < m->field_count; i++)
        if (!m->fields[i].is_dim && !m->fields[i].scalar_set)
            return error_out(error, error_size, "no value given for scalar `%s`", m->fields[i].name);
    for (int i = 0; i < m->buffer_count; i++) {
        manifest_buffer *b = &m->buffers[i];
        b->count = 1;
        for (int a = 0; a < b->rank; a++) {
            if (!manifest_eval(m, b->shape_expr[a], &b->shape[a], error, error_size)) return 0;
            if (b->shape[a] < 0)
                return error_out(error, error_size, "buffer `%s` has a negative size", b->name);
            b->count *= b->shape[a];
        }
        if (b->count > UINT32_MAX)
            return error_out(error, error_size, "buffer `%s` has over 2^32 - 1 elements", b->name);
        b->bytes = b->count * b->element_size;
        if (!strcmp(b->dtype, "bfloat16")) b->bytes += b->bytes % 4; /* whole 32-bit words */
        for (int e = 0; e < 2 && b->has_range; e++)
            if (!manifest_eval(m, b->range_expr[e], &b->range[e], error, error_size)) return 0;
    }
    for (int k = 0; k < m->kernel_count; k++)
        for (int a = 0; a < 3; a++)
        {
            if (!manifest_eval(m, m->kernels[k].groups_expr[a], &m->kernels[k].groups[a], error,
                               error_size))
                return 0;
            if (m->kernels[k].groups[a] < 0 || m->kernels[k].groups[a] > UINT32_MAX)
                return error_out(error, error_size, "kernel `%s` needs %lld workgroups along one axis",
                                 m->kernels[k].entry_point, (long long)m->kernels[k].groups[a]);
        }
    return 1;
}

int manifest_check_range(const manifest_buffer *b, const uint8_t *data, char *error,
                         size_t error_size) {
    if (!b->has_range) return 1;
    int is_signed = !strcmp(b->dtype, "int32");
    for (int64_t i = 0; i < b->count; i++) {
        const uint8_t *p = data + 4 * i;
        uint32_t word = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        int64_t value = is_signed ? (int64_t)(int32_t)word : (int64_t)word;
        if (value >= b->range[0] && value < b->range[1]) continue;
        /* the row-major index of element i */
        char where[256] = "";
        size_t used = 0;
        int64_t rest = i, index[MANIFEST_MAX_RANK];
        for (int a = b->rank - 1; a >= 0; a--) {
            index[a] = b->shape[a] ? rest % b->shape[a] : 0;
            rest = b->shape[a] ? rest / b->shape[a] : 0;
        }
        for (int a = 0; a < b->rank && used < sizeof where; a++)
            used += (size_t)snprintf(where + used, sizeof where - used, a ? ", %lld" : "%lld",
                                     (long long)index[a]);
        return error_out(error, error_size,
                         "[GPU043] input `%s` holds %lld at index [%s], outside its range [%lld, %lld) "
                         "(the kernel's bounds proofs assume every value lies in it)",
                         b->name, (long long)value, where, (long long)b->range[0],
                         (long long)b->range[1]);
    }
    return 1;
}

size_t manifest_pack_uniform(const manifest *m, uint8_t *out, size_t capacity) {
    if (!m->has_uniform) return 0;
    size_t size = (size_t)m->field_count * 4;
    size += (16 - size % 16) % 16;
    if (size == 0) size = 16;
    if (size > capacity) return 0;
    memset(out, 0, size);
    for (int i = 0; i < m->field_count; i++) {
        const manifest_field *f = &m->fields[i];
        double value = f->scalar;
        if (f->is_dim)
            for (int j = 0; j < m->dim_count; j++)
                if (!strcmp(m->dims[j].name, f->name)) value = (double)m->dims[j].value;
        uint32_t word;
        if (!strcmp(f->type, "f32")) {
            float x = (float)value;
            memcpy(&word, &x, 4);
        } else if (!strcmp(f->type, "i32")) {
            int32_t x = (int32_t)value;
            memcpy(&word, &x, 4);
        } else {
            word = (uint32_t)(int64_t)value;
        }
        /* little-endian, whatever the host's byte order */
        for (int byte = 0; byte < 4; byte++) out[4 * i + byte] = (uint8_t)(word >> (8 * byte));
    }
    return size;
}
