/** @file
 * cstream/export.h — what libcstream.so exports.
 *
 * The library is built with -fvisibility=hidden: a program linking the shared
 * library sees only the declarations marked CS_API, which are the public API
 * in these headers. Everything internal (the cs__* functions, the tracker,
 * the store) stays inside the library, so it can change without an ABI
 * break. tests/unit/check_exports.sh checks the exported list against the
 * headers. */
#ifndef CSTREAM_EXPORT_H
#define CSTREAM_EXPORT_H

/** Marks a declaration as part of libcstream.so's public API: default symbol
 * visibility under GCC and Clang, nothing elsewhere. Every public function
 * and object is declared with it. */
#if defined(__GNUC__) || defined(__clang__)
#define CS_API __attribute__((visibility("default")))
#else
#define CS_API
#endif

#endif
