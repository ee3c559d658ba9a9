/* http.c — the operations HTTP server on libmicrohttpd: one internal polling
 * thread, GET and HEAD only, answers from the route function (cli.c's
 * /metrics, /healthz, /readyz). The thread must be started with SIGINT and
 * SIGTERM blocked (cs_app_main does), so signals reach the lifecycle.
 *
 * Owns: the libmicrohttpd daemon and its thread. Locks: none of its own.
 * Threads: start and stop on cs_app_main's thread (cli.c); the route on the
 * daemon's polling thread. */
#define _POSIX_C_SOURCE 200809L
#include "ops/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/error.h"

#if MHD_VERSION < 0x00097002
typedef int MHD_RESULT;
#else
typedef enum MHD_Result MHD_RESULT;
#endif

struct cs_http {
    struct MHD_Daemon *daemon;
    cs_http_route_fn route;
    void *ctx;
};

static MHD_RESULT answer(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                         const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
    (void)version, (void)upload_data, (void)con_cls;
    cs_http *h = cls;
    char *body = NULL;
    const char *type = "text/plain; charset=utf-8";
    int status;
    if (*upload_data_size) { /* a request body: not ours */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = 405;
        body = strdup("method not allowed\n");
    } else {
        status = h->route(h->ctx, url, &body, &type);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body ? strlen(body) : 0, body ? body : (char *)"", MHD_RESPMEM_MUST_COPY);
    free(body);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_RESULT ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

cs_err cs__http_start(const char *addr_port, cs_http_route_fn route, void *ctx, cs_http **out, int *port_out) {
    *out = NULL;
    if (!addr_port || !*addr_port) return cs__fail(CS_ERR_ARG, "--http: address is empty");
    char host[256];
    const char *colon = strrchr(addr_port, ':');
    if (!colon || !colon[1]) return cs__fail(CS_ERR_ARG, "--http %s: expected ADDR:PORT", addr_port);
    size_t hl = (size_t)(colon - addr_port);
    if (hl >= sizeof host) return cs__fail(CS_ERR_ARG, "--http %s: address too long", addr_port);
    memcpy(host, addr_port, hl);
    host[hl] = '\0';
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') { /* [::1] */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return cs__fail(CS_ERR_ARG, "--http %s: port must be a number in [0, 65535]", addr_port);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(*host ? host : NULL, colon + 1, &hints, &ai);
    if (gai) return cs__fail(CS_ERR_ARG, "--http %s: %s", addr_port, gai_strerror(gai));

    cs_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return cs__fail(CS_ERR_NOMEM, "--http: out of memory");
    }
    h->route = route;
    h->ctx = ctx;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, answer, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        free(h);
        return cs__fail(CS_ERR_ARG, "--http %s: cannot listen there (address in use or not local?)", addr_port);
    }
    if (port_out) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
        *port_out = info ? (int)info->port : (int)port;
    }
    *out = h;
    return CS_OK;
}

void cs__http_stop(cs_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
