/*
 * ucx_stub.c - a fake UCX for fuzz_ctl (see ucx_stub.h): workers and
 * endpoints are small allocations (ASan reports one never destroyed), an
 * address is FAKE_ADDR_LEN fixed bytes, nothing is ever sent or received.
 */
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "ucx_stub.h"

struct gm_fuzz_ucx gm_fuzz_ucx;
const unsigned char gm_fuzz_fake_addr[FAKE_ADDR_LEN] =
    "a fake UCX worker address.....................";

ucs_status_t ucp_config_read(const char *env_prefix, const char *filename, ucp_config_t **config_p)
{
	(void)env_prefix, (void)filename;
	*config_p = (ucp_config_t *)&gm_fuzz_ucx;
	return UCS_OK;
}

void ucp_config_release(ucp_config_t *config)
{
	(void)config;
}

ucs_status_t ucp_init_version(unsigned api_major_version, unsigned api_minor_version,
			      const ucp_params_t *params, const ucp_config_t *config,
			      ucp_context_h *context_p)
{
	(void)api_major_version, (void)api_minor_version, (void)params, (void)config;
	*context_p = malloc(16);
	return *context_p ? UCS_OK : UCS_ERR_NO_MEMORY;
}

void ucp_cleanup(ucp_context_h context_p)
{
	free(context_p);
}

ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t *params,
			       ucp_worker_h *worker_p)
{
	(void)context, (void)params;
	*worker_p = malloc(16);
	if (!*worker_p)
		return UCS_ERR_NO_MEMORY;
	gm_fuzz_ucx.workers++;
	return UCS_OK;
}

void ucp_worker_destroy(ucp_worker_h worker)
{
	gm_fuzz_ucx.workers--;
	free(worker);
}

ucs_status_t ucp_worker_set_am_recv_handler(ucp_worker_h worker,
					    const ucp_am_handler_param_t *param)
{
	(void)worker, (void)param;
	return UCS_OK;
}

ucs_status_t ucp_worker_get_efd(ucp_worker_h worker, int *fd)
{
	(void)worker;
	*fd = -1;
	return UCS_ERR_UNSUPPORTED;
}

unsigned ucp_worker_progress(ucp_worker_h worker)
{
	(void)worker;
	return 0;
}

ucs_status_t ucp_worker_arm(ucp_worker_h worker)
{
	(void)worker;
	return UCS_OK;
}

ucs_status_t ucp_worker_get_address(ucp_worker_h worker, ucp_address_t **address_p,
				    size_t *address_length_p)
{
	if (!worker)
		abort(); /* an address asked of no worker */
	if (gm_fuzz_ucx.fail_address)
		return UCS_ERR_NO_MEMORY;
	*address_p = malloc(FAKE_ADDR_LEN);
	if (!*address_p)
		return UCS_ERR_NO_MEMORY;
	memcpy(*address_p, gm_fuzz_fake_addr, FAKE_ADDR_LEN);
	*address_length_p = FAKE_ADDR_LEN;
	return UCS_OK;
}

void ucp_worker_release_address(ucp_worker_h worker, ucp_address_t *address)
{
	(void)worker;
	free(address);
}

ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params, ucp_ep_h *ep_p)
{
	if (!worker || !(params->field_mask & UCP_EP_PARAM_FIELD_REMOTE_ADDRESS))
		abort(); /* an endpoint on no worker, or to no address */
	gm_fuzz_ucx.ep_address = params->address;
	if (gm_fuzz_ucx.fail_ep)
		return UCS_ERR_UNREACHABLE;
	*ep_p = malloc(16);
	if (!*ep_p)
		return UCS_ERR_NO_MEMORY;
	gm_fuzz_ucx.eps++;
	return UCS_OK;
}

ucs_status_ptr_t ucp_ep_close_nbx(ucp_ep_h ep, const ucp_request_param_t *param)
{
	(void)param;
	gm_fuzz_ucx.eps--;
	free(ep);
	return NULL;
}

ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void *header, size_t header_length,
				 const void *buffer, size_t count, const ucp_request_param_t *param)
{
	(void)ep, (void)id, (void)header, (void)header_length, (void)buffer, (void)count,
	    (void)param;
	return NULL;
}

ucs_status_t ucp_request_check_status(void *request)
{
	(void)request;
	return UCS_OK;
}

void ucp_request_free(void *request)
{
	(void)request;
}

const char *ucs_status_string(ucs_status_t status)
{
	(void)status;
	return "a fake UCX status";
}
