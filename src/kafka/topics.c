/* topics.c — does a topic exist? Asked of the cluster's metadata for all
 * topics (asking for one topic by name could auto-create it on some brokers). */
#include <stdio.h>
#include <string.h>

#include "../core/error.h"
#include "kafka_internal.h"

cs_err cs__topics_exist(rd_kafka_t *rk, const char *who, char *const *topics, size_t n) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 1, NULL, &md, 10000);
    if (err)
        return cs__fail(CS_ERR_KAFKA, "cannot read cluster metadata from %s: %s", who, rd_kafka_err2str(err));
    cs_err result = CS_OK;
    for (size_t i = 0; i < n && result == CS_OK; i++) {
        bool found = false;
        for (int t = 0; t < md->topic_cnt && !found; t++)
            found = !strcmp(md->topics[t].topic, topics[i]) && md->topics[t].err == RD_KAFKA_RESP_ERR_NO_ERROR;
        if (!found)
            result = cs__fail(CS_ERR_TOPIC,
                              "topic %s does not exist on %s: create it first (on the embedded cluster, declare it "
                              "with cs_kafka_topic())",
                              topics[i], who);
    }
    rd_kafka_metadata_destroy(md);
    return result;
}
