/* main.c — the payouts service as it runs in production: the app from
 * service.c handed to cs_app_main, which gives it the standard command line
 * (run, docs, publish, --help, --version), /metrics, /healthz and /readyz
 * (run --http ADDR:PORT), JSON logs (--log-format json) and the broker
 * choice (--brokers, else CSTREAM_BROKERS, else the embedded cluster).
 * The bank and the counters store are simulated (they fail now and then, see
 * clients.h). `make run` runs the seeded walkthrough in demo.c; `make serve` runs this. */
#include <stdio.h>

#include "service.h"

int main(int argc, char **argv) {
    static clients cl; /* built by the start-up hook, freed by the shutdown hook */
    payouts_options opt = {.clients = &cl, .counters_fail_every = 50, .bank_fail_every = 20};
    payouts_service svc;
    if (payouts_service_new(&opt, &svc) != CS_OK) {
        fprintf(stderr, "payouts: %s\n", cs_errmsg());
        return 1;
    }
    return cs_app_main(svc.app, argc, argv); /* owns the app from here */
}
