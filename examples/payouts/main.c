/* main.c — the payouts service as it runs in production: the app from
 * service.c handed to cs_app_main, which gives it the standard command line
 * (run, docs, publish, --help, --version), /metrics, /healthz and /readyz
 * (run --http ADDR:PORT), JSON logs (--log-format json) and the broker
 * choice (--brokers, else CSTREAM_BROKERS, else the embedded cluster).
 * The bank and the counters store are simulated (they fail now and then, see
 * clients.h). The ledger database is PAYOUTS_DATABASE (a PostgreSQL URL, or
 * sqlite:PATH), else the SQLite file payouts-ledger.db. `make run` runs the
 * seeded walkthrough in demo.c; `make serve` runs this. */
#include <stdio.h>
#include <stdlib.h>

#include "service.h"

int main(int argc, char **argv) {
    static clients cl; /* built by the start-up hook, freed by the shutdown hook */
    const char *ledger = getenv("PAYOUTS_DATABASE");
    payouts_options opt = {.clients = &cl,
                           .counters_fail_every = 50,
                           .bank_fail_every = 20,
                           .ledger_url = ledger && *ledger ? ledger : "sqlite:payouts-ledger.db"};
    payouts_service svc;
    if (payouts_service_new(&opt, &svc) != CS_OK) {
        fprintf(stderr, "payouts: %s\n", cs_errmsg());
        return 1;
    }
    int rc = cs_app_main(svc.app, argc, argv); /* owns the app from here */
    cs_db_free(svc.ledger_db);                 /* after the app, which used it */
    return rc;
}
