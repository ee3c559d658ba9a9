/* json_decode.c — JSON text into a struct, straight from yajl's streaming
 * parser: no tree. Each callback looks at the innermost open object or array
 * (a frame), finds the member the value belongs to and writes it.
 *
 * Owns: for one call, the frame stack (one frame per open object or array, at
 * most CS_JSON_MAX_DEPTH), yajl's memory (a stack arena), and until the call
 * returns, the strings and arrays it hangs into the caller's struct. On any
 * failure those are freed and the struct is zeroed.
 *
 * Threads: pure function, any thread. Must never: malloc per record for
 * anything but what the struct owns, recurse (deep input is refused at
 * CS_JSON_MAX_DEPTH levels, counted in the callbacks), or let a value the
 * table does not describe reach the struct (wrong type, out of range, invalid
 * UTF-8, embedded NUL, too long for a char array, too many items).
 * Locks: none. */
#include "codec/codec_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "base/error.h"

#define SEEN_WORDS ((CS_TYPE_MAX_FIELDS + 63) / 64)
#define KEY_SHOWN 64    /* bytes of an unknown key kept for messages */
#define PATH_SHOWN 256  /* bytes of a field path shown in messages */
#define NUMBER_SHOWN 40 /* characters of a number shown in messages */

typedef struct frame {
    bool is_array;
    const cs_type *type;       /* object: the struct's type */
    const cs_field *field;     /* object: the field whose value comes next (NULL between
                                 fields and for an unknown key); array: the array field */
    unsigned char *base;       /* object: the struct; array: the struct holding pointer and count */
    size_t capacity;           /* array: items allocated */
    size_t hint;               /* object: the field the next key is compared with first */
    uint64_t seen[SEEN_WORDS]; /* object: fields whose key appeared */
} frame;

typedef struct decoder {
    yajl_handle yajl;
    const unsigned char *json; /* the payload (one chunk: yajl's offsets index it) */
    size_t len;
    const cs_type *root;
    void *out;
    size_t n_frames;
    unsigned depth; /* open objects and arrays, skipped ones included */
    unsigned skip;  /* > 0: this deep inside the value of an unknown key */
    bool skip_next; /* the next value belongs to an unknown key */
    cs_err err;     /* set by the callback that cancelled the parse */
    size_t unknown_len;
    char unknown_key[KEY_SHOWN];
    frame frames[CS_JSON_MAX_DEPTH];
} decoder;

/* Where the next value goes (values of unknown keys are skipped before this). */
typedef struct target {
    bool root;             /* the payload itself */
    bool element;          /* an item of the array field */
    cs_kind kind;          /* what the value must be */
    const cs_field *field; /* the member (for an item: the array field) */
} target;

/* ---- small helpers ---- */

static frame *top(decoder *d) { return &d->frames[d->n_frames - 1]; }

static size_t *array_count(const frame *fr) { return (size_t *)(fr->base + fr->field->count_offset); }

static void *load_pointer(const unsigned char *at) {
    void *p;
    memcpy(&p, at, sizeof p);
    return p;
}

static void store_pointer(unsigned char *at, void *p) { memcpy(at, &p, sizeof p); }

/* A bounded piece of message text. */
typedef struct text {
    char buf[PATH_SHOWN];
    size_t len;
} text;

static void text_add(text *t, const char *s, size_t n) {
    size_t room = sizeof t->buf - 1 - t->len;
    if (n > room) n = room;
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void text_add_name(text *t, const char *name, size_t n) {
    if (t->len > 0) text_add(t, ".", 1);
    text_add(t, name, n);
}

/* The path of the value being read, e.g. items[2].amount_cents, over the
 * first n_frames frames. */
static void render_path(const decoder *d, size_t n_frames, text *t) {
    t->len = 0;
    t->buf[0] = '\0';
    for (size_t i = 0; i < n_frames; i++) {
        const frame *fr = &d->frames[i];
        if (fr->is_array) {
            /* the item being read: appended already if it is an open object */
            size_t count = *array_count(fr);
            size_t index = i + 1 < d->n_frames ? count - 1 : count;
            char item[32];
            int n = snprintf(item, sizeof item, "[%zu]", index);
            text_add(t, item, (size_t)n);
        } else if (fr->field != NULL) {
            text_add_name(t, fr->field->name, strlen(fr->field->name));
        } else if (i + 1 == d->n_frames && (d->skip > 0 || d->skip_next)) {
            text_add_name(t, d->unknown_key, d->unknown_len);
        }
    }
}

/* Keeps the start of an unknown key for messages, quotes and control
 * characters replaced, cut at a character boundary. */
static void remember_unknown_key(decoder *d, const unsigned char *key, size_t len) {
    bool utf8 = cs__codec_utf8_valid(key, len);
    size_t n = len < KEY_SHOWN - 1 ? len : KEY_SHOWN - 1;
    while (utf8 && n < len && n > 0 && (key[n] & 0xC0) == 0x80) n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = key[i];
        bool plain = c >= 0x20 && c != '"' && c != '\\' && c != 0x7F && (c < 0x80 || utf8);
        d->unknown_key[i] = plain ? (char)c : '?';
    }
    d->unknown_key[n] = '\0';
    d->unknown_len = n;
}

/* Sets the error for the value at the current path (plus `leaf`, a field of
 * the innermost object) and cancels the parse. */
static int fail_at(decoder *d, size_t n_frames, const char *leaf, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail_at(decoder *d, size_t n_frames, const char *leaf, const char *fmt, ...) {
    text path;
    char why[512];
    va_list ap;
    render_path(d, n_frames, &path);
    if (leaf != NULL) text_add_name(&path, leaf, strlen(leaf));
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    d->err = cs__fail(CS_ERR_DECODE, "field \"%s\": %s", path.buf, why);
    return 0;
}

static int fail_no_memory(decoder *d) {
    text path;
    render_path(d, d->n_frames, &path);
    d->err = cs__fail(CS_ERR_NOMEM, "out of memory decoding field \"%s\"", path.buf);
    return 0;
}

static int fail_expected(decoder *d, const target *t, const char *got) {
    if (t->root) {
        d->err = cs__fail(CS_ERR_DECODE, "payload is not a JSON object (got %s)", got);
        return 0;
    }
    return fail_at(d, d->n_frames, NULL, "expected %s, got %s", cs__codec_kind_expectation(t->kind), got);
}

/* ---- where values go ---- */

static target next_target(decoder *d) {
    target t = {0};
    if (d->n_frames == 0) {
        t.root = true;
        t.kind = CS_KIND_OBJECT;
    } else {
        frame *fr = top(d);
        t.field = fr->field; /* never NULL: yajl only calls back with a value after a key */
        t.element = fr->is_array;
        t.kind = fr->is_array ? fr->field->elem : fr->field->kind;
    }
    return t;
}

/* Appends a zeroed item to the innermost array; NULL (error set) past its
 * max_items or out of memory. */
static void *append_item(decoder *d) {
    frame *fr = top(d);
    const cs_field *f = fr->field;
    size_t *count = array_count(fr);
    size_t max = cs__codec_array_max(f);
    if (*count >= max) {
        fail_at(d, d->n_frames - 1, NULL, "more than %zu items", max);
        return NULL;
    }
    unsigned char *items = load_pointer(fr->base + f->offset);
    if (*count == fr->capacity) {
        size_t capacity = fr->capacity ? fr->capacity * 2 : 4;
        if (capacity > max) capacity = max;
        if (capacity > SIZE_MAX / f->size) {
            fail_no_memory(d);
            return NULL;
        }
        unsigned char *grown = realloc(items, capacity * f->size);
        if (grown == NULL) {
            fail_no_memory(d);
            return NULL;
        }
        items = grown;
        store_pointer(fr->base + f->offset, items);
        fr->capacity = capacity;
    }
    unsigned char *item = items + *count * f->size;
    memset(item, 0, f->size);
    (*count)++;
    return item;
}

/* The member or new array item the value is written to; NULL on failure. */
static void *claim_slot(decoder *d, const target *t) {
    if (t->element) return append_item(d);
    return top(d)->base + t->field->offset;
}

/* A value of the innermost object is complete: the next thing is a key. */
static void value_done(decoder *d) {
    if (d->n_frames > 0 && !top(d)->is_array) top(d)->field = NULL;
}

static bool skip_scalar(decoder *d) {
    if (d->skip > 0) return true;
    if (d->skip_next) {
        d->skip_next = false;
        return true;
    }
    return false;
}

/* Depth check and skipping shared by '{' and '['. Returns 1 to go on with
 * the container, 0 on failure, -1 when it is skipped. */
static int open_container(decoder *d) {
    if (d->depth >= CS_JSON_MAX_DEPTH) {
        d->err = cs__fail(CS_ERR_DECODE, "payload nesting deeper than %d levels at byte %zu", CS_JSON_MAX_DEPTH,
                          yajl_get_bytes_consumed(d->yajl));
        return 0;
    }
    d->depth++;
    if (d->skip > 0) {
        d->skip++;
        return -1;
    }
    if (d->skip_next) {
        d->skip_next = false;
        d->skip = 1;
        return -1;
    }
    return 1;
}

/* Returns true when the closing bracket ends a skipped container. */
static bool close_container(decoder *d) {
    d->depth--;
    if (d->skip > 0) {
        d->skip--;
        return true;
    }
    return false;
}

static void push_object(decoder *d, const cs_type *type, unsigned char *base) {
    frame *fr = &d->frames[d->n_frames++];
    fr->is_array = false;
    fr->type = type;
    fr->field = NULL;
    fr->base = base;
    fr->hint = 0;
    memset(fr->seen, 0, ((type->n_fields + 63) / 64) * sizeof fr->seen[0]);
}

static const cs_field *find_field(frame *fr, const unsigned char *key, size_t len) {
    const cs_type *t = fr->type;
    size_t n = t->n_fields;
    if (len == 0) return NULL; /* field names are never empty */
    /* Keys usually come in table order: start after the last match. */
    for (size_t k = 0, i = fr->hint; k < n; k++, i = i + 1 < n ? i + 1 : 0) {
        const char *name = t->fields[i].name;
        if (name[0] == (char)key[0] && strnlen(name, len + 1) == len && memcmp(name, key, len) == 0) {
            fr->hint = i + 1 < n ? i + 1 : 0;
            return &t->fields[i];
        }
    }
    return NULL;
}

/* ---- escaped surrogates ---- */

static bool read_hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        unsigned digit = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16u;
        if (digit > 15) return false;
        v = v * 16 + digit;
    }
    *out = v;
    return true;
}

/* True if every \uD800-\uDBFF escape in raw[0..n) is followed by a
 * \uDC00-\uDFFF escape and no low one stands alone. */
static bool surrogates_paired(const unsigned char *raw, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (raw[i] != '\\') continue;
        if (raw[i + 1] != 'u' || i + 6 > n) {
            i++; /* a one-character escape */
            continue;
        }
        unsigned unit, low;
        if (!read_hex4(raw + i + 2, &unit)) return false;
        if (unit >= 0xDC00 && unit <= 0xDFFF) return false;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
            if (i + 12 > n || raw[i + 6] != '\\' || raw[i + 7] != 'u' || !read_hex4(raw + i + 8, &low) ||
                low < 0xDC00 || low > 0xDFFF)
                return false;
            i += 6;
        }
        i += 5;
    }
    return true;
}

/* yajl turns a lone "\ud800" into '?', a lone "\udc00" into an encoded
 * surrogate, and pairs a high surrogate with whatever \u escape follows. The
 * decoded text cannot tell, so for a string that had escapes (yajl then hands
 * us its own buffer, not a pointer into the payload) and that decoded to a
 * suspect byte, look at its escapes in the payload: the string token ends
 * where yajl stopped reading. */
static bool escapes_are_valid(const decoder *d, const unsigned char *s, size_t len) {
    uintptr_t p = (uintptr_t)s, lo = (uintptr_t)d->json;
    if (p >= lo && p < lo + d->len) return true; /* no escapes: yajl passed a pointer into the payload */
    /* '?': a lone high surrogate; F0-F4: a pair (maybe a bogus one); ED: a lone low one */
    bool suspect = memchr(s, '?', len) != NULL;
    for (size_t i = 0; i < len && !suspect; i++) suspect = s[i] >= 0xF0 || s[i] == 0xED;
    if (!suspect) return true;
    size_t end = yajl_get_bytes_consumed(d->yajl); /* just past the closing quote */
    if (end < 2 || end > d->len || d->json[end - 1] != '"')
        return true; /* not where we expect it: leave it to the UTF-8 check */
    /* The opening quote is the nearest '"' before it not preceded by an odd
     * number of backslashes. */
    size_t start = end - 1;
    while (start > 0) {
        start--;
        if (d->json[start] != '"') continue;
        size_t backslashes = 0;
        while (backslashes < start && d->json[start - 1 - backslashes] == '\\') backslashes++;
        if (backslashes % 2 == 0) break;
    }
    return surrogates_paired(d->json + start + 1, end - 1 - (start + 1));
}

/* ---- yajl callbacks ---- */

static int on_null(void *ctx) {
    decoder *d = ctx;
    if (skip_scalar(d)) return 1;
    target t = next_target(d);
    if (t.root || t.element || t.field->presence == CS_REQUIRED) return fail_expected(d, &t, "null");
    value_done(d); /* optional: stays zeroed */
    return 1;
}

static int on_boolean(void *ctx, int value) {
    decoder *d = ctx;
    if (skip_scalar(d)) return 1;
    target t = next_target(d);
    if (t.root || t.kind != CS_KIND_BOOL) return fail_expected(d, &t, "a boolean");
    bool *slot = claim_slot(d, &t);
    if (slot == NULL) return 0;
    *slot = value != 0;
    value_done(d);
    return 1;
}

static const char *int_range(cs_kind kind) {
    switch (kind) {
    case CS_KIND_I32: return "-2147483648..2147483647";
    case CS_KIND_U32: return "0..4294967295";
    case CS_KIND_I64: return "-9223372036854775808..9223372036854775807";
    default: return "0..18446744073709551615";
    }
}

static int on_number(void *ctx, const char *s, size_t len) {
    decoder *d = ctx;
    if (skip_scalar(d)) return 1;
    target t = next_target(d);
    int shown = len > NUMBER_SHOWN ? NUMBER_SHOWN : (int)len;
    const char *more = len > NUMBER_SHOWN ? "..." : "";
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        double f64;
    } v;

    switch (t.root ? CS_KIND_OBJECT : t.kind) {
    case CS_KIND_I32:
    case CS_KIND_U32:
    case CS_KIND_I64:
    case CS_KIND_U64:
        switch (cs__codec_parse_int(s, len, t.kind, &v)) {
        case CS__CODEC_INT_OK: break;
        case CS__CODEC_INT_NOT_INTEGER:
            return fail_at(d, d->n_frames, NULL, "expected an integer, got %.*s%s", shown, s, more);
        case CS__CODEC_INT_RANGE:
            return fail_at(d, d->n_frames, NULL, "%.*s%s is out of range for %s (%s)", shown, s, more,
                           cs__codec_kind_c_name(t.kind), int_range(t.kind));
        }
        break;
    case CS_KIND_F64:
        if (len > CS__CODEC_DOUBLE_TEXT_MAX)
            return fail_at(d, d->n_frames, NULL, "number of %zu characters is too long", len);
        if (!cs__codec_parse_double(s, len, &v.f64))
            return fail_at(d, d->n_frames, NULL, "%.*s%s is out of range for a double", shown, s, more);
        break;
    default: return fail_expected(d, &t, "a number");
    }
    void *slot = claim_slot(d, &t);
    if (slot == NULL) return 0;
    memcpy(slot, &v, cs__codec_kind_size(t.kind));
    value_done(d);
    return 1;
}

static int on_string(void *ctx, const unsigned char *s, size_t len) {
    decoder *d = ctx;
    if (skip_scalar(d)) return 1;
    target t = next_target(d);
    if (t.root || (t.kind != CS_KIND_STRING && t.kind != CS_KIND_CHARS)) return fail_expected(d, &t, "a string");
    if (memchr(s, '\0', len) != NULL) return fail_at(d, d->n_frames, NULL, "string contains a NUL character (\\u0000)");
    if (!escapes_are_valid(d, s, len)) return fail_at(d, d->n_frames, NULL, "string has an unpaired surrogate escape");
    if (!cs__codec_utf8_valid(s, len)) return fail_at(d, d->n_frames, NULL, "string is not valid UTF-8");

    if (t.kind == CS_KIND_CHARS) {
        if (len >= t.field->size)
            return fail_at(d, d->n_frames, NULL, "string of %zu bytes is longer than %zu", len, t.field->size - 1);
        char *chars = claim_slot(d, &t);
        memcpy(chars, s, len);
        chars[len] = '\0';
    } else {
        unsigned char *slot = claim_slot(d, &t);
        if (slot == NULL) return 0;
        char *copy = malloc(len + 1);
        if (copy == NULL) return fail_no_memory(d);
        memcpy(copy, s, len);
        copy[len] = '\0';
        store_pointer(slot, copy);
    }
    value_done(d);
    return 1;
}

static int on_start_map(void *ctx) {
    decoder *d = ctx;
    int go = open_container(d);
    if (go <= 0) return go < 0;
    target t = next_target(d);
    if (t.root) {
        push_object(d, d->root, d->out);
        return 1;
    }
    if (t.kind != CS_KIND_OBJECT) return fail_expected(d, &t, "an object");
    unsigned char *slot = claim_slot(d, &t);
    if (slot == NULL) return 0;
    push_object(d, t.field->type, slot);
    return 1;
}

static int on_map_key(void *ctx, const unsigned char *key, size_t len) {
    decoder *d = ctx;
    if (d->skip > 0) return 1;
    frame *fr = top(d);
    const cs_field *f = find_field(fr, key, len);
    if (f == NULL) {
        remember_unknown_key(d, key, len);
        d->skip_next = true;
        return 1;
    }
    size_t i = (size_t)(f - fr->type->fields);
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (fr->seen[i / 64] & bit) cs__codec_member_clear(f, fr->base); /* a repeated key: the last one wins */
    fr->seen[i / 64] |= bit;
    fr->field = f;
    return 1;
}

static int on_end_map(void *ctx) {
    decoder *d = ctx;
    if (close_container(d)) return 1;
    frame *fr = top(d);
    const cs_type *t = fr->type;
    for (size_t i = 0; i < t->n_fields; i++) {
        bool seen = fr->seen[i / 64] & ((uint64_t)1 << (i % 64));
        if (!seen && t->fields[i].presence == CS_REQUIRED)
            return fail_at(d, d->n_frames, t->fields[i].name, "missing (required)");
    }
    d->n_frames--;
    value_done(d);
    return 1;
}

static int on_start_array(void *ctx) {
    decoder *d = ctx;
    int go = open_container(d);
    if (go <= 0) return go < 0;
    target t = next_target(d);
    if (t.root || t.kind != CS_KIND_ARRAY) return fail_expected(d, &t, "an array");
    unsigned char *base = top(d)->base;
    frame *fr = &d->frames[d->n_frames++];
    fr->is_array = true;
    fr->type = NULL;
    fr->field = t.field;
    fr->base = base;
    fr->capacity = 0; /* the member was zero: a new key, or cleared as a repeated one */
    return 1;
}

static int on_end_array(void *ctx) {
    decoder *d = ctx;
    if (close_container(d)) return 1;
    d->n_frames--;
    value_done(d);
    return 1;
}

static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number, /* integers and doubles as text: we range-check ourselves */
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_map_key,
    .yajl_end_map = on_end_map,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end_array,
};

/* ---- syntax errors ---- */

static cs_err report_invalid_utf8(decoder *d) {
    text path;
    render_path(d, d->n_frames, &path);
    bool in_value = d->skip > 0 || d->skip_next || d->n_frames == 0 || top(d)->is_array || top(d)->field != NULL;
    if (in_value && path.len > 0) return cs__fail(CS_ERR_DECODE, "field \"%s\": string is not valid UTF-8", path.buf);
    if (in_value) return cs__fail(CS_ERR_DECODE, "payload: string is not valid UTF-8");
    if (path.len > 0) return cs__fail(CS_ERR_DECODE, "field \"%s\": a key is not valid UTF-8", path.buf);
    return cs__fail(CS_ERR_DECODE, "payload: a key is not valid UTF-8");
}

/* yajl rejected the text. `at_end`: it did so only when told the input was over. */
static cs_err report_syntax_error(decoder *d, size_t len, bool at_end) {
    unsigned char *message = yajl_get_error(d->yajl, 0, NULL, 0);
    const char *why = message ? (const char *)message : "unknown error";
    cs_err err;
    if (strstr(why, "invalid bytes in UTF8 string") != NULL) {
        err = report_invalid_utf8(d);
    } else {
        size_t at = at_end ? len : yajl_get_bytes_consumed(d->yajl);
        int n = (int)strcspn(why, "\n");
        err = cs__fail(CS_ERR_DECODE, "payload is not valid JSON at byte %zu: %.*s", at, n, why);
    }
    if (message) yajl_free_error(d->yajl, message);
    return err;
}

/* ---- the call ---- */

cs_err cs_json_decode(const cs_type *type, const void *json, size_t len, void *out) {
    if (type == NULL || out == NULL) return cs__fail(CS_ERR_ARG, "cs_json_decode: type and out must not be NULL");
    cs_err err = cs__codec_json_check_cached(type);
    if (err) return err;
    memset(out, 0, type->size);
    if (json == NULL || len == 0) return cs__fail(CS_ERR_DECODE, "payload is null (tombstone)");

    decoder d;
    d.json = json;
    d.len = len;
    d.root = type;
    d.out = out;
    d.n_frames = 0;
    d.depth = 0;
    d.skip = 0;
    d.skip_next = false;
    d.err = CS_OK;
    d.unknown_len = 0;
    d.unknown_key[0] = '\0';

    _Alignas(max_align_t) unsigned char arena_memory[CS__CODEC_ARENA_BYTES];
    cs__codec_arena arena;
    yajl_alloc_funcs funcs;
    cs__codec_arena_init(&arena, arena_memory, sizeof arena_memory, &funcs);
    d.yajl = yajl_alloc(&callbacks, &funcs, &d);
    if (d.yajl == NULL) return cs__fail(CS_ERR_NOMEM, "out of memory starting the JSON parser");

    bool at_end = false;
    yajl_status status = yajl_parse(d.yajl, json, len);
    if (status == yajl_status_ok) {
        at_end = true;
        status = yajl_complete_parse(d.yajl);
    }
    if (status == yajl_status_client_canceled) err = d.err;
    else if (status != yajl_status_ok) err = report_syntax_error(&d, len, at_end);
    yajl_free(d.yajl);

    if (err) {
        cs_value_free(type, out);
        memset(out, 0, type->size);
    }
    return err;
}
