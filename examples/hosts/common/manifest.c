/* Reading a Mimir manifest in C; see manifest.h for the contract. The checks follow
 * mimir/runtime/contract.py rule for rule and in the same order, so that a hostile
 * manifest gets the same code from every host (tests/test_hostile_manifests.py). */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_check.h"

#define U32_MAX 4294967295LL

/* "[CODE] field: why", the field formatted from `field` (NULL: none). */
static int refuse(char *error, size_t size, const char *code, const char *field, const char *format,
                  ...) {
    int used = field ? snprintf(error, size, "[%s] %s: ", code, field)
                     : snprintf(error, size, "[%s] ", code);
    if (used < 0 || (size_t)used >= size) return 0;
    va_list args;
    va_start(args, format);
    vsnprintf(error + used, size - (size_t)used, format, args);
    va_end(args);
    return 0;
}

/* Field paths are built only on the way to an error: an entry (`kernels[3]`), a place in
 * it (`kernels[3].bindings[1]`), a field (`kernels[3].bindings[1].group`). */
typedef char entry_path[64];
typedef char place_path[96];
typedef char field_path[128];

static int error_out(char *error, size_t size, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, size, format, args);
    va_end(args);
    return 0;
}

void *read_file(const char *path, size_t limit, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t used = 0, capacity = 0, n;
    do {
        if (used == capacity) {
            capacity = capacity ? 2 * capacity : 65536;
            if (capacity > limit + 1) capacity = limit + 1;
            char *bigger = realloc(data, capacity + 1);
            if (!bigger) { free(data); fclose(f); errno = ENOMEM; return NULL; }
            data = bigger;
        }
        n = fread(data + used, 1, capacity - used, f);
        used += n;
    } while (n > 0 && used <= limit);
    fclose(f);
    if (used > limit) { free(data); errno = EFBIG; return NULL; }
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

/* An integer-valued, finite JSON number (1 and 1.0 alike). */
static int is_integral(double x) {
    return isfinite(x) && x == floor(x);
}

static const char *kind_of(const cJSON *v) {
    if (!v || cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "a list";
    return "an object";
}

/* ------------------------------------------------------------ dim expressions */

typedef struct {
    const manifest *m;
    const char *p, *text;
    int depth;
    int check_only; /* at load: names must be dims, no arithmetic */
    char *error;
    size_t error_size;
    const char *field;
} expr_reader;

static int parse_sum(expr_reader *r, int64_t *out);

static int expr_error(expr_reader *r, const char *format, ...) {
    char why[256];
    va_list args;
    va_start(args, format);
    vsnprintf(why, sizeof why, format, args);
    va_end(args);
    return refuse(r->error, r->error_size, "MAN005", r->field, "%s", why);
}

static int malformed(expr_reader *r, const char *why) {
    return expr_error(r, "malformed dim expression \"%.80s\": %s", r->text, why);
}

static void skip(expr_reader *r) {
    while (*r->p == ' ') r->p++;
}

static int overflow(expr_reader *r) {
    return expr_error(r, "dim expression \"%.80s\" leaves the 64-bit range", r->text);
}

/* Python's floor division and modulo (they differ from C's for negative operands), with
 * the one quotient that leaves int64_t (INT64_MIN // -1) refused and C's undefined
 * INT64_MIN % -1 avoided. */
static int floor_div(expr_reader *r, int64_t a, int64_t b, int64_t *out) {
    if (a == INT64_MIN && b == -1) return overflow(r);
    int64_t q = a / b;
    *out = (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
    return 1;
}

static int64_t floor_mod(int64_t a, int64_t b) {
    if (b == -1) return 0;
    int64_t rest = a % b;
    return (rest != 0 && ((rest < 0) != (b < 0))) ? rest + b : rest;
}

static int enter(expr_reader *r) {
    if (++r->depth > MANIFEST_MAX_EXPR_DEPTH)
        return expr_error(r, "dim expression \"%.80s\" nests deeper than %d levels", r->text,
                          MANIFEST_MAX_EXPR_DEPTH);
    return 1;
}

static int is_name_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_name_char(char c) {
    return is_name_start(c) || (c >= '0' && c <= '9');
}

static int parse_unary(expr_reader *r, int64_t *out);

static int parse_atom(expr_reader *r, int64_t *out) {
    skip(r);
    if (*r->p == '(') {
        r->p++;
        if (!enter(r) || !parse_sum(r, out)) return 0;
        skip(r);
        if (*r->p != ')') return malformed(r, "expected ')'");
        r->p++;
        r->depth--;
        return 1;
    }
    if (*r->p >= '0' && *r->p <= '9') {
        const char *start = r->p;
        int64_t value = 0;
        while (*r->p >= '0' && *r->p <= '9') {
            int digit = *r->p++ - '0';
            if (value > (INT64_MAX - digit) / 10)
                return expr_error(r, "an integer in \"%.80s\" is outside the 64-bit range", r->text);
            value = value * 10 + digit;
        }
        if (r->p - start > 1 && *start == '0') return malformed(r, "leading zeros");
        *out = value;
        return 1;
    }
    if (is_name_start(*r->p)) {
        const char *start = r->p;
        while (is_name_char(*r->p)) r->p++;
        size_t length = (size_t)(r->p - start);
        skip(r);
        if (*r->p == '(') {
            if (length != 4 || memcmp(start, "cdiv", 4))
                return expr_error(r, "only `cdiv(a, b)` may be called in dim expression \"%.80s\"",
                                  r->text);
            r->p++;
            int64_t a, b;
            if (!enter(r) || !parse_sum(r, &a)) return 0;
            skip(r);
            if (*r->p != ',')
                return expr_error(r, "`cdiv` takes exactly two arguments in \"%.80s\"", r->text);
            r->p++;
            if (!parse_sum(r, &b)) return 0;
            skip(r);
            if (*r->p != ')')
                return expr_error(r, "`cdiv` takes exactly two arguments in \"%.80s\"", r->text);
            r->p++;
            r->depth--;
            if (r->check_only) { *out = 0; return 1; }
            if (b <= 0)
                return expr_error(r, "cdiv by a non-positive divisor: cdiv(%lld, %lld) in \"%.80s\"",
                                  (long long)a, (long long)b, r->text);
            /* the ceiling, exactly: truncation rounds a positive quotient down */
            *out = a / b + (a % b > 0 ? 1 : 0);
            return 1;
        }
        for (int i = 0; i < r->m->dim_count; i++) {
            const manifest_dim *d = &r->m->dims[i];
            if (strlen(d->name) == length && memcmp(d->name, start, length) == 0) {
                if (r->check_only) { *out = 0; return 1; }
                if (!d->bound)
                    return expr_error(r, "dim `%s` has no value (in \"%.80s\")", d->name, r->text);
                *out = d->value;
                return 1;
            }
        }
        return expr_error(r, "`%.*s` is not a dim of this manifest", (int)(length > 128 ? 128 : length),
                          start);
    }
    if (*r->p == '\0') return malformed(r, "unexpected end");
    return malformed(r, "unexpected character");
}

static int parse_unary(expr_reader *r, int64_t *out) {
    skip(r);
    if (*r->p == '-' || *r->p == '+') {
        int negative = *r->p++ == '-';
        if (!enter(r) || !parse_unary(r, out)) return 0;
        r->depth--;
        if (negative && !r->check_only) {
            if (*out == INT64_MIN) return overflow(r);
            *out = -*out;
        }
        return 1;
    }
    return parse_atom(r, out);
}

static int parse_product(expr_reader *r, int64_t *out) {
    if (!parse_unary(r, out)) return 0;
    for (;;) {
        skip(r);
        char op = *r->p;
        int floor_division = op == '/' && r->p[1] == '/';
        if (op != '*' && op != '%' && !floor_division) return 1;
        r->p += floor_division ? 2 : 1;
        int64_t b;
        if (!parse_unary(r, &b)) return 0;
        if (r->check_only) continue;
        if (op == '*') {
            if (__builtin_mul_overflow(*out, b, out)) return overflow(r);
            continue;
        }
        if (b == 0) return expr_error(r, "division by zero in dim expression \"%.80s\"", r->text);
        if (floor_division) {
            if (!floor_div(r, *out, b, out)) return 0;
        } else {
            *out = floor_mod(*out, b);
        }
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
        if (r->check_only) continue;
        int bad = op == '+' ? __builtin_add_overflow(*out, b, out)
                            : __builtin_sub_overflow(*out, b, out);
        if (bad) return overflow(r);
    }
}

static int eval_text(const manifest *m, const char *text, int check_only, int64_t *out,
                     const char *field, char *error, size_t error_size) {
    expr_reader r = {m, text, text, 0, check_only, error, error_size, field};
    size_t length = strlen(text);
    if (length > MANIFEST_MAX_EXPR_LENGTH)
        return refuse(error, error_size, "MAN005", field,
                      "dim expression is %zu characters long, over %d", length,
                      MANIFEST_MAX_EXPR_LENGTH);
    /* The same tokens as the other hosts: a character outside them fails first. */
    for (const char *c = text; *c; c++)
        if (!(is_name_char(*c) || strchr(" +-*/%(),", *c)))
            return malformed(&r, "unexpected character");
    skip(&r);
    if (*r.p == '\0') return malformed(&r, "empty");
    if (!parse_sum(&r, out)) return 0;
    skip(&r);
    if (*r.p) return malformed(&r, "unexpected text after the expression");
    return 1;
}

static int eval_entry(const manifest *m, const cJSON *expr, int64_t *out, const char *field,
                      char *error, size_t error_size) {
    if (cJSON_IsNumber(expr)) {
        *out = (int64_t)expr->valuedouble; /* integral and in range: checked at load */
        return 1;
    }
    return eval_text(m, expr->valuestring, 0, out, field, error, error_size);
}

int manifest_eval(const manifest *m, const cJSON *expr, int64_t *out, char *error,
                  size_t error_size) {
    if (cJSON_IsNumber(expr)) {
        if (!is_integral(expr->valuedouble) || fabs(expr->valuedouble) > 9007199254740992.0)
            return refuse(error, error_size, "MAN002", NULL, "a size must be an integer");
        *out = (int64_t)expr->valuedouble;
        return 1;
    }
    if (!cJSON_IsString(expr))
        return refuse(error, error_size, "MAN002", NULL, "a size must be an integer or a string");
    return eval_text(m, expr->valuestring, 0, out, NULL, error, error_size);
}

/* ------------------------------------------------------------ the fields */

typedef struct {
    char *error;
    size_t size;
} sink;

static const cJSON *member(const cJSON *object, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(object, key);
}

static int is_identifier(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MANIFEST_MAX_NAME || !is_name_start(s[0])) return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_name_char(s[i])) return 0;
    return 1;
}

static int need_object(sink *s, const cJSON *v, const char *field) {
    if (cJSON_IsObject(v)) return 1;
    return refuse(s->error, s->size, "MAN002", field, "must be an object, got %s", kind_of(v));
}

static int need_list(sink *s, const cJSON *v, const char *field, int limit, int *count) {
    if (!cJSON_IsArray(v))
        return refuse(s->error, s->size, "MAN002", field, "must be a list, got %s", kind_of(v));
    *count = cJSON_GetArraySize(v);
    if (*count > limit)
        return refuse(s->error, s->size, "MAN002", field, "has %d entries, over the limit of %d",
                      *count, limit);
    return 1;
}

static int need_identifier(sink *s, const cJSON *v, const char *field, const char **out) {
    if (!cJSON_IsString(v) || !is_identifier(v->valuestring))
        return refuse(s->error, s->size, "MAN003", field,
                      "%s%.60s%s is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d characters)",
                      cJSON_IsString(v) ? "\"" : "", cJSON_IsString(v) ? v->valuestring : kind_of(v),
                      cJSON_IsString(v) ? "\"" : "", MANIFEST_MAX_NAME);
    *out = v->valuestring;
    return 1;
}

static int need_choice(sink *s, const cJSON *v, const char *const *choices, const char *field,
                       int *index) {
    for (int i = 0; cJSON_IsString(v) && choices[i]; i++)
        if (!strcmp(v->valuestring, choices[i])) { *index = i; return 1; }
    char allowed[128] = "";
    for (int i = 0; choices[i]; i++) {
        size_t used = strlen(allowed);
        snprintf(allowed + used, sizeof allowed - used, "%s%s", i ? ", " : "", choices[i]);
    }
    return refuse(s->error, s->size, "MAN002", field, "%s%.60s%s is not one of %s",
                  cJSON_IsString(v) ? "\"" : "", cJSON_IsString(v) ? v->valuestring : kind_of(v),
                  cJSON_IsString(v) ? "\"" : "", allowed);
}

/* An integer-valued number in [low, high] (else `code`). */
static int need_integer(sink *s, const cJSON *v, const char *field, double low, double high,
                        const char *code, int64_t *out) {
    if (!cJSON_IsNumber(v))
        return refuse(s->error, s->size, "MAN002", field, "must be an integer, got %s", kind_of(v));
    if (!is_integral(v->valuedouble))
        return refuse(s->error, s->size, "MAN002", field, "must be an integer, got %g", v->valuedouble);
    if (v->valuedouble < low || v->valuedouble > high)
        return refuse(s->error, s->size, code, field, "%.17g is outside %.17g..%.17g", v->valuedouble,
                      low, high);
    *out = (int64_t)v->valuedouble;
    return 1;
}

/* A shape entry or a workgroup count: an integer in 0..2^32 - 1, or a dim expression. */
static int need_size(manifest *m, sink *s, const cJSON *v, const char *field, const char *code) {
    if (cJSON_IsString(v)) {
        int64_t ignored;
        return eval_text(m, v->valuestring, 1, &ignored, field, s->error, s->size);
    }
    int64_t ignored;
    return need_integer(s, v, field, 0, (double)U32_MAX, code, &ignored);
}

static const char *const BACKENDS[] = {"msl", "wgsl", "ptx", "spirv", NULL};
static const char *const SUFFIXES[] = {".metal", ".wgsl", ".ptx", ".spv", NULL};
static const char *const ROLES[] = {"input", "output", "inout", "scratch", NULL};
static const char *const DTYPES[] = {"float32", "float16", "bfloat16", "int32", "uint32", "bool_",
                                     NULL};
static const int DTYPE_SIZES[] = {4, 2, 2, 4, 4, 4};
static const char *const ACCESS[] = {"read", "read_write", NULL};
static const char *const UNIFORM_TYPES[] = {"u32", "i32", "f32", NULL};
/* What a kernel may require of the device beyond its backend's baseline, by backend (in the
 * order of BACKENDS): the requirements a host knows how to check. */
static const char *const MSL_REQUIREMENTS[] = {"simdgroup-32", "msl-3.2", "simdgroup-matrix", NULL};
static const char *const PTX_REQUIREMENTS[] = {"sm_90a", NULL};
static const char *const NO_REQUIREMENTS[] = {NULL};
static const char *const *const REQUIREMENTS[] = {MSL_REQUIREMENTS, NO_REQUIREMENTS,
                                                   PTX_REQUIREMENTS, NO_REQUIREMENTS};

static int load_dims(manifest *m, sink *s) {
    const cJSON *dims = member(m->root, "dims");
    if (!need_list(s, dims, "dims", MANIFEST_MAX_DIMS, &m->dim_count)) return 0;
    m->dims = calloc((size_t)m->dim_count + 1, sizeof *m->dims);
    if (!m->dims) return error_out(s->error, s->size, "out of memory");
    int i = 0;
    entry_path where;
    field_path at;
    for (const cJSON *entry = dims->child; entry; entry = entry->next, i++) {
        manifest_dim *d = &m->dims[i];
        snprintf(where, sizeof where, "dims[%d]", i);
        if (!need_object(s, entry, where)) return 0;
        snprintf(at, sizeof at, "%s.name", where);
        if (!need_identifier(s, member(entry, "name"), at, &d->name)) return 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(m->dims[j].name, d->name))
                return refuse(s->error, s->size, "MAN003", at, "dim `%s` is declared twice", d->name);
        const char *keys[] = {"min", "max", "multiple_of"};
        int64_t *values[] = {&d->min, &d->max, &d->multiple_of};
        int *present[] = {&d->has_min, &d->has_max, &d->has_multiple_of};
        const cJSON **relations[] = {&d->min_expr, &d->max_expr, NULL};
        for (int k = 0; k < 3; k++) {
            const cJSON *v = member(entry, keys[k]);
            if (!v || cJSON_IsNull(v)) continue;
            if (relations[k] && cJSON_IsString(v)) { /* checked below, once every dim is named */
                *relations[k] = v;
                continue;
            }
            snprintf(at, sizeof at, "%s.%s", where, keys[k]);
            if (!need_integer(s, v, at, k == 2 ? 1 : 0, (double)U32_MAX, "MAN002", values[k]))
                return 0;
            *present[k] = 1;
        }
    }
    for (i = 0; i < m->dim_count; i++) {
        const cJSON *exprs[] = {m->dims[i].min_expr, m->dims[i].max_expr};
        for (int k = 0; k < 2; k++) {
            int64_t ignored;
            snprintf(at, sizeof at, "dims[%d].%s", i, k ? "max" : "min");
            if (exprs[k] && !eval_text(m, exprs[k]->valuestring, 1, &ignored, at, s->error, s->size))
                return 0;
        }
    }
    return 1;
}

/* Each dim's `solve` (after the buffers, which it names): an input buffer, one of its axes, a
 * `scale` of at least 1 and an `offset`, each an integer or an expression over dims. */
static int load_solves(manifest *m, sink *s) {
    const cJSON *dims = member(m->root, "dims");
    int i = 0;
    entry_path where;
    field_path at;
    for (const cJSON *entry = dims->child; entry; entry = entry->next, i++) {
        const cJSON *solve = member(entry, "solve");
        if (!solve || cJSON_IsNull(solve)) continue;
        manifest_dim *d = &m->dims[i];
        snprintf(where, sizeof where, "dims[%d].solve", i);
        if (!need_object(s, solve, where)) return 0;
        const char *name;
        snprintf(at, sizeof at, "%s.buffer", where);
        if (!need_identifier(s, member(solve, "buffer"), at, &name)) return 0;
        d->solve_buffer = -1;
        for (int b = 0; b < m->buffer_count; b++)
            if (!strcmp(m->buffers[b].name, name) && ROLE_UPLOADED(m->buffers[b].role)) d->solve_buffer = b;
        if (d->solve_buffer < 0)
            return refuse(s->error, s->size, "MAN003", at, "`%s` is not an input buffer", name);
        int64_t value;
        snprintf(at, sizeof at, "%s.axis", where);
        if (!need_integer(s, member(solve, "axis"), at, 0, (double)m->buffers[d->solve_buffer].rank - 1,
                          "MAN002", &value))
            return 0;
        d->solve_axis = (int)value;
        const char *keys[] = {"scale", "offset"};
        const cJSON **slots[] = {&d->solve_scale, &d->solve_offset};
        const double low[] = {1, -9007199254740991.0}, high[] = {(double)U32_MAX, 9007199254740991.0};
        for (int k = 0; k < 2; k++) {
            const cJSON *v = member(solve, keys[k]);
            snprintf(at, sizeof at, "%s.%s", where, keys[k]);
            if (cJSON_IsString(v) ? !eval_text(m, v->valuestring, 1, &value, at, s->error, s->size)
                                  : !need_integer(s, v, at, low[k], high[k], "MAN002", &value))
                return 0;
            *slots[k] = v;
        }
        d->has_solve = 1;
    }
    return 1;
}

static int load_buffers(manifest *m, sink *s) {
    const cJSON *buffers = member(m->root, "buffers");
    if (!need_list(s, buffers, "buffers", MANIFEST_MAX_BUFFERS, &m->buffer_count)) return 0;
    m->buffers = calloc((size_t)m->buffer_count + 1, sizeof *m->buffers);
    if (!m->buffers) return error_out(s->error, s->size, "out of memory");
    int i = 0;
    entry_path where;
    field_path at;
    for (const cJSON *entry = buffers->child; entry; entry = entry->next, i++) {
        manifest_buffer *b = &m->buffers[i];
        snprintf(where, sizeof where, "buffers[%d]", i);
        if (!need_object(s, entry, where)) return 0;
        snprintf(at, sizeof at, "%s.name", where);
        if (!need_identifier(s, member(entry, "name"), at, &b->name)) return 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(m->buffers[j].name, b->name))
                return refuse(s->error, s->size, "MAN003", at, "buffer `%s` is declared twice", b->name);
        int role, dtype;
        snprintf(at, sizeof at, "%s.role", where);
        if (!need_choice(s, member(entry, "role"), ROLES, at, &role)) return 0;
        b->role = (buffer_role)role;
        snprintf(at, sizeof at, "%s.dtype", where);
        if (!need_choice(s, member(entry, "dtype"), DTYPES, at, &dtype)) return 0;
        b->dtype = DTYPES[dtype];
        b->element_size = DTYPE_SIZES[dtype];
        const cJSON *element_size = member(entry, "element_size");
        if (element_size) {
            int64_t n;
            snprintf(at, sizeof at, "%s.element_size", where);
            if (!need_integer(s, element_size, at, 1, 16, "MAN002", &n)) return 0;
            if (n != b->element_size)
                return refuse(s->error, s->size, "MAN002", at, "element_size %lld is not the %lld bytes of %s",
                              (long long)n, (long long)b->element_size, b->dtype);
        }
        const cJSON *shape = member(entry, "shape");
        snprintf(at, sizeof at, "%s.shape", where);
        if (!need_list(s, shape, at, MANIFEST_MAX_RANK, &b->rank)) return 0;
        int a = 0;
        for (const cJSON *size = shape->child; size; size = size->next, a++) {
            snprintf(at, sizeof at, "%s.shape[%d]", where, a);
            if (!need_size(m, s, size, at, "MAN006")) return 0;
            b->shape_expr[a] = size;
        }
        const cJSON *range = member(entry, "range");
        if (range && !cJSON_IsNull(range)) {
            snprintf(at, sizeof at, "%s.range", where);
            if (!cJSON_IsArray(range) || cJSON_GetArraySize(range) != 2 || !ROLE_UPLOADED(b->role) ||
                (strcmp(b->dtype, "int32") && strcmp(b->dtype, "uint32")))
                return refuse(s->error, s->size, "MAN002", at, "a range is two bounds on an integer input");
            for (int e = 0; e < 2; e++) {
                const cJSON *bound = cJSON_GetArrayItem(range, e);
                snprintf(at, sizeof at, "%s.range[%d]", where, e);
                int64_t ignored;
                if (cJSON_IsString(bound)) {
                    if (!eval_text(m, bound->valuestring, 1, &ignored, at, s->error, s->size)) return 0;
                } else if (!need_integer(s, bound, at, -9007199254740991.0, 9007199254740991.0,
                                         "MAN002", &ignored)) {
                    return 0;
                }
                b->range_expr[e] = bound;
            }
            b->has_range = 1;
        }
    }
    return 1;
}

static int load_uniform(manifest *m, sink *s) {
    const cJSON *uniform = member(m->root, "uniform");
    if (!uniform || cJSON_IsNull(uniform)) return 1;
    if (!need_object(s, uniform, "uniform")) return 0;
    const cJSON *fields = member(uniform, "fields");
    if (!cJSON_IsArray(fields))
        return refuse(s->error, s->size, "MAN002", "uniform.fields", "must be a list, got %s",
                      kind_of(fields));
    m->field_count = cJSON_GetArraySize(fields);
    if (m->field_count > MANIFEST_MAX_FIELDS)
        return refuse(s->error, s->size, "MAN009", "uniform.fields",
                      "%d fields of 4 bytes are over the 4 KiB uniform block (at most %d)",
                      m->field_count, MANIFEST_MAX_FIELDS);
    m->has_uniform = 1;
    m->fields = calloc((size_t)m->field_count + 1, sizeof *m->fields);
    if (!m->fields) return error_out(s->error, s->size, "out of memory");
    int i = 0;
    entry_path where;
    field_path at;
    for (const cJSON *entry = fields->child; entry; entry = entry->next, i++) {
        manifest_field *f = &m->fields[i];
        snprintf(where, sizeof where, "uniform.fields[%d]", i);
        if (!need_object(s, entry, where)) return 0;
        snprintf(at, sizeof at, "%s.name", where);
        if (!need_identifier(s, member(entry, "name"), at, &f->name)) return 0;
        for (int j = 0; j < i; j++)
            if (!strcmp(m->fields[j].name, f->name))
                return refuse(s->error, s->size, "MAN009", at,
                              "uniform field `%s` is given twice (two values for one name)", f->name);
        int type;
        snprintf(at, sizeof at, "%s.type", where);
        if (!need_choice(s, member(entry, "type"), UNIFORM_TYPES, at, &type)) return 0;
        f->type = UNIFORM_TYPES[type];
        for (int j = 0; j < m->dim_count; j++) f->is_dim |= !strcmp(m->dims[j].name, f->name);
    }
    return 1;
}

/* A plain file name: letters, digits, `_`, `.`, `-`, not starting with `.` or `-`. */
static int is_plain_file_name(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 255 || !(is_name_char(name[0]))) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_name_char(name[i]) && name[i] != '.' && name[i] != '-') return 0;
    return 1;
}

static int place_of(sink *s, const cJSON *entry, const char *where, int *group, int *binding) {
    field_path at;
    int64_t g, b;
    snprintf(at, sizeof at, "%s.group", where);
    if (!need_integer(s, member(entry, "group"), at, 0, MANIFEST_MAX_GROUP, "MAN008", &g)) return 0;
    snprintf(at, sizeof at, "%s.binding", where);
    if (!need_integer(s, member(entry, "binding"), at, 0, MANIFEST_MAX_BINDING, "MAN008", &b)) return 0;
    *group = (int)g;
    *binding = (int)b;
    return 1;
}

static int is_requirement_char(char c, int first) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (!first && strchr("_.-", c) && c);
}

static int is_requirement(const char *r) {
    size_t n = strlen(r);
    if (n == 0 || n > MANIFEST_MAX_REQUIREMENT) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_requirement_char(r[i], i == 0)) return 0;
    return 1;
}

static int in_list(const char *const *list, const char *name) {
    for (int i = 0; list[i]; i++)
        if (!strcmp(list[i], name)) return 1;
    return 0;
}

/* A short lowercase word, and one this host knows for the manifest's backend: an unknown
 * requirement, or another backend's, is refused rather than left to fail in the driver. */
static int need_requirement(sink *s, const cJSON *v, const char *field, const char *entry_point,
                            int backend) {
    if (!cJSON_IsString(v) || !is_requirement(v->valuestring))
        return refuse(s->error, s->size, "MAN002", field,
                      "%s%.60s%s is not a requirement ([a-z0-9][a-z0-9_.-]*, at most %d characters)",
                      cJSON_IsString(v) ? "\"" : "", cJSON_IsString(v) ? v->valuestring : kind_of(v),
                      cJSON_IsString(v) ? "\"" : "", MANIFEST_MAX_REQUIREMENT);
    const char *r = v->valuestring;
    if (in_list(REQUIREMENTS[backend], r)) return 1;
    for (int b = 0; BACKENDS[b]; b++)
        if (in_list(REQUIREMENTS[b], r))
            return refuse(s->error, s->size, "MAN002", field,
                          "kernel `%s` requires `%s`, which is for %s kernels, not %s",
                          entry_point, r, BACKENDS[b], BACKENDS[backend]);
    return refuse(s->error, s->size, "MAN002", field,
                  "kernel `%s` requires `%s`, which this host does not know", entry_point, r);
}

int manifest_check_cuda_capability(const manifest *m, int major, int minor, const char *device,
                                   char *error, size_t error_size) {
    for (int k = 0; k < m->kernel_count; k++)
        for (int r = 0; r < m->kernels[k].require_count; r++) {
            const char *requirement = m->kernels[k].requires[r], *name = m->kernels[k].entry_point;
            if (strcmp(requirement, "sm_90a"))
                return error_out(error, error_size,
                                 "kernel `%s` requires `%s`, which this host does not know", name,
                                 requirement);
            if (major != 9 || minor != 0)
                return error_out(error, error_size,
                                 "kernel `%s` requires `sm_90a` (compute capability 9.0); %s has "
                                 "compute capability %d.%d",
                                 name, device, major, minor);
        }
    return 1;
}

static int load_kernel(manifest *m, sink *s, int index, const cJSON *entry, int backend) {
    manifest_kernel *k = &m->kernels[index];
    entry_path where;
    field_path at;
    snprintf(where, sizeof where, "kernels[%d]", index);
    if (!need_object(s, entry, where)) return 0;
    const cJSON *file = member(entry, "file");
    snprintf(at, sizeof at, "%s.file", where);
    if (!cJSON_IsString(file)) return refuse(s->error, s->size, "MAN002", at, "must be a file name");
    k->file = file->valuestring;
    if (!is_plain_file_name(k->file))
        return refuse(s->error, s->size, "MAN004", at,
                      "\"%.60s\" is not a plain file name in the manifest's folder (letters, digits, "
                      "`_`, `.`, `-`; no separator, no scheme)", k->file);
    const char *suffix = SUFFIXES[backend];
    size_t n = strlen(k->file), ns = strlen(suffix);
    if (n < ns || strcmp(k->file + n - ns, suffix))
        return refuse(s->error, s->size, "MAN004", at, "\"%.60s\" is not a %s file (`%s`)", k->file,
                      BACKENDS[backend], suffix);
    snprintf(at, sizeof at, "%s.entry_point", where);
    if (!need_identifier(s, member(entry, "entry_point"), at, &k->entry_point)) return 0;

    const cJSON *size = member(entry, "workgroup_size");
    snprintf(at, sizeof at, "%s.workgroup_size", where);
    if (!cJSON_IsArray(size) || cJSON_GetArraySize(size) != 3)
        return refuse(s->error, s->size, "MAN002", at, "must be a list of 3 integers");
    const int64_t limits[3] = {1024, 1024, 64};
    int64_t threads = 1;
    for (int a = 0; a < 3; a++) {
        snprintf(at, sizeof at, "%s.workgroup_size[%d]", where, a);
        if (!need_integer(s, cJSON_GetArrayItem(size, a), at, 1, (double)U32_MAX, "MAN007",
                          &k->workgroup_size[a]))
            return 0;
        if (k->workgroup_size[a] > limits[a])
            return refuse(s->error, s->size, "MAN007", at, "%lld threads is over the limit of %lld",
                          (long long)k->workgroup_size[a], (long long)limits[a]);
        threads *= k->workgroup_size[a];
    }
    if (threads > 1024) {
        snprintf(at, sizeof at, "%s.workgroup_size", where);
        return refuse(s->error, s->size, "MAN007", at,
                      "%lld threads per workgroup is over the limit of 1024", (long long)threads);
    }
    const cJSON *groups = member(entry, "workgroups");
    snprintf(at, sizeof at, "%s.workgroups", where);
    if (!cJSON_IsArray(groups) || cJSON_GetArraySize(groups) != 3)
        return refuse(s->error, s->size, "MAN002", at, "must be a list of 3 sizes");
    for (int a = 0; a < 3; a++) {
        snprintf(at, sizeof at, "%s.workgroups[%d]", where, a);
        k->groups_expr[a] = cJSON_GetArrayItem(groups, a);
        if (!need_size(m, s, k->groups_expr[a], at, "MAN007")) return 0;
    }

    const cJSON *bindings = member(entry, "bindings");
    snprintf(at, sizeof at, "%s.bindings", where);
    if (!need_list(s, bindings, at, MANIFEST_MAX_BINDINGS, &k->binding_count)) return 0;
    int i = 0;
    for (const cJSON *b = bindings->child; b; b = b->next, i++) {
        manifest_binding *slot = &k->bindings[i];
        place_path here;
        snprintf(here, sizeof here, "%s.bindings[%d]", where, i);
        if (!need_object(s, b, here)) return 0;
        const char *name;
        snprintf(at, sizeof at, "%s.buffer", here);
        if (!need_identifier(s, member(b, "buffer"), at, &name)) return 0;
        slot->buffer = -1;
        for (int j = 0; j < m->buffer_count; j++)
            if (!strcmp(m->buffers[j].name, name)) slot->buffer = j;
        if (slot->buffer < 0)
            return refuse(s->error, s->size, "MAN003", at, "names no buffer of the manifest: `%s`", name);
        if (!place_of(s, b, here, &slot->group, &slot->binding)) return 0;
        int access;
        snprintf(at, sizeof at, "%s.access", here);
        if (!need_choice(s, member(b, "access"), ACCESS, at, &access)) return 0;
        slot->read_only = access == 0;
        for (int j = 0; j < i; j++) {
            const manifest_binding *other = &k->bindings[j];
            if (other->group == slot->group && other->binding == slot->binding)
                return refuse(s->error, s->size, "MAN008", here,
                              "`%s` and `%s` are both at group %d, binding %d", name,
                              m->buffers[other->buffer].name, slot->group, slot->binding);
        }
        for (int j = 0; j < i; j++)
            if (k->bindings[j].buffer == slot->buffer)
                return refuse(s->error, s->size, "MAN008", here,
                              "buffer `%s` is bound twice by one kernel", name);
    }
    const cJSON *ub = member(entry, "uniform_binding");
    int places = k->binding_count;
    if (ub && !cJSON_IsNull(ub)) {
        snprintf(at, sizeof at, "%s.uniform_binding", where);
        if (!need_object(s, ub, at)) return 0;
        if (!place_of(s, ub, at, &k->uniform_group, &k->uniform_binding)) return 0;
        if (!m->has_uniform)
            return refuse(s->error, s->size, "MAN009", at, "the manifest has no uniform to bind");
        for (int j = 0; j < k->binding_count; j++)
            if (k->bindings[j].group == k->uniform_group && k->bindings[j].binding == k->uniform_binding)
                return refuse(s->error, s->size, "MAN008", at,
                              "the uniform and `%s` are both at group %d, binding %d",
                              m->buffers[k->bindings[j].buffer].name, k->uniform_group,
                              k->uniform_binding);
        k->has_uniform = 1;
        places++;
    }
    int is_ptx = !strcmp(BACKENDS[backend], "ptx"), is_msl = !strcmp(BACKENDS[backend], "msl");
    snprintf(at, sizeof at, "%s.bindings", where);
    if (is_ptx || is_msl) {
        int nonzero = k->has_uniform && k->uniform_group;
        for (int j = 0; j < k->binding_count; j++) nonzero |= k->bindings[j].group != 0;
        if (nonzero)
            return refuse(s->error, s->size, "MAN008", at, "%s binds everything in group 0",
                          BACKENDS[backend]);
    }
    if (is_ptx) {
        /* positions 0..places-1, each once: with unique places (checked above) it is enough
         * that every position is below the count */
        for (int j = 0; j < k->binding_count + k->has_uniform; j++) {
            int position = j < k->binding_count ? k->bindings[j].binding : k->uniform_binding;
            if (position >= places)
                return refuse(s->error, s->size, "MAN008", at,
                              "PTX parameter positions must be 0 to %d, each once", places - 1);
        }
    }
    const cJSON *requires = member(entry, "requires");
    if (requires) {
        snprintf(at, sizeof at, "%s.requires", where);
        if (!need_list(s, requires, at, MANIFEST_MAX_REQUIRES, &k->require_count)) return 0;
        int r = 0;
        for (const cJSON *q = requires->child; q; q = q->next, r++) {
            snprintf(at, sizeof at, "%s.requires[%d]", where, r);
            if (!need_requirement(s, q, at, k->entry_point, backend)) return 0;
            k->requires[r] = q->valuestring;
        }
    }
    return 1;
}

int manifest_parse(manifest *m, const char *text, size_t length, const char *directory,
                   const char *backend, char *error, size_t error_size) {
    memset(m, 0, sizeof *m);
    snprintf(m->directory, sizeof m->directory, "%s", directory);
    sink s = {error, error_size};
    char why[256];
    if (length > MANIFEST_MAX_BYTES)
        return refuse(error, error_size, "MAN001", NULL, "the manifest is %zu bytes, over the limit of %d",
                      length, MANIFEST_MAX_BYTES);
    if (!json_check(text, length, MANIFEST_MAX_JSON_DEPTH, why, sizeof why))
        return refuse(error, error_size, "MAN001", NULL, "%s", why);
    m->root = cJSON_ParseWithLengthOpts(text, length, NULL, 0);
    if (!m->root) return refuse(error, error_size, "MAN001", NULL, "the manifest cannot be parsed");
    if (!json_unique_keys(m->root, why, sizeof why))
        return refuse(error, error_size, "MAN001", NULL, "%s", why);

    if (!need_object(&s, m->root, "(manifest)")) return 0;
    const cJSON *format = member(m->root, "format");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, "mimir-manifest/1"))
        return refuse(error, error_size, "MAN002", "format",
                      "unsupported manifest format; expected \"mimir-manifest/1\"");
    if (!need_identifier(&s, member(m->root, "function"), "function", &m->function)) return 0;
    int which;
    if (!need_choice(&s, member(m->root, "backend"), BACKENDS, "backend", &which)) return 0;
    m->backend = BACKENDS[which];
    if (backend && strcmp(backend, m->backend))
        return refuse(error, error_size, "MAN002", "backend",
                      "this host runs %s, not %s: compile the kernels for it with "
                      "`mimir compile-gpu --backend %s`", backend, m->backend, backend);
    if (!load_dims(m, &s) || !load_buffers(m, &s) || !load_solves(m, &s) || !load_uniform(m, &s))
        return 0;
    const cJSON *kernels = member(m->root, "kernels");
    if (!need_list(&s, kernels, "kernels", MANIFEST_MAX_KERNELS, &m->kernel_count)) return 0;
    m->kernels = calloc((size_t)m->kernel_count + 1, sizeof *m->kernels);
    if (!m->kernels) return error_out(error, error_size, "out of memory");
    int i = 0;
    for (const cJSON *entry = kernels->child; entry; entry = entry->next, i++)
        if (!load_kernel(m, &s, i, entry, which)) return 0;
    return 1;
}

/* Opens a kernel file of the manifest's folder for reading: no link followed, and no wait
 * on a FIFO (O_NONBLOCK); -1 with the refusal in `error`. */
static int open_kernel(const manifest *m, int k, struct stat *info, char *error, size_t error_size) {
    char path[8192];
    field_path at;
    const char *name = m->kernels[k].file;
    snprintf(at, sizeof at, "kernels[%d].file", k);
    snprintf(path, sizeof path, "%s/%s", m->directory, name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int why = errno;
        refuse(error, error_size, "MAN004", at, "kernel file `%s` %s (%s)", name,
               why == ENOENT ? "does not exist"
               : why == ELOOP ? "is a symbolic link"
                              : strerror(why),
               path);
        return -1;
    }
    if (fstat(fd, info) != 0 || !S_ISREG(info->st_mode)) {
        close(fd);
        refuse(error, error_size, "MAN004", at, "kernel file `%s` is not a regular file", name);
        return -1;
    }
    if (info->st_size > MANIFEST_MAX_KERNEL_FILE_BYTES) {
        close(fd);
        refuse(error, error_size, "MAN004", at, "kernel file `%s` is %lld bytes, over the limit of %d",
               name, (long long)info->st_size, MANIFEST_MAX_KERNEL_FILE_BYTES);
        return -1;
    }
    return fd;
}

void *manifest_read_kernel(const manifest *m, int k, size_t *size, char *error, size_t error_size) {
    struct stat info;
    int fd = open_kernel(m, k, &info, error, error_size);
    if (fd < 0) return NULL;
    size_t capacity = (size_t)info.st_size;
    char *data = malloc(capacity + 1);
    size_t used = 0;
    while (data && used < capacity) {
        ssize_t n = read(fd, data + used, capacity - used);
        if (n <= 0) break;
        used += (size_t)n;
    }
    close(fd);
    if (!data) {
        error_out(error, error_size, "out of memory");
        return NULL;
    }
    data[used] = '\0';
    *size = used;
    return data;
}

int manifest_load(manifest *m, const char *path, const char *backend, char *error,
                  size_t error_size) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat info;
    if (fd < 0)
        return refuse(error, error_size, "MAN001", NULL, "the manifest cannot be read: %s (%s)",
                      strerror(errno), path);
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        return refuse(error, error_size, "MAN001", NULL, "the manifest is not a regular file (%s)", path);
    }
    if (info.st_size > MANIFEST_MAX_BYTES) {
        close(fd);
        return refuse(error, error_size, "MAN001", NULL, "the manifest is %lld bytes, over the limit of %d",
                      (long long)info.st_size, MANIFEST_MAX_BYTES);
    }
    size_t capacity = (size_t)info.st_size, used = 0;
    char *text = malloc(capacity + 1);
    while (text && used < capacity) {
        ssize_t n = read(fd, text + used, capacity - used);
        if (n <= 0) break;
        used += (size_t)n;
    }
    close(fd);
    if (!text) return error_out(error, error_size, "out of memory");
    const char *slash = strrchr(path, '/');
    char directory[4096];
    snprintf(directory, sizeof directory, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(directory, sizeof directory, "/");
    int ok = manifest_parse(m, text, used, directory, backend, error, error_size);
    free(text);
    for (int k = 0; ok && k < m->kernel_count; k++) {
        int kernel_fd = open_kernel(m, k, &info, error, error_size);
        if (kernel_fd < 0) ok = 0;
        else close(kernel_fd);
    }
    return ok;
}

void manifest_free(manifest *m) {
    cJSON_Delete(m->root);
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
            return refuse(error, error_size, "GPU042", NULL, "dim `%s` must be an integer, got `%.40s`",
                          name, value);
        m->dims[i].value = v;
        m->dims[i].bound = 1;
        return 1;
    }
    for (int i = 0; i < m->field_count; i++) {
        manifest_field *f = &m->fields[i];
        if (strcmp(f->name, name)) continue;
        double x = strtod(value, &end);
        if (*end || end == value)
            return refuse(error, error_size, "GPU041", NULL, "scalar `%s` must be a number, got `%.40s`",
                          name, value);
        int fits = !strcmp(f->type, "f32") ? !isfinite(x) || fabs(x) <= 3.4028234663852886e38
                   : !strcmp(f->type, "i32") ? is_integral(x) && x >= -2147483648.0 && x <= 2147483647.0
                                             : is_integral(x) && x >= 0 && x <= 4294967295.0;
        if (!fits)
            return refuse(error, error_size, "GPU041", NULL, "scalar `%s`=%.40s does not fit %s", name,
                          value, f->type);
        f->scalar = x;
        f->scalar_set = 1;
        return 1;
    }
    return refuse(error, error_size, "GPU040", NULL, "`%s` has no dim or scalar named `%.60s`",
                  m->function, name);
}

/* Whether every dim a size names has a value (a number names none). */
static int names_bound(const manifest *m, const cJSON *expr) {
    if (!cJSON_IsString(expr)) return 1;
    for (const char *p = expr->valuestring; *p;) {
        if (!is_name_char(*p)) {
            p++;
            continue;
        }
        const char *start = p;
        while (is_name_char(*p)) p++;
        size_t n = (size_t)(p - start);
        for (int i = 0; i < m->dim_count; i++)
            if (strlen(m->dims[i].name) == n && !memcmp(m->dims[i].name, start, n) && !m->dims[i].bound)
                return 0;
    }
    return 1;
}

int manifest_solve(manifest *m, const int64_t *const *shapes, char *error, size_t error_size) {
    field_path at;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int i = 0; i < m->dim_count; i++) {
            manifest_dim *d = &m->dims[i];
            if (!d->has_solve || d->bound || !shapes[d->solve_buffer]) continue;
            if (!names_bound(m, d->solve_scale) || !names_bound(m, d->solve_offset)) continue;
            int64_t scale, offset, rest, size = shapes[d->solve_buffer][d->solve_axis];
            snprintf(at, sizeof at, "dims[%d].solve.scale", i);
            if (!eval_entry(m, d->solve_scale, &scale, at, error, error_size)) return 0;
            if (scale < 1)
                return refuse(error, error_size, "MAN005", at, "scale %lld of dim `%s` is below 1",
                              (long long)scale, d->name);
            snprintf(at, sizeof at, "dims[%d].solve.offset", i);
            if (!eval_entry(m, d->solve_offset, &offset, at, error, error_size)) return 0;
            if (__builtin_sub_overflow(size, offset, &rest))
                return refuse(error, error_size, "GPU042", NULL, "dim `%s` would be (%lld - %lld) / %lld, "
                              "outside the 64-bit range", d->name, (long long)size, (long long)offset,
                              (long long)scale);
            if (rest % scale) {
                char left[64];
                if (offset) snprintf(left, sizeof left, "%lld - %lld", (long long)size, (long long)offset);
                else snprintf(left, sizeof left, "%lld", (long long)size);
                return refuse(error, error_size, "GPU040", NULL,
                              "argument `%s` has size %lld on axis %d, which fits no `%s` (%s is not a "
                              "multiple of %lld)", m->buffers[d->solve_buffer].name, (long long)size,
                              d->solve_axis, d->name, left, (long long)scale);
            }
            d->value = rest / scale;
            d->bound = 1;
            progress = 1;
        }
    }
    return 1;
}

int manifest_bind(manifest *m, char *error, size_t error_size) {
    field_path at;
    for (int i = 0; i < m->dim_count; i++) {
        const manifest_dim *d = &m->dims[i];
        if (!d->bound) return refuse(error, error_size, "GPU035", NULL, "no value given for dim `%s`", d->name);
        if (d->has_min && d->value < d->min)
            return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld is below its minimum %lld",
                          d->name, (long long)d->value, (long long)d->min);
        if (d->has_max && d->value > d->max)
            return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld is above its maximum %lld",
                          d->name, (long long)d->value, (long long)d->max);
        if (d->has_multiple_of && d->multiple_of && d->value % d->multiple_of)
            return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld is not a multiple of %lld",
                          d->name, (long long)d->value, (long long)d->multiple_of);
        if (d->value > U32_MAX)
            return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld does not fit its u32 uniform field",
                          d->name, (long long)d->value);
        if (d->value < 0)
            return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld is negative", d->name,
                          (long long)d->value);
    }
    for (int i = 0; i < m->dim_count; i++) { /* relations, once every dim is bound */
        const manifest_dim *d = &m->dims[i];
        const cJSON *exprs[] = {d->min_expr, d->max_expr};
        for (int k = 0; k < 2; k++) {
            int64_t limit;
            if (!exprs[k]) continue;
            snprintf(at, sizeof at, "dims[%d].%s", i, k ? "max" : "min");
            if (!eval_entry(m, exprs[k], &limit, at, error, error_size)) return 0;
            if (k ? d->value > limit : d->value < limit)
                return refuse(error, error_size, "GPU042", NULL, "dim `%s`=%lld is %s %s=%lld", d->name,
                              (long long)d->value, k ? "above its maximum" : "below its minimum",
                              exprs[k]->valuestring, (long long)limit);
        }
    }
    for (int i = 0; i < m->field_count; i++)
        if (!m->fields[i].is_dim && !m->fields[i].scalar_set)
            return refuse(error, error_size, "GPU040", NULL, "no value given for scalar `%s`",
                          m->fields[i].name);
    for (int i = 0; i < m->buffer_count; i++) {
        manifest_buffer *b = &m->buffers[i];
        b->count = 1;
        for (int a = 0; a < b->rank; a++) {
            snprintf(at, sizeof at, "buffers[%d].shape[%d]", i, a);
            if (!eval_entry(m, b->shape_expr[a], &b->shape[a], at, error, error_size)) return 0;
            if (b->shape[a] < 0 || b->shape[a] > U32_MAX)
                return refuse(error, error_size, "MAN006", at,
                              "buffer `%s` would have %lld elements along axis %d", b->name,
                              (long long)b->shape[a], a);
        }
        /* each factor is at most 2^32 - 1: a product over it is found by division, before
         * it is formed; an empty axis anywhere makes the buffer empty */
        for (int a = 0; a < b->rank; a++)
            if (b->shape[a] == 0) b->count = 0;
        for (int a = 0; a < b->rank && b->count; a++) {
            if (b->count > U32_MAX / b->shape[a]) {
                snprintf(at, sizeof at, "buffers[%d].shape", i);
                return refuse(error, error_size, "MAN006", at,
                              "buffer `%s` would have more than 2^32 - 1 elements; kernels index "
                              "with 32-bit integers", b->name);
            }
            b->count *= b->shape[a];
        }
        b->bytes = b->count * b->element_size;
        if (!strcmp(b->dtype, "bfloat16")) b->bytes += b->bytes % 4; /* whole 32-bit words */
    }
    for (int k = 0; k < m->kernel_count; k++) {
        for (int a = 0; a < 3; a++) {
            snprintf(at, sizeof at, "kernels[%d].workgroups[%d]", k, a);
            if (!eval_entry(m, m->kernels[k].groups_expr[a], &m->kernels[k].groups[a], at, error,
                            error_size))
                return 0;
            if (m->kernels[k].groups[a] < 0 || m->kernels[k].groups[a] > U32_MAX)
                return refuse(error, error_size, "MAN007", at,
                              "kernel `%s` would launch %lld workgroups along %c",
                              m->kernels[k].entry_point, (long long)m->kernels[k].groups[a], "xyz"[a]);
        }
    }
    for (int i = 0; i < m->buffer_count; i++) {
        manifest_buffer *b = &m->buffers[i];
        for (int e = 0; e < 2 && b->has_range; e++) {
            snprintf(at, sizeof at, "buffers[%d].range[%d]", i, e);
            if (!eval_entry(m, b->range_expr[e], &b->range[e], at, error, error_size)) return 0;
        }
    }
    return 1;
}

int manifest_check_limits(const manifest *m, const manifest_limits *limits, char *error,
                          size_t error_size) {
    field_path at;
    for (int i = 0; i < m->buffer_count; i++) {
        const manifest_buffer *b = &m->buffers[i];
        if (limits->binding_bytes && (uint64_t)b->bytes > limits->binding_bytes) {
            snprintf(at, sizeof at, "buffers[%d].shape", i);
            return refuse(error, error_size, "MAN006", at,
                          "buffer `%s` would be %lld bytes, over this device's limit of %llu for one binding",
                          b->name, (long long)b->bytes, (unsigned long long)limits->binding_bytes);
        }
    }
    for (int k = 0; k < m->kernel_count; k++) {
        const manifest_kernel *kernel = &m->kernels[k];
        uint64_t threads = 1;
        for (int a = 0; a < 3; a++) {
            threads *= (uint64_t)kernel->workgroup_size[a];
            if (limits->workgroup_size[a] && (uint64_t)kernel->workgroup_size[a] > limits->workgroup_size[a]) {
                snprintf(at, sizeof at, "kernels[%d].workgroup_size[%d]", k, a);
                return refuse(error, error_size, "MAN007", at, "%lld threads is over this device's limit of %llu",
                              (long long)kernel->workgroup_size[a],
                              (unsigned long long)limits->workgroup_size[a]);
            }
        }
        if (limits->workgroup_threads && threads > limits->workgroup_threads) {
            snprintf(at, sizeof at, "kernels[%d].workgroup_size", k);
            return refuse(error, error_size, "MAN007", at,
                          "%llu threads per workgroup is over this device's limit of %llu",
                          (unsigned long long)threads, (unsigned long long)limits->workgroup_threads);
        }
        for (int a = 0; a < 3; a++) {
            if (limits->workgroups[a] && (uint64_t)kernel->groups[a] > limits->workgroups[a]) {
                snprintf(at, sizeof at, "kernels[%d].workgroups[%d]", k, a);
                return refuse(error, error_size, "MAN007", at,
                              "kernel `%s` would launch %lld workgroups along %c; this device takes 0 to %llu",
                              kernel->entry_point, (long long)kernel->groups[a], "xyz"[a],
                              (unsigned long long)limits->workgroups[a]);
            }
        }
        if (limits->bindings && (uint64_t)kernel->binding_count > limits->bindings) {
            snprintf(at, sizeof at, "kernels[%d].bindings", k);
            return refuse(error, error_size, "MAN008", at,
                          "%d storage buffers are over this device's limit of %llu per kernel",
                          kernel->binding_count, (unsigned long long)limits->bindings);
        }
    }
    return 1;
}

int manifest_check_range(const manifest_buffer *b, const uint8_t *data, char *error,
                         size_t error_size) {
    if (!b->has_range) return 1;
    int is_signed = !strcmp(b->dtype, "int32");
    for (int64_t i = 0; i < b->count; i++) {
        if (!data && i > 0) break; /* all zeros: the first says it */
        const uint8_t *p = data ? data + 4 * i : (const uint8_t *)"\0\0\0";
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
            int32_t x = value >= -2147483648.0 && value <= 2147483647.0 ? (int32_t)value : 0;
            memcpy(&word, &x, 4);
        } else {
            word = value >= 0 && value <= 4294967295.0 ? (uint32_t)value : 0;
        }
        /* little-endian, whatever the host's byte order */
        for (int byte = 0; byte < 4; byte++) out[4 * i + byte] = (uint8_t)(word >> (8 * byte));
    }
    return size;
}
