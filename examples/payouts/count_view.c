/* count_view.c — counts page views in the analytics store. A lost view does
 * not matter here, so the subscription keeps the default mode (Auto): when
 * the store does not answer, the handler asks for a retry, which Auto reports
 * unsupported, and the view is lost. */
#include "service.h"

cs_outcome count_view(cs_delivery *d, void *user) {
    clients *c = user;
    const page_view *view = cs_delivery_decoded(d);
    if (counters_increment(&c->counters, view->page) != 0) return CS_RETRY; /* Auto: the view is lost */
    return CS_ACK;
}
