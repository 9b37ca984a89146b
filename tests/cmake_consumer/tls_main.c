/* tls_main.c - aco_tls_consumer: aco::tls links and works: a client context
 * that needs no file made, one that names a missing file refused with
 * ENOENT.  Prints "tls_consumer: ok". */
#include "aco_rt_tls.h"

#include <errno.h>
#include <stdio.h>

int main(void) {
    char err[256];
    aco_rt_tls_opts_t ok = {0};
    ok.flags = ACO_RT_TLS_NO_VERIFY;
    aco_rt_tls_opts_t missing = {0};
    missing.ca_file = "/nonexistent/aco_tls_consumer.pem";
    aco_rt_tls_ctx_t* c = aco_rt_tls_ctx_new(&ok, err, sizeof err);
    if (c == NULL) {
        fprintf(stderr, "tls_consumer: %s\n", err);
        return 1;
    }
    aco_rt_tls_ctx_free(c);
    if (aco_rt_tls_ctx_new(&missing, err, sizeof err) != NULL || errno != ENOENT) {
        fprintf(stderr, "tls_consumer: a missing ca_file was not ENOENT\n");
        return 1;
    }
    puts("tls_consumer: ok");
    return 0;
}
