/*
 * subject.c — the subject a schema is registered under, by Confluent's
 * subject name strategies (TopicName, RecordName, TopicRecordName).
 *
 * Owns: nothing; a pure function of its arguments.
 * Locks: none. Threads: any thread.
 */
#include <stdio.h>

#include "base/error.h"
#include "schema/registry_internal.h"

static const char *strategy_name(cs__subject_strategy s) {
    switch (s) {
    case CS__SUBJECT_TOPIC_NAME: return "TopicName";
    case CS__SUBJECT_RECORD_NAME: return "RecordName";
    case CS__SUBJECT_TOPIC_RECORD_NAME: return "TopicRecordName";
    }
    return "unknown";
}

cs_err cs__registry_subject(cs__subject_strategy strategy, const char *topic, const char *record, int is_key, char *buf,
                            size_t cap) {
    int n;
    int need_topic = strategy != CS__SUBJECT_RECORD_NAME;
    int need_record = strategy != CS__SUBJECT_TOPIC_NAME;
    if (!buf || cap == 0) return cs__fail(CS_ERR_ARG, "subject name: no buffer");
    buf[0] = '\0';
    if (strategy != CS__SUBJECT_TOPIC_NAME && strategy != CS__SUBJECT_RECORD_NAME &&
        strategy != CS__SUBJECT_TOPIC_RECORD_NAME)
        return cs__fail(CS_ERR_ARG, "subject name: unknown strategy %d", (int)strategy);
    if (need_topic && (!topic || !*topic))
        return cs__fail(CS_ERR_ARG, "subject name: the %s strategy needs the topic", strategy_name(strategy));
    if (need_record && (!record || !*record))
        return cs__fail(CS_ERR_ARG, "subject name: the %s strategy needs the record's fully qualified name",
                        strategy_name(strategy));
    switch (strategy) {
    case CS__SUBJECT_TOPIC_NAME: n = snprintf(buf, cap, "%s-%s", topic, is_key ? "key" : "value"); break;
    case CS__SUBJECT_RECORD_NAME: n = snprintf(buf, cap, "%s", record); break;
    default: n = snprintf(buf, cap, "%s-%s", topic, record); break;
    }
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = '\0';
        return cs__fail(CS_ERR_ARG, "subject name (%s, topic %s): %d bytes do not fit in %zu", strategy_name(strategy),
                        topic ? topic : "-", n, cap);
    }
    return CS_OK;
}
