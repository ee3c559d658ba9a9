/** @file
 * cstream/protobuf.h — Protobuf payloads: a cs_codec on protobuf-c that
 * decodes into the message struct protoc-c generated, and encodes it.
 *
 *     // payout.proto compiled with protoc-c: Payments__Payout, payments__payout__descriptor
 *     cs_codec *pb;
 *     cs_codec_protobuf_new(&payments__payout__descriptor, payout_proto_text, &pb);
 *     cs_sub_decode(sub, pb, cs_codec_protobuf_type(pb));
 *     ...
 *     static cs_outcome handle(cs_delivery *d, void *user) {
 *         const Payments__Payout *p = cs_delivery_decoded(d);  // lives as long as d
 *         ...
 *     }
 *
 * Why the generated message and not a field table: a Protobuf user already
 * has the .proto and the C that protoc-c writes from it (oneof cases, map
 * entries, has_ flags, enums with their names); a field table would say the
 * same again by hand and could drift from the .proto. So the decoded value
 * is the generated struct, read with the generated names.
 *
 * Ownership: decode writes the message into the caller's buffer of
 * cs_codec_protobuf_type(codec)->size bytes (the generated struct's size);
 * the strings, bytes, repeated fields and nested messages it points to are
 * allocated by protobuf-c and released by cs_codec_free_value(codec, type,
 * value) (the delivery does that itself for cs_delivery_decoded). Do not call
 * protobuf_c_message_free_unpacked on it: the top-level struct is the
 * caller's, not protobuf-c's. Encode reads a message initialised with the
 * generated `..._INIT` (it is never freed by cstream).
 *
 * protobuf-c cannot parse .proto text at run time: the descriptor comes from
 * the generated C, and the .proto text (for a schema registry, which stores
 * schemas as text) is given by the user, e.g. embedded at build time. The
 * codec keeps a copy (cs_codec_protobuf_proto).
 *
 * The payload is the bare Protobuf message (no registry framing: the magic
 * byte, schema id and message indexes belong to the registry client). A NULL
 * payload (a tombstone) is CS_ERR_DECODE; an empty one is a message with
 * every field at its default, as Protobuf defines it.
 *
 * Errors: CS_ERR_DECODE for a payload that does not decode, with the best
 * reason cstream can find by reading the wire format itself, since protobuf-c
 * gives none: the message type, the field by its path and number, the byte
 * ("message payments.Payout: field \"memo\" (4): length 40 runs past the end
 * at byte 7 of 12", "field \"id\": missing (required)"); a payload nested
 * deeper than CS_PROTOBUF_MAX_DEPTH messages is refused too. CS_ERR_ENCODE
 * for a message that cannot be encoded (a required string or message that is
 * NULL, named; nesting past CS_PROTOBUF_MAX_DEPTH), CS_ERR_ARG for a NULL
 * argument, a wrong type or a message of another type, CS_ERR_NOMEM.
 *
 * Threads: a codec is immutable once made; its functions run on any thread
 * at the same time. Destroy it once nothing uses it. */
#ifndef CSTREAM_PROTOBUF_H
#define CSTREAM_PROTOBUF_H

#include "cstream/codec.h"
#include "cstream/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Deepest nesting of messages that decode and encode accept (the top-level
 * message counts as 1), the limit Protobuf's C++ and Java parsers apply.
 * protobuf-c has none and overflows the stack on a message that contains
 * itself 100,000 times, which a 394 KB payload can do; cstream checks the
 * nesting before protobuf-c reads a payload of a type that can nest deeper
 * than this (a type that contains itself). */
#define CS_PROTOBUF_MAX_DEPTH 100

/* protobuf-c's (<protobuf-c/protobuf-c.h>): declared here so that this header
 * builds without protobuf-c's headers. */
struct ProtobufCMessageDescriptor;

/** Makes a cs_codec for one Protobuf message type: decode (into the generated
 * struct), encode, and free_value. With proto_text, codec->schema returns a
 * copy of it and codec->schema_format is CS_SCHEMA_FORMAT_PROTOBUF3 when its
 * first statement is `syntax = "proto3"` or an edition, else
 * CS_SCHEMA_FORMAT_PROTOBUF2 (a file without a syntax statement is proto2);
 * the AsyncAPI document (cs_app_asyncapi) shows it. Without, codec->schema
 * and codec->schema_format are NULL.
 * The codec's name is "protobuf", its content type "application/x-protobuf".
 * @param desc the generated descriptor, e.g. `&payments__payout__descriptor`;
 *        a constant of the generated C; it must stay valid while the codec
 *        is used (it is not copied).
 * @param proto_text the .proto text the descriptor was generated from, or
 *        NULL if no registry will need it (copied).
 * @param out receives the codec, the caller's: release it with
 *        cs_codec_protobuf_destroy() once nothing uses it (a codec given to
 *        cs_sub_decode must outlive the app). NULL on failure.
 * @retval CS_OK *out holds the codec.
 * @retval CS_ERR_ARG desc or out is NULL, or desc is not a message
 *         descriptor (its magic number is wrong).
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_protobuf_new(const struct ProtobufCMessageDescriptor *desc, const char *proto_text,
                                    cs_codec **out);

/** Releases a codec made by cs_codec_protobuf_new. NULL: nothing.
 * @param codec the codec; nothing may use it any more (values it decoded
 *        must have been freed). */
CS_API void cs_codec_protobuf_destroy(cs_codec *codec);

/** The cs_type to give cs_sub_decode and the codec's decode: named after the
 * message's full name ("payments.Payout"), its size the generated struct's,
 * no fields (the descriptor describes them).
 * @param codec a codec made by cs_codec_protobuf_new.
 * @return the type, valid as long as the codec; NULL if codec is NULL or not
 *         a Protobuf codec. */
CS_API const cs_type *cs_codec_protobuf_type(const cs_codec *codec);

/** The .proto text given to cs_codec_protobuf_new.
 * @param codec a codec made by cs_codec_protobuf_new.
 * @return the text, valid as long as the codec; NULL if none was given, or
 *         codec is NULL or not a Protobuf codec. */
CS_API const char *cs_codec_protobuf_proto(const cs_codec *codec);

/** The message descriptor the codec was made with.
 * @param codec a codec made by cs_codec_protobuf_new.
 * @return the descriptor (the generated C's); NULL if codec is NULL or not a
 *         Protobuf codec. */
CS_API const struct ProtobufCMessageDescriptor *cs_codec_protobuf_descriptor(const cs_codec *codec);

/* ---- through a Schema Registry ------------------------------------------- */

/** Makes a registry-backed Protobuf codec: payloads in the Confluent wire
 * format (magic byte 0, the 4-byte schema id, the message indexes, the
 * Protobuf message), with the writer schemas held by the Schema Registry
 * @p reg. Decoded values are the generated struct, as with
 * cs_codec_protobuf_new(); give cs_sub_decode cs_codec_protobuf_registry_type().
 *
 * Decode reads the schema id, fetches that writer schema (.proto text) once
 * (then kept by the codec, its messages indexed: no request per record),
 * reads the message indexes and finds the message they name in it, which must
 * be the codec's message by full name; protobuf-c then decodes the payload
 * with the generated descriptor (fields the descriptor does not know are
 * skipped: Protobuf's own evolution). Encode registers @p proto_text with
 * schemaType PROTOBUF under the subject @p opts names (RecordName strategies:
 * the message's full name, e.g. "payments.Payout"), once per codec (see
 * cs_codec_registry_schema_id()), and writes the framing, the message's
 * indexes in that text (counting `message` declarations only, as
 * Confluent's serializers do) and the message. A .proto that imports another
 * file registers it as a schema reference: give that file's text with
 * cs_codec_protobuf_registry_import().
 *
 * Errors of decode, besides those of the Protobuf codec:
 * - CS_ERR_DECODE: no magic byte or too short ("not in the schema registry's
 *   wire format"), a schema id the registry does not know, a writer schema
 *   that is not Protobuf, message indexes that are malformed or name no
 *   message of the writer schema, or name another message than the codec's
 *   (cs_errmsg() names both). A typed subscription dead-letters it under
 *   Tracked.
 * - CS_ERR_UNAVAILABLE: the registry is unreachable, answers 5xx/429 or
 *   refuses the credentials: the record is tried again later, never
 *   dead-lettered (docs/guide.md, "Schemas and the Schema Registry").
 * Errors of encode: CS_ERR_ENCODE naming the subject when the registry
 * refuses the schema (or an imported file), CS_ERR_UNAVAILABLE as above,
 * CS_ERR_ARG when the strategy needs a topic the codec was not given.
 *
 * The codec's functions are thread-safe.
 * @param reg the registry; not owned, it must outlive the codec.
 * @param desc the generated descriptor, e.g. `&payments__payout__descriptor`;
 *        it must stay valid while the codec is used (not copied).
 * @param proto_text the .proto text of the file that declares the message,
 *        as it is registered (copied); its syntax statement gives the codec's
 *        schema_format (CS_SCHEMA_FORMAT_PROTOBUF2 or _PROTOBUF3).
 * @param opts the subject encode registers under (copied); NULL: a
 *        decode-only codec (encode fails with CS_ERR_ARG).
 * @param out receives the codec, the caller's: release it with
 *        cs_codec_registry_destroy() once nothing uses it. NULL on failure.
 * @retval CS_OK *out holds the codec.
 * @retval CS_ERR_ARG reg, proto_text or out is NULL, desc is not a message
 *         descriptor, the text declares no message of desc's full name (or
 *         cannot be followed: unbalanced braces), or the strategy is
 *         unknown; cs_errmsg() says which.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_protobuf_registry_new(cs_registry *reg, const struct ProtobufCMessageDescriptor *desc,
                                             const char *proto_text, const cs_registry_subject_opts *opts,
                                             cs_codec **out);

/** Gives a registry-backed Protobuf codec the text of a file its .proto
 * imports, so that encode registers it first, under the subject @p name
 * (Confluent's default for references), and registers the codec's schema
 * with the reference {name, subject, version}. Add a file's own imports
 * before it; an import not given is sent without a reference (for files the
 * registry knows itself). Decode needs none of this: the descriptor was
 * generated with the imports.
 *
 * Call before the codec is in use: not synchronised with encode.
 * @param codec a codec made by cs_codec_protobuf_registry_new().
 * @param name the file as the `import` statement spells it, e.g.
 *        "common/money.proto" (copied).
 * @param proto_text the file's text (copied).
 * @retval CS_OK kept.
 * @retval CS_ERR_ARG not such a codec, a NULL or empty argument, the name
 *         given twice, or more than 16 files.
 * @retval CS_ERR_NOMEM out of memory. */
CS_API cs_err cs_codec_protobuf_registry_import(cs_codec *codec, const char *name, const char *proto_text);

/** The cs_type to give cs_sub_decode and the codec's functions, as
 * cs_codec_protobuf_type() for a plain Protobuf codec.
 * @param codec a codec made by cs_codec_protobuf_registry_new().
 * @return the type, valid as long as the codec; NULL if codec is NULL or not
 *         a registry-backed Protobuf codec. */
CS_API const cs_type *cs_codec_protobuf_registry_type(const cs_codec *codec);

#ifdef __cplusplus
}
#endif
#endif
