/* fuzz_protobuf_decode.c — the Protobuf decoder (src/codec/protobuf_*.c) on
 * payloads from the network, into the generated messages of
 * tests/proto/payments.proto.
 *
 * Input byte 0 picks the message: payments.Payout (nested, repeated, packed,
 * oneof, maps, required fields), payments.Scalars (every scalar type) or
 * payments.Tree (contains itself: the nesting bound). The rest is the
 * payload. Properties:
 *   - no memory error or undefined behaviour (ASan/UBSan), no leak;
 *   - a failed decode leaves the message zeroed and says why;
 *   - a decoded message encodes, and its bytes decode and encode again to
 *     the same bytes. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cstream/protobuf.h"
#include "payments.pb-c.h"

#define N_CODECS 3
static cs_codec *codecs[N_CODECS];

static void make_codecs(void) {
    if (codecs[0] != NULL) return;
    if (cs_codec_protobuf_new(&payments__payout__descriptor, NULL, &codecs[0]) != CS_OK ||
        cs_codec_protobuf_new(&payments__scalars__descriptor, NULL, &codecs[1]) != CS_OK ||
        cs_codec_protobuf_new(&payments__tree__descriptor, NULL, &codecs[2]) != CS_OK)
        abort();
}

static bool zeroed(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Encodes *value; aborts if it does not (a decoded message always encodes). */
static char *encode(cs_codec *c, const void *value, size_t *len) {
    char *out = NULL;
    if (c->encode(c, cs_codec_protobuf_type(c), value, &out, len) != CS_OK) abort();
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    make_codecs();
    if (size < 1) return 0;
    cs_codec *c = codecs[data[0] % N_CODECS];
    const cs_type *t = cs_codec_protobuf_type(c);
    unsigned char *value = malloc(t->size);
    if (value == NULL) return 0;
    cs_err err = c->decode(c, t, data + 1, size - 1, value);
    if (err != CS_OK) {
        if (err != CS_ERR_DECODE || !zeroed(value, t->size) || cs_errmsg()[0] == '\0') abort();
        free(value);
        return 0;
    }
    size_t len1, len2;
    char *first = encode(c, value, &len1);
    cs_codec_free_value(c, t, value);
    if (!zeroed(value, t->size)) abort();
    if (c->decode(c, t, first, len1, value) != CS_OK) abort();
    char *second = encode(c, value, &len2);
    if (len1 != len2 || memcmp(first, second, len1) != 0) abort();
    cs_codec_free_value(c, t, value);
    free(first);
    free(second);
    free(value);
    return 0;
}
