/*
 * ucx_stub.h - a fake UCX for fuzz_ctl (ucx_stub.c): the calls the remote
 * plugin's control port and connection table make (ctl.c, conn.c), each doing
 * nothing but count what exists, so that the handshake runs whole in a fuzz
 * loop without a network. UCX's own parse of a worker address is not ours and
 * not fuzzed here; what is checked is that ucp_ep_create gets the address
 * bytes of the frame, and that every worker and endpoint made is destroyed.
 */
#ifndef GM_FUZZ_UCX_STUB_H
#define GM_FUZZ_UCX_STUB_H

#include <stdbool.h>
#include <stddef.h>

struct gm_fuzz_ucx {
	bool fail_address, fail_ep; /* make the next calls fail */
	int workers, eps;	    /* alive now */
	const void *ep_address;	    /* what the last ucp_ep_create was given */
};
extern struct gm_fuzz_ucx gm_fuzz_ucx;

/* The bytes ucp_worker_get_address hands out (FAKE_ADDR_LEN of them). */
#define FAKE_ADDR_LEN 48
extern const unsigned char gm_fuzz_fake_addr[FAKE_ADDR_LEN];

#endif
