/** @file
 * cstream/log.h — the process's log lines: their threshold and their format.
 *
 * cstream writes one line per event to stderr, `<UTC time> <LEVEL> <message>
 * key=value ...` (or one JSON object per line), librdkafka's lines included.
 * These two settings are process-wide: they apply to every app in the
 * process. */
#ifndef CSTREAM_LOG_H
#define CSTREAM_LOG_H

#include "cstream/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Log levels, most severe first: a threshold shows its level and those above. */
typedef enum cs_log_level {
    CS_LOG_ERROR, /**< errors only */
    CS_LOG_WARN,  /**< and warnings */
    CS_LOG_INFO,  /**< and informational lines (the default) */
    CS_LOG_DEBUG  /**< and debugging detail */
} cs_log_level;
/** Process-wide log threshold (default INFO, or CSTREAM_LOG_LEVEL=error|warn|info|debug).
 *
 * Any thread, any time; it applies to every app in the process, and to
 * librdkafka's log lines, which go through the same writer.
 * @param level the new threshold. */
CS_API void cs_log_set_level(cs_log_level level);

/** Log line format, process-wide (default text, or CSTREAM_LOG_FORMAT=text|json).
 * json: one object per line {"ts":..,"level":..,"msg":.., then each key=value
 * field of the line as a member} (integers as numbers, the rest as strings). */
typedef enum cs_log_format {
    CS_LOG_TEXT = 0, /**< "<UTC time> <LEVEL> <message> key=value ..." (the default) */
    CS_LOG_JSON      /**< one JSON object per line, as above */
} cs_log_format;
/** Sets the log line format of the process (see cs_log_format).
 *
 * Any thread, any time; it applies to every app in the process.
 * @param format the format. */
CS_API void cs_log_set_format(cs_log_format format);

#ifdef __cplusplus
}
#endif
#endif
