/* Strict JSON for manifests; see json_check.h. */
#include "json_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *start, *p, *end;
    int max_depth;
    char *error;
    size_t error_size;
} checker;

static int fail(checker *c, const char *what) {
    snprintf(c->error, c->error_size, "the manifest is not JSON: %s at byte %ld", what,
             (long)(c->p - c->start));
    return 0;
}

/* Well-formed UTF-8 (RFC 3629): no overlong form, no surrogate, nothing past U+10FFFF. */
static int utf8_ok(const unsigned char *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t len;
        uint32_t lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
        if (b < 0x80) { i++; continue; }
        if (b >= 0xC2 && b <= 0xDF) len = 2;
        else if (b == 0xE0) { len = 3; lo = 0xA0; }
        else if (b == 0xED) { len = 3; hi = 0x9F; } /* no UTF-16 surrogates */
        else if (b >= 0xE1 && b <= 0xEF) len = 3;
        else if (b == 0xF0) { len = 4; lo = 0x90; }
        else if (b == 0xF4) { len = 4; hi = 0x8F; }
        else if (b >= 0xF1 && b <= 0xF3) len = 4;
        else { *bad = i; return 0; }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) { *bad = i; return 0; }
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) { *bad = i; return 0; }
        i += len;
    }
    return 1;
}

static void skip_space(checker *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex4(checker *c, unsigned *code) {
    *code = 0;
    for (int i = 0; i < 4; i++) {
        if (c->p >= c->end) return fail(c, "a truncated \\u escape");
        unsigned char h = *c->p++;
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0) return fail(c, "a bad \\u escape");
        *code = *code * 16 + (unsigned)d;
    }
    return 1;
}

static int string(checker *c) {
    c->p++; /* the opening quote */
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = *c->p;
        if (ch < 0x20) return fail(c, "a control character in a string");
        c->p++;
        if (ch != '\\') continue;
        if (c->p >= c->end) break;
        unsigned char e = *c->p++;
        if (strchr("\"\\/bfnrt", e) && e) continue;
        if (e != 'u') return fail(c, "a bad escape");
        unsigned code;
        if (!hex4(c, &code)) return 0;
        if (code == 0) return fail(c, "U+0000 in a string");
        if (code >= 0xDC00 && code <= 0xDFFF) return fail(c, "a lone surrogate escape");
        if (code >= 0xD800 && code <= 0xDBFF) {
            if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u')
                return fail(c, "a lone surrogate escape");
            c->p += 2;
            if (!hex4(c, &code)) return 0;
            if (code < 0xDC00 || code > 0xDFFF) return fail(c, "a lone surrogate escape");
        }
    }
    if (c->p >= c->end) return fail(c, "an unterminated string");
    c->p++;
    return 1;
}

static int digits(checker *c) {
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return fail(c, "a malformed number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
    return 1;
}

static int number(checker *c) {
    if (*c->p == '-') c->p++;
    if (c->p < c->end && *c->p == '0') c->p++;
    else if (!digits(c)) return 0;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!digits(c)) return 0;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
        if (!digits(c)) return 0;
    }
    return 1;
}

static int literal(checker *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n)) return fail(c, "an unexpected byte");
    c->p += n;
    return 1;
}

/* One value; recursion is bounded by `max_depth`. */
static int value(checker *c, int depth) {
    skip_space(c);
    if (c->p >= c->end) return fail(c, "an unexpected end");
    unsigned char ch = *c->p;
    if (ch == '"') return string(c);
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number(c);
    if (ch == 't') return literal(c, "true");
    if (ch == 'f') return literal(c, "false");
    if (ch == 'n') return literal(c, "null");
    if (ch != '[' && ch != '{') return fail(c, "an unexpected byte");
    if (depth + 1 > c->max_depth) {
        snprintf(c->error, c->error_size, "the manifest nests deeper than %d levels", c->max_depth);
        return 0;
    }
    unsigned char close = ch == '[' ? ']' : '}';
    c->p++;
    skip_space(c);
    if (c->p < c->end && *c->p == close) { c->p++; return 1; }
    for (;;) {
        if (close == '}') {
            skip_space(c);
            if (c->p >= c->end || *c->p != '"') return fail(c, "a missing key");
            if (!string(c)) return 0;
            skip_space(c);
            if (c->p >= c->end || *c->p != ':') return fail(c, "a missing ':'");
            c->p++;
        }
        if (!value(c, depth + 1)) return 0;
        skip_space(c);
        if (c->p < c->end && *c->p == ',') { c->p++; continue; }
        if (c->p < c->end && *c->p == close) { c->p++; return 1; }
        return fail(c, close == ']' ? "a missing ',' or ']'" : "a missing ',' or '}'");
    }
}

int json_check(const char *text, size_t length, int max_depth, char *error, size_t error_size) {
    const unsigned char *s = (const unsigned char *)text;
    size_t bad;
    if (!utf8_ok(s, length, &bad)) {
        snprintf(error, error_size, "the manifest is not UTF-8 (byte %zu)", bad);
        return 0;
    }
    checker c = {s, s, s + length, max_depth, error, error_size};
    if (length >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF)
        return fail(&c, "a byte order mark");
    if (!value(&c, 0)) return 0;
    skip_space(&c);
    if (c.p != c.end) return fail(&c, "bytes after the value");
    return 1;
}

static int by_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int json_unique_keys(const cJSON *root, char *error, size_t error_size) {
    /* Depth is bounded by json_check, so the recursion is too; sorting the keys keeps a
     * hostile object of many members from costing n^2 comparisons. */
    if (!root) return 1;
    if (cJSON_IsObject(root)) {
        size_t count = 0, i = 0;
        for (const cJSON *item = root->child; item; item = item->next) count++;
        const char **keys = malloc((count ? count : 1) * sizeof *keys);
        if (!keys) {
            snprintf(error, error_size, "out of memory");
            return 0;
        }
        for (const cJSON *item = root->child; item; item = item->next) keys[i++] = item->string;
        qsort(keys, count, sizeof *keys, by_key);
        for (i = 1; i < count; i++) {
            if (!strcmp(keys[i - 1], keys[i])) {
                snprintf(error, error_size, "the manifest has the key \"%.60s\" twice in one object",
                         keys[i]);
                free(keys);
                return 0;
            }
        }
        free(keys);
    }
    for (const cJSON *item = root->child; item; item = item->next)
        if (!json_unique_keys(item, error, error_size)) return 0;
    return 1;
}
