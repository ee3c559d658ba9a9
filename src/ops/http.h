/* http.h — the operations HTTP server (libmicrohttpd, its own thread). It
 * knows nothing of metrics or health: every GET goes to the route function.
 *
 * Owns: declares the opaque cs_http; the caller of cs__http_start owns it and
 * frees it with cs__http_stop. Locks: none. Threads: start and stop on the
 * caller's thread; the route runs on the server's own thread. */
#ifndef CS_CORE_HTTP_H
#define CS_CORE_HTTP_H

#include "cstream/error.h"

typedef struct cs_http cs_http;

/* Answers one GET/HEAD for `path` on the server's thread: returns the HTTP
 * status and sets *body (malloc'ed, the server frees it; NULL: empty) and
 * *content_type (a static string). */
typedef int (*cs_http_route_fn)(void *ctx, const char *path, char **body, const char **content_type);

/* Listens on "ADDR:PORT" ("[::1]:8080", ":9090" for every address; port 0: any
 * free port); *port_out (may be NULL) gets the port bound. */
cs_err cs__http_start(const char *addr_port, cs_http_route_fn route, void *ctx, cs_http **out, int *port_out);
/* Stops the server (waits for the request in progress). NULL: nothing. */
void cs__http_stop(cs_http *h);

#endif
