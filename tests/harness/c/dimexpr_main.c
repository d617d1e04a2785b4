/* Test driver for the C hosts' dim-expression evaluator (examples/hosts/common/manifest.c).
 *
 *   dimexpr NAME=VALUE ... -- EXPR ...
 *
 * prints one line per expression: its value, or `error: MESSAGE`.
 * tests/test_host_c.py compares the lines with mimir.runtime.dimexpr.evaluate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int main(int argc, char **argv) {
    manifest m;
    memset(&m, 0, sizeof m);
    m.dims = calloc((size_t)argc, sizeof *m.dims);
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) return 2;
        *eq = '\0';
        manifest_dim *d = &m.dims[m.dim_count++];
        d->name = argv[i];
        d->value = strtoll(eq + 1, NULL, 10);
        d->bound = 1;
    }
    for (i++; i < argc; i++) {
        cJSON *expr = cJSON_CreateString(argv[i]);
        char error[256];
        int64_t value;
        if (manifest_eval(&m, expr, &value, error, sizeof error))
            printf("%lld\n", (long long)value);
        else
            printf("error: %s\n", error);
        cJSON_Delete(expr);
    }
    free(m.dims);
    return 0;
}
