/* Strict JSON for manifests: what the manifest contract accepts as JSON, checked before
 * cJSON (vendored in cjson/) builds the tree.
 *
 * cJSON is lenient where the other hosts are not (it takes raw control characters in
 * strings, `01`, trailing bytes, and stops a string at an escaped NUL), so this pass
 * holds every host to the same text: RFC 8259 JSON, well-formed UTF-8 without a byte
 * order mark, arrays and objects nested at most `max_depth` deep, no `\u0000` and no
 * lone surrogate escape in a string. Object keys are compared on the tree
 * (json_unique_keys), after cJSON has decoded them.
 */
#ifndef MIMIR_JSON_CHECK_H
#define MIMIR_JSON_CHECK_H

#include <stddef.h>

#include "cjson/cJSON.h"

/* 1 when `text` (`length` bytes) is contract JSON; else 0 and why in `error`. */
int json_check(const char *text, size_t length, int max_depth, char *error, size_t error_size);

/* 1 when no object in the tree holds one key twice; else 0 and the key in `error`. */
int json_unique_keys(const cJSON *root, char *error, size_t error_size);

#endif
