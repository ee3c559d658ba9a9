/* type.c — field tables: what each kind is, checking a table, freeing a value.
 *
 * Owns: the per-thread memory of which tables were already checked (a few
 * pointers), so decode and encode check a table once per thread, not per
 * record.
 *
 * Threads: pure functions, any thread. Must never: trust a table it has not
 * checked (a wrong offset or size would write outside the caller's struct).
 * Locks: none; the check memory is _Thread_local. */
#include "codec/codec_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

size_t cs__codec_kind_size(cs_kind kind) {
    switch (kind) {
    case CS_KIND_BOOL: return sizeof(bool);
    case CS_KIND_I32: return sizeof(int32_t);
    case CS_KIND_U32: return sizeof(uint32_t);
    case CS_KIND_I64: return sizeof(int64_t);
    case CS_KIND_U64: return sizeof(uint64_t);
    case CS_KIND_F64: return sizeof(double);
    case CS_KIND_STRING: return sizeof(char *);
    case CS_KIND_F32: return sizeof(float);
    case CS_KIND_BYTES: return sizeof(cs_bytes);
    case CS_KIND_ENUM: return sizeof(int32_t);
    case CS_KIND_CHARS:
    case CS_KIND_OBJECT:
    case CS_KIND_ARRAY:
    case CS_KIND_FIXED:
    case CS_KIND_MAP:
    case CS_KIND_UNION: return 0;
    }
    return 0;
}

const char *cs__codec_kind_expectation(cs_kind kind) {
    switch (kind) {
    case CS_KIND_BOOL: return "a boolean";
    case CS_KIND_I32:
    case CS_KIND_U32:
    case CS_KIND_I64:
    case CS_KIND_U64: return "an integer";
    case CS_KIND_F32:
    case CS_KIND_F64: return "a number";
    case CS_KIND_BYTES: return "bytes";
    case CS_KIND_FIXED: return "a fixed";
    case CS_KIND_ENUM: return "an enum symbol";
    case CS_KIND_MAP: return "a map";
    case CS_KIND_UNION: return "a union";
    case CS_KIND_STRING:
    case CS_KIND_CHARS: return "a string";
    case CS_KIND_OBJECT: return "an object";
    case CS_KIND_ARRAY: return "an array";
    }
    return "a value";
}

const char *cs__codec_kind_c_name(cs_kind kind) {
    switch (kind) {
    case CS_KIND_I32: return "int32";
    case CS_KIND_U32: return "uint32";
    case CS_KIND_I64: return "int64";
    case CS_KIND_U64: return "uint64";
    default: return "?";
    }
}

size_t cs__codec_array_max(const cs_field *f) { return f->max_items ? f->max_items : CS_ARRAY_MAX_ITEMS; }

/* ---- checking a table ---- */

static bool kind_is_scalar(cs_kind k) { return (k >= CS_KIND_BOOL && k <= CS_KIND_F64) || k == CS_KIND_F32; }

/* Kinds held in a fixed-size member the check compares with kind_size. */
static bool kind_is_sized(cs_kind k) {
    return kind_is_scalar(k) || k == CS_KIND_STRING || k == CS_KIND_BYTES || k == CS_KIND_ENUM;
}

static bool kind_is_element(cs_kind k) {
    return kind_is_scalar(k) || k == CS_KIND_STRING || k == CS_KIND_OBJECT || k == CS_KIND_BYTES;
}

/* DECIMAL keeps its unscaled value in an int64_t: 18 digits always fit. */
#define DECIMAL_MAX_PRECISION 18
/* The text of a UUID and its NUL. */
#define UUID_CHARS 37

static cs_err bad_field(const cs_type *t, const cs_field *f, const char *why) {
    return cs__fail(CS_ERR_ARG, "invalid field table: type \"%s\" field \"%s\": %s", t->name,
                    f->name ? f->name : "(null)", why);
}

/* Whether member [offset, offset + size) lies inside the struct. */
static bool fits(const cs_type *t, size_t offset, size_t size) { return size <= t->size && offset <= t->size - size; }

static cs_err check_type(const cs_type *t, const cs_type **stack, size_t depth);

static cs_err check_symbols(const cs_type *t, const cs_field *f) {
    if (f->symbols == NULL || f->n_symbols == 0) return bad_field(t, f, "an enum needs symbols");
    if (f->n_symbols > INT32_MAX) return bad_field(t, f, "too many symbols");
    for (size_t i = 0; i < f->n_symbols; i++) {
        if (f->symbols[i] == NULL || f->symbols[i][0] == '\0') return bad_field(t, f, "an enum symbol is empty");
        for (size_t j = 0; j < i; j++)
            if (strcmp(f->symbols[i], f->symbols[j]) == 0) return bad_field(t, f, "an enum symbol is listed twice");
    }
    return CS_OK;
}

static cs_err check_logical(const cs_type *t, const cs_field *f) {
    switch (f->logical) {
    case CS_LOGICAL_NONE: return CS_OK;
    case CS_LOGICAL_DATE: return f->kind == CS_KIND_I32 ? CS_OK : bad_field(t, f, "a date must be an int32_t");
    case CS_LOGICAL_TIMESTAMP_MILLIS:
    case CS_LOGICAL_TIMESTAMP_MICROS:
        return f->kind == CS_KIND_I64 ? CS_OK : bad_field(t, f, "a timestamp must be an int64_t");
    case CS_LOGICAL_UUID:
        if (f->kind == CS_KIND_STRING || (f->kind == CS_KIND_CHARS && f->size >= UUID_CHARS)) return CS_OK;
        return bad_field(t, f, "a uuid must be a char * or a char array of at least 37");
    case CS_LOGICAL_DECIMAL:
        if (f->kind != CS_KIND_I64) return bad_field(t, f, "a decimal must be an int64_t");
        if (f->precision < 1 || f->precision > DECIMAL_MAX_PRECISION || f->scale < 0 || f->scale > f->precision)
            return bad_field(t, f, "a decimal needs 1 <= precision <= 18 and 0 <= scale <= precision");
        return CS_OK;
    }
    return bad_field(t, f, "unknown logical type");
}

static cs_err check_nested(const cs_type *t, const cs_field *f, const cs_type *inner, const cs_type **stack,
                           size_t depth) {
    if (inner == NULL) return bad_field(t, f, "no nested type");
    for (size_t i = 0; i < depth; i++)
        if (stack[i] == inner) return CS_OK; /* a type that contains itself (through an array): checked above */
    if (depth + 1 >= CS_JSON_MAX_DEPTH) return bad_field(t, f, "types nested deeper than 64 levels");
    return check_type(inner, stack, depth + 1);
}

static cs_err check_field(const cs_type *t, const cs_field *f, const cs_type **stack, size_t depth) {
    if (f->presence != CS_OPTIONAL && f->presence != CS_REQUIRED)
        return bad_field(t, f, "presence is neither CS_OPTIONAL nor CS_REQUIRED");
    cs_err err = check_logical(t, f);
    if (err) return err;
    if (kind_is_sized(f->kind)) {
        if (f->size != cs__codec_kind_size(f->kind)) return bad_field(t, f, "member size does not match its kind");
        if (!fits(t, f->offset, f->size)) return bad_field(t, f, "member lies outside the struct");
        if (f->kind == CS_KIND_ENUM) return check_symbols(t, f);
        return CS_OK;
    }
    switch (f->kind) {
    case CS_KIND_FIXED:
    case CS_KIND_CHARS:
        if (f->size == 0) return bad_field(t, f, "char array of size 0");
        if (!fits(t, f->offset, f->size)) return bad_field(t, f, "member lies outside the struct");
        return CS_OK;
    case CS_KIND_OBJECT:
        if (f->type != NULL && f->size != f->type->size)
            return bad_field(t, f, "member size does not match the nested type's size");
        if (!fits(t, f->offset, f->size)) return bad_field(t, f, "member lies outside the struct");
        return check_nested(t, f, f->type, stack, depth);
    case CS_KIND_ARRAY:
        if (!fits(t, f->offset, sizeof(void *)) || !fits(t, f->count_offset, sizeof(size_t)))
            return bad_field(t, f, "pointer or count lies outside the struct");
        if (!kind_is_element(f->elem)) return bad_field(t, f, "array elements must be scalars, strings or objects");
        if (f->elem == CS_KIND_OBJECT) {
            if (f->type != NULL && f->size != f->type->size)
                return bad_field(t, f, "element size does not match the element type's size");
            return check_nested(t, f, f->type, stack, depth);
        }
        if (f->size != cs__codec_kind_size(f->elem))
            return bad_field(t, f, "element size does not match the element kind");
        return CS_OK;
    case CS_KIND_MAP:
        if (!fits(t, f->offset, sizeof(void *)) || !fits(t, f->count_offset, sizeof(size_t)))
            return bad_field(t, f, "pointer or count lies outside the struct");
        if (f->type == NULL || f->type->n_fields != 2 || f->type->fields == NULL || f->type->fields[0].name == NULL ||
            strcmp(f->type->fields[0].name, "key") != 0 || f->type->fields[0].kind != CS_KIND_STRING ||
            f->type->fields[1].name == NULL || strcmp(f->type->fields[1].name, "value") != 0)
            return bad_field(t, f, "map entries must be a type of two fields, \"key\" (STRING) and \"value\"");
        if (f->size != f->type->size) return bad_field(t, f, "entry size does not match the entry type's size");
        return check_nested(t, f, f->type, stack, depth);
    case CS_KIND_UNION:
        if (f->type == NULL || f->type->n_fields == 0) return bad_field(t, f, "a union needs a type with branches");
        if (f->size != f->type->size) return bad_field(t, f, "member size does not match the branches' type's size");
        if (!fits(t, f->offset, f->size) || !fits(t, f->count_offset, sizeof(int32_t)))
            return bad_field(t, f, "member or selector lies outside the struct");
        for (size_t i = 0; i < f->type->n_fields; i++) {
            cs_kind k = f->type->fields[i].kind;
            if (!kind_is_scalar(k) && k != CS_KIND_STRING && k != CS_KIND_BYTES && k != CS_KIND_OBJECT)
                return bad_field(t, f, "union branches must be scalars, strings, bytes or objects");
        }
        return check_nested(t, f, f->type, stack, depth);
    default: return bad_field(t, f, "unknown kind");
    }
}

static cs_err check_type(const cs_type *t, const cs_type **stack, size_t depth) {
    if (t->name == NULL || t->name[0] == '\0') return cs__fail(CS_ERR_ARG, "invalid field table: a type has no name");
    if (t->size == 0) return cs__fail(CS_ERR_ARG, "invalid field table: type \"%s\" has size 0", t->name);
    if (t->n_fields > CS_TYPE_MAX_FIELDS)
        return cs__fail(CS_ERR_ARG, "invalid field table: type \"%s\" has %zu fields, at most %d", t->name, t->n_fields,
                        CS_TYPE_MAX_FIELDS);
    if (t->n_fields > 0 && t->fields == NULL)
        return cs__fail(CS_ERR_ARG, "invalid field table: type \"%s\" has no field array", t->name);
    stack[depth] = t;
    for (size_t i = 0; i < t->n_fields; i++) {
        const cs_field *f = &t->fields[i];
        if (f->name == NULL || f->name[0] == '\0') return bad_field(t, f, "no name");
        for (size_t j = 0; j < i; j++)
            if (strcmp(t->fields[j].name, f->name) == 0) return bad_field(t, f, "named twice");
        cs_err err = check_field(t, f, stack, depth);
        if (err) return err;
    }
    return CS_OK;
}

cs_err cs_type_check(const cs_type *type) {
    const cs_type *stack[CS_JSON_MAX_DEPTH];
    if (type == NULL) return cs__fail(CS_ERR_ARG, "invalid field table: type is NULL");
    return check_type(type, stack, 0);
}

/* The last few types this thread checked successfully. Tables are static
 * const in practice; one that is built at run time and changed afterwards is
 * checked again only when it drops out of this list. */
#define CHECKED_SLOTS 8
static _Thread_local const cs_type *checked[CHECKED_SLOTS];
static _Thread_local unsigned checked_next;

cs_err cs__codec_type_check_cached(const cs_type *type) {
    for (unsigned i = 0; i < CHECKED_SLOTS; i++)
        if (checked[i] == type && type != NULL) return CS_OK;
    cs_err err = cs_type_check(type);
    if (err) return err;
    checked[checked_next++ % CHECKED_SLOTS] = type;
    return CS_OK;
}

/* ---- what JSON can carry ---- */

static bool kind_is_json(cs_kind k) { return k >= CS_KIND_BOOL && k <= CS_KIND_ARRAY; }

static cs_err json_kinds(const cs_type *t, const cs_type **stack, size_t depth) {
    for (size_t i = 0; i < depth; i++)
        if (stack[i] == t) return CS_OK;
    stack[depth] = t;
    for (size_t i = 0; i < t->n_fields; i++) {
        const cs_field *f = &t->fields[i];
        cs_kind k = f->kind == CS_KIND_ARRAY ? f->elem : f->kind;
        if (!kind_is_json(k))
            return cs__fail(CS_ERR_ARG,
                            "type \"%s\" field \"%s\": its kind (%s) has no JSON form; use the Avro codec "
                            "(cstream/avro.h)",
                            t->name, f->name, cs__codec_kind_expectation(k));
        if (f->type != NULL && depth + 1 < CS_JSON_MAX_DEPTH) {
            cs_err err = json_kinds(f->type, stack, depth + 1);
            if (err) return err;
        }
    }
    return CS_OK;
}

static _Thread_local const cs_type *json_checked[CHECKED_SLOTS];
static _Thread_local unsigned json_checked_next;

cs_err cs__codec_json_check_cached(const cs_type *type) {
    for (unsigned i = 0; i < CHECKED_SLOTS; i++)
        if (json_checked[i] == type && type != NULL) return CS_OK;
    cs_err err = cs__codec_type_check_cached(type);
    if (err) return err;
    const cs_type *stack[CS_JSON_MAX_DEPTH];
    err = json_kinds(type, stack, 0);
    if (err) return err;
    json_checked[json_checked_next++ % CHECKED_SLOTS] = type;
    return CS_OK;
}

/* ---- freeing a value ---- */

static void free_array(const cs_field *f, unsigned char *base) {
    void *items;
    size_t *count = (size_t *)(base + f->count_offset);
    memcpy(&items, base + f->offset, sizeof items); /* the member is a T *, read as void * */
    if (items != NULL) {
        if (f->elem == CS_KIND_STRING) {
            char **strings = items;
            for (size_t i = 0; i < *count; i++) free(strings[i]);
        } else if (f->elem == CS_KIND_BYTES) {
            cs_bytes *bytes = items;
            for (size_t i = 0; i < *count; i++) free(bytes[i].data);
        } else if (f->elem == CS_KIND_OBJECT && f->type != NULL) {
            unsigned char *elems = items;
            for (size_t i = 0; i < *count; i++) cs_value_free(f->type, elems + i * f->type->size);
        }
        free(items);
    }
    items = NULL;
    memcpy(base + f->offset, &items, sizeof items);
    *count = 0;
}

void cs__codec_member_clear(const cs_field *f, unsigned char *base) {
    unsigned char *member = base + f->offset;
    switch (f->kind) {
    case CS_KIND_STRING: {
        char *s;
        memcpy(&s, member, sizeof s);
        free(s);
        memset(member, 0, sizeof s);
        break;
    }
    case CS_KIND_BYTES: {
        cs_bytes *b = (cs_bytes *)member;
        free(b->data);
        memset(member, 0, sizeof *b);
        break;
    }
    case CS_KIND_OBJECT:
    case CS_KIND_UNION:
        cs_value_free(f->type, member);
        memset(member, 0, f->size);
        if (f->kind == CS_KIND_UNION) memset(base + f->count_offset, 0, sizeof(int32_t));
        break;
    case CS_KIND_ARRAY:
    case CS_KIND_MAP: free_array(f, base); break;
    default: memset(member, 0, f->size); break;
    }
}

void cs_value_free(const cs_type *type, void *value) {
    if (type == NULL || value == NULL) return;
    unsigned char *base = value;
    for (size_t i = 0; i < type->n_fields; i++) {
        const cs_field *f = &type->fields[i];
        switch (f->kind) {
        case CS_KIND_STRING: {
            char **s = (char **)(base + f->offset);
            free(*s);
            *s = NULL;
            break;
        }
        case CS_KIND_BYTES: {
            cs_bytes *b = (cs_bytes *)(base + f->offset);
            free(b->data);
            b->data = NULL;
            b->len = 0;
            break;
        }
        case CS_KIND_OBJECT:
        case CS_KIND_UNION: cs_value_free(f->type, base + f->offset); break;
        case CS_KIND_ARRAY:
        case CS_KIND_MAP: free_array(f, base); break;
        default: break;
        }
    }
}
