/* test_tls_lend.c - test_tls.c's checks, every one, with ACO_RT_TLS_LEND
 * in every context (aco_rt_tls.h): on io_uring the connections read what
 * lent receives bring (checked: the scheduler's lends count grows), on
 * epoll the flag changes nothing (the count stays).  The sockets are
 * closed with aco_rt_close, as the flag asks; the checks that need a peer
 * whose socket fills up when it does not read use a server that never
 * lends (one that lends keeps taking bytes into its ring).  Exit status 0
 * only if every check passed.
 */
#define TEST_TLS_LEND 1
#define TEST_NAME "test_tls_lend"
#include "test_tls.c"
