/* trace.c — the traceparent check (see trace.h). Reads only its arguments.
 *
 * Owns: nothing. Locks: none. Threads: any. */
#include "core/trace.h"

static bool lower_hex(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* n lowercase hex digits at s; *nonzero tells whether any of them is not '0'. */
static bool hex_field(const unsigned char *s, size_t n, bool *nonzero) {
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (!lower_hex(s[i])) return false;
        if (s[i] != '0') any = true;
    }
    if (nonzero) *nonzero = any;
    return true;
}

bool cs__traceparent_valid(const void *value, size_t len) {
    const unsigned char *s = value;
    if (!s || len != CS_TRACEPARENT_LEN) return false;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-') return false;
    bool trace_nonzero = false, parent_nonzero = false;
    if (!hex_field(s, 2, NULL) || !hex_field(s + 3, CS_TRACE_ID_LEN, &trace_nonzero) ||
        !hex_field(s + 36, 16, &parent_nonzero) || !hex_field(s + 53, 2, NULL))
        return false;
    if (s[0] == 'f' && s[1] == 'f') return false; /* version ff is forbidden */
    return trace_nonzero && parent_nonzero;
}
