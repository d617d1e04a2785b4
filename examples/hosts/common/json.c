/* A small recursive-descent JSON reader; see json.h. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *start, *p, *end;
    char *error;
    size_t error_size;
} reader;

static int fail(reader *r, const char *what) {
    if (r->error && r->error[0] == '\0')
        snprintf(r->error, r->error_size, "JSON: %s at byte %ld", what, (long)(r->p - r->start));
    return 0;
}

static void skip_space(reader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static json_value *new_value(json_type type) {
    json_value *v = calloc(1, sizeof *v);
    if (v) v->type = type;
    return v;
}

static int append(json_value *v, json_value *item, char *key) {
    json_value **items = realloc(v->items, (v->count + 1) * sizeof *items);
    if (!items) return 0;
    v->items = items;
    if (v->type == JSON_OBJECT) {
        char **keys = realloc(v->keys, (v->count + 1) * sizeof *keys);
        if (!keys) return 0;
        v->keys = keys;
        v->keys[v->count] = key;
    }
    v->items[v->count++] = item;
    return 1;
}

static void put_utf8(char **out, unsigned code) {
    char *o = *out;
    if (code < 0x80) {
        *o++ = (char)code;
    } else if (code < 0x800) {
        *o++ = (char)(0xC0 | (code >> 6));
        *o++ = (char)(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        *o++ = (char)(0xE0 | (code >> 12));
        *o++ = (char)(0x80 | ((code >> 6) & 0x3F));
        *o++ = (char)(0x80 | (code & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (code >> 18));
        *o++ = (char)(0x80 | ((code >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((code >> 6) & 0x3F));
        *o++ = (char)(0x80 | (code & 0x3F));
    }
    *out = o;
}

static int hex4(reader *r, unsigned *code) {
    *code = 0;
    for (int i = 0; i < 4; i++, r->p++) {
        if (r->p >= r->end) return fail(r, "truncated \\u escape");
        char c = *r->p;
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return fail(r, "bad \\u escape");
        *code = *code * 16 + (unsigned)d;
    }
    return 1;
}

/* A string token (the opening quote already seen); a new NUL-terminated copy. */
static char *read_string(reader *r) {
    const char *start = r->p;
    /* Escapes never lengthen the text (\uXXXX: 6 bytes in, at most 4 out). */
    char *out = malloc((size_t)(r->end - start) + 1), *o = out;
    if (!out) return NULL;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20) { fail(r, "control character in a string"); free(out); return NULL; }
        if (c != '\\') { *o++ = (char)c; continue; }
        if (r->p >= r->end) break;
        char e = *r->p++;
        unsigned code;
        switch (e) {
            case '"': *o++ = '"'; break;
            case '\\': *o++ = '\\'; break;
            case '/': *o++ = '/'; break;
            case 'b': *o++ = '\b'; break;
            case 'f': *o++ = '\f'; break;
            case 'n': *o++ = '\n'; break;
            case 'r': *o++ = '\r'; break;
            case 't': *o++ = '\t'; break;
            case 'u':
                if (!hex4(r, &code)) { free(out); return NULL; }
                if (code >= 0xD800 && code < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' &&
                    r->p[1] == 'u') {
                    unsigned low;
                    r->p += 2;
                    if (!hex4(r, &low)) { free(out); return NULL; }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                }
                put_utf8(&o, code);
                break;
            default: fail(r, "bad escape"); free(out); return NULL;
        }
    }
    if (r->p >= r->end) { fail(r, "unterminated string"); free(out); return NULL; }
    r->p++; /* the closing quote */
    *o = '\0';
    return out;
}

static json_value *read_value(reader *r, int depth);

static json_value *read_container(reader *r, int depth, json_type type) {
    char close = type == JSON_ARRAY ? ']' : '}';
    json_value *v = new_value(type);
    if (!v) return NULL;
    skip_space(r);
    if (r->p < r->end && *r->p == close) { r->p++; return v; }
    for (;;) {
        char *key = NULL;
        skip_space(r);
        if (type == JSON_OBJECT) {
            if (r->p >= r->end || *r->p != '"') { fail(r, "expected a key"); goto bad; }
            r->p++;
            if (!(key = read_string(r))) goto bad;
            skip_space(r);
            if (r->p >= r->end || *r->p != ':') { fail(r, "expected ':'"); free(key); goto bad; }
            r->p++;
        }
        json_value *item = read_value(r, depth + 1);
        if (!item || !append(v, item, key)) { free(key); json_free(item); goto bad; }
        skip_space(r);
        if (r->p < r->end && *r->p == ',') { r->p++; continue; }
        if (r->p < r->end && *r->p == close) { r->p++; return v; }
        fail(r, type == JSON_ARRAY ? "expected ',' or ']'" : "expected ',' or '}'");
        goto bad;
    }
bad:
    json_free(v);
    return NULL;
}

static json_value *read_value(reader *r, int depth) {
    if (depth > MAX_DEPTH) { fail(r, "nested too deeply"); return NULL; }
    skip_space(r);
    if (r->p >= r->end) { fail(r, "unexpected end"); return NULL; }
    char c = *r->p;
    if (c == '{' || c == '[') {
        r->p++;
        return read_container(r, depth, c == '{' ? JSON_OBJECT : JSON_ARRAY);
    }
    if (c == '"') {
        r->p++;
        char *s = read_string(r);
        json_value *v = s ? new_value(JSON_STRING) : NULL;
        if (v) v->string = s; else free(s);
        return v;
    }
    static const struct { const char *word; json_type type; int boolean; } words[] = {
        {"true", JSON_BOOL, 1}, {"false", JSON_BOOL, 0}, {"null", JSON_NULL, 0}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(r->end - r->p) >= n && memcmp(r->p, words[i].word, n) == 0) {
            r->p += n;
            json_value *v = new_value(words[i].type);
            if (v) v->boolean = words[i].boolean;
            return v;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (r->p + n < r->end && n < sizeof buf - 1 && strchr("+-0123456789.eE", r->p[n])) n++;
        memcpy(buf, r->p, n);
        buf[n] = '\0';
        char *stop;
        double number = strtod(buf, &stop);
        if (stop != buf + n) { fail(r, "bad number"); return NULL; }
        r->p += n;
        json_value *v = new_value(JSON_NUMBER);
        if (v) v->number = number;
        return v;
    }
    fail(r, "unexpected character");
    return NULL;
}

json_value *json_parse(const char *text, size_t length, char *error, size_t error_size) {
    reader r = {text, text, text + length, error, error_size};
    if (error && error_size) error[0] = '\0';
    json_value *v = read_value(&r, 0);
    skip_space(&r);
    if (v && r.p != r.end) {
        fail(&r, "text after the value");
        json_free(v);
        return NULL;
    }
    return v;
}

void json_free(json_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const json_value *json_get(const json_value *object, const char *key) {
    if (!object || object->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < object->count; i++)
        if (strcmp(object->keys[i], key) == 0) return object->items[i];
    return NULL;
}
