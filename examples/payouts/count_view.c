/* count_view.c — counts page views in the analytics store. A lost view does
 * not matter here, so the subscription keeps the default mode (Auto): when
 * the store does not answer, the handler asks for a retry, which Auto reports
 * unsupported, and the view is lost. */
#include <stdio.h>
#include <string.h>

#include "service.h"

cs_outcome count_view(cs_delivery *d, void *user) {
    clients *c = user;
    size_t len = 0;
    const char *value = cs_delivery_value(d, &len);
    char page[256];
    snprintf(page, sizeof page, "%.*s", value ? (int)len : 0, value ? value : "");
    if (counters_increment(&c->counters, page) != 0) return CS_RETRY; /* Auto: the view is lost */
    return CS_ACK;
}
