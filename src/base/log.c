/* log.c — process-wide log threshold and line writer (stderr, one write per line
 * so lines from different threads never interleave).
 *
 * Owns: the threshold and the line format (atomics, read once from the
 * environment). Locks: none. Threads: any thread. */
#define _POSIX_C_SOURCE 200809L
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static _Atomic int threshold = -1; /* -1: not read from the environment yet */

static int level_from_env(void) {
    const char *v = getenv("CSTREAM_LOG_LEVEL");
    if (!v) return CS_LOG_INFO;
    if (!strcasecmp(v, "error")) return CS_LOG_ERROR;
    if (!strcasecmp(v, "warn")) return CS_LOG_WARN;
    if (!strcasecmp(v, "debug")) return CS_LOG_DEBUG;
    return CS_LOG_INFO;
}

void cs_log_set_level(cs_log_level level) { atomic_store(&threshold, (int)level); }

bool cs__log_enabled(cs_log_level level) {
    int t = atomic_load_explicit(&threshold, memory_order_relaxed);
    if (t < 0) {
        t = level_from_env();
        atomic_store(&threshold, t);
    }
    return (int)level <= t;
}

/* ---- operations surface: the log format (text or json) and the level names ---- */
static _Atomic int format = -1; /* -1: not read from the environment yet */

int cs__log_format_parse(const char *s) {
    if (s && !strcasecmp(s, "text")) return CS_LOG_TEXT;
    if (s && !strcasecmp(s, "json")) return CS_LOG_JSON;
    return -1;
}

int cs__log_level_parse(const char *s) {
    static const char *names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; s && i < 4; i++)
        if (!strcasecmp(s, names[i])) return i;
    return -1;
}

void cs_log_set_format(cs_log_format f) { atomic_store(&format, (int)f); }

static bool log_format_json(void) {
    int f = atomic_load_explicit(&format, memory_order_relaxed);
    if (f < 0) {
        f = cs__log_format_parse(getenv("CSTREAM_LOG_FORMAT"));
        if (f < 0) f = CS_LOG_TEXT;
        atomic_store(&format, f);
    }
    return f == CS_LOG_JSON;
}

typedef struct jbuf {
    char *p;
    size_t n, size;
} jbuf;

static void jput(jbuf *b, char c) {
    if (b->n + 1 < b->size) b->p[b->n++] = c;
}

static void jstr(jbuf *b, const char *s, size_t len) {
    jput(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            jput(b, '\\');
            jput(b, (char)c);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            for (char *e = esc; *e; e++) jput(b, *e);
        } else {
            jput(b, (char)c);
        }
    }
    jput(b, '"');
}

static void jraw(jbuf *b, const char *s) {
    while (*s) jput(b, *s++);
}

/* A field starts where a word made of [A-Za-z0-9_.-] is followed by '='. */
static size_t key_len_at(const char *s) {
    size_t i = 0;
    while (s[i] && (s[i] == '_' || s[i] == '.' || s[i] == '-' || (s[i] >= 'a' && s[i] <= 'z') ||
                    (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
        i++;
    return i > 0 && s[i] == '=' ? i : 0;
}

static bool is_integer(const char *s, size_t len) {
    size_t i = s[0] == '-' ? 1 : 0;
    if (len <= i || len - i > 18 || (s[i] == '0' && len - i > 1)) return false;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

size_t cs__log_json_line(char *out, size_t size, const char *ts, const char *level, const char *body) {
    jbuf b = {out, 0, size};
    /* The message is everything before the first " key=" (or a leading "key="). */
    const char *fields = NULL;
    for (const char *p = body; *p; p++)
        if ((p == body || p[-1] == ' ') && key_len_at(p)) {
            fields = p;
            break;
        }
    size_t msg_len = fields ? (size_t)(fields - body) : strlen(body);
    while (msg_len && body[msg_len - 1] == ' ') msg_len--;
    jraw(&b, "{\"ts\":");
    jstr(&b, ts, strlen(ts));
    jraw(&b, ",\"level\":");
    char lower[8];
    size_t ll = 0;
    for (; level[ll] && ll < sizeof lower - 1; ll++) lower[ll] = (char)(level[ll] | 0x20);
    jstr(&b, lower, ll);
    jraw(&b, ",\"msg\":");
    jstr(&b, body, msg_len);
    for (const char *p = fields; p && *p;) {
        size_t kl = key_len_at(p);
        if (!kl) { /* not a field: skip the word */
            while (*p && *p != ' ') p++;
            while (*p == ' ') p++;
            continue;
        }
        const char *v = p + kl + 1, *end;
        size_t vl;
        if (*v == '"') {
            /* A quoted value ends at the quote followed by the end or " key=". */
            v++;
            end = v;
            for (;; end++) {
                end = strchr(end, '"');
                if (!end) {
                    end = v + strlen(v);
                    break;
                }
                if (!end[1] || (end[1] == ' ' && key_len_at(end + 2))) break;
            }
            vl = (size_t)(end - v);
            if (*end == '"') end++;
        } else {
            end = strchr(v, ' ');
            if (!end) end = v + strlen(v);
            vl = (size_t)(end - v);
        }
        jput(&b, ',');
        jstr(&b, p, kl);
        jput(&b, ':');
        if (v[-1] != '"' && is_integer(v, vl)) {
            for (size_t i = 0; i < vl; i++) jput(&b, v[i]);
        } else {
            jstr(&b, v, vl);
        }
        p = end;
        while (*p == ' ') p++;
    }
    jput(&b, '}');
    if (b.n + 1 >= b.size && b.size >= 2) b.p[b.size - 2] = '}'; /* truncated: still one object's end */
    b.p[b.n] = '\0';
    return b.n;
}
/* ---- end operations surface ---------------------------------------------------------- */

static const char *level_name(cs_log_level l) {
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    return names[l];
}

void cs__log(cs_log_level level, const char *fmt, ...) {
    if (!cs__log_enabled(level)) return;
    char line[2048];
    struct timespec ts;
    cs__realtime_now(&ts); /* a timestamp people read: the wall clock */
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_name(level));
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    /* operations surface: --log-format json rewrites the line as one JSON object */
    if (log_format_json()) {
        char json[4096];
        line[n] = '\0';
        line[24] = '\0'; /* the timestamp: "YYYY-MM-DDTHH:MM:SS.mmmZ" */
        n = (int)cs__log_json_line(json, sizeof json - 1, line, level_name(level), line + 31);
        json[n++] = '\n';
        ssize_t w = write(STDERR_FILENO, json, (size_t)n);
        (void)w;
        return;
    }
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

bool cs__ratelimit_allow(cs_ratelimit *rl, int64_t interval_ms, uint64_t *suppressed) {
    int64_t now = cs__now_ms();
    int64_t next = atomic_load(&rl->next_ms);
    if (now >= next && atomic_compare_exchange_strong(&rl->next_ms, &next, now + interval_ms)) {
        *suppressed = atomic_exchange(&rl->suppressed, 0);
        return true;
    }
    atomic_fetch_add(&rl->suppressed, 1);
    return false;
}
