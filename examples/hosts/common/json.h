/* A small JSON reader, enough for Mimir manifests (RFC 8259 values, UTF-8 text).
 *
 * json_parse() builds a tree of json_value nodes owned by one allocation list;
 * json_free() releases it. Numbers are doubles (manifest integers are far below
 * 2^53). Object members keep their order; json_get() finds one by key.
 */
#ifndef MIMIR_JSON_H
#define MIMIR_JSON_H

#include <stddef.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_type;

typedef struct json_value {
    json_type type;
    int boolean;
    double number;
    char *string;               /* JSON_STRING: NUL-terminated UTF-8 */
    size_t count;               /* JSON_ARRAY / JSON_OBJECT: number of items */
    struct json_value **items;  /* the items (an object's values) */
    char **keys;                /* JSON_OBJECT: the keys, parallel to items */
} json_value;

/* Parse `text` (length `length`); NULL on error, with a message in `error`. */
json_value *json_parse(const char *text, size_t length, char *error, size_t error_size);
void json_free(json_value *value);

/* The member `key` of an object, or NULL (also when `object` is not an object). */
const json_value *json_get(const json_value *object, const char *key);

#endif
