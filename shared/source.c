/* SPDX-License-Identifier: MIT */
#include "source.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "proto.h"

static int ensure_connected(struct eb_client *c)
{
	int r;

	if (eb_client_connected(c))
		return 0;
	r = eb_client_connect_retry(c, 0);
	if (r < 0)
		return log_error_errno(r, "Cannot reach a broker: %s", eb_client_last_error(c));
	log_info("Donating to %s", eb_client_broker(c));
	return 0;
}

int eb_source_run(struct eb_client *c, eb_source_fill_t fill, void *userdata, size_t chunk,
                  struct eb_source_stats *ret_stats)
{
	struct eb_source_stats st = {};
	uint8_t *buf;
	int r = 0;

	if (chunk == 0 || chunk > EB_DATA_MAX)
		chunk = EB_DATA_MAX;
	buf = malloc(chunk);
	if (!buf)
		return log_oom();
	for (;;) {
		uint64_t credit = 0;
		ssize_t n;

		r = ensure_connected(c);
		if (r < 0)
			break;
		if (eb_client_asleep(c)) {
			/* The pool is full: sample nothing until the broker wants more. */
			log_debug("Broker %s is full; resting", eb_client_broker(c));
			r = eb_client_wait_wake(c);
			if (r < 0) {
				log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
				            eb_client_last_error(c));
				continue;
			}
		}
		n = fill(userdata, buf, chunk, &credit);
		if (n < 0) {
			r = (int)n;
			break;
		}
		if (n == 0) {
			r = eb_client_flush(c);
			if (r < 0)
				log_warning("Broker %s did not acknowledge the last data: %s",
				            eb_client_broker(c), eb_client_last_error(c));
			r = 0;
			break;
		}
		credit = MIN(credit, (uint64_t)n * 8);
		r = eb_client_put(c, buf, (size_t)n, (uint32_t)credit);
		explicit_bzero(buf, (size_t)n);
		if (r == -EACCES) {
			log_error("Broker %s refused the data: %s", eb_client_broker(c),
			          eb_client_last_error(c));
			break;
		}
		if (r < 0) {
			/* What was in flight is lost with the connection; it is not sent twice. */
			log_warning("Lost broker %s: %s; failing over", eb_client_broker(c),
			            eb_client_last_error(c));
			continue;
		}
		st.bytes += (uint64_t)n;
		st.claimed += credit;
	}
	st.credited = eb_client_bits_credited(c);
	explicit_bzero(buf, chunk);
	free(buf);
	if (ret_stats)
		*ret_stats = st;
	return r;
}
