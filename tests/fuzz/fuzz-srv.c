/* SPDX-License-Identifier: MIT */
/* Fuzzes the SRV answer parser, which reads what a DNS server (or anyone who can forge its
 * answers) sends, and the RFC 2782 order put on what it returns. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "srv.h"

#define QNAME "_entropy-broker._tcp.fleet.test"
/* A DNS message over TCP is at most 65535 bytes; more is refused before parsing. */
#define INPUT_MAX 65536

/* The order's random numbers from the input's own bytes: deterministic per input. */
struct draws {
	const uint8_t *data;
	size_t size, at;
};

static uint32_t draw(uint32_t bound, void *userdata)
{
	struct draws *d = userdata;
	uint32_t v = 0;

	for (int i = 0; i < 4 && d->size > 0; i++)
		v = v << 8 | d->data[d->at++ % d->size];
	return bound == UINT32_MAX ? v : v % (bound + 1);
}

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct eb_srv_record recs[EB_SRV_TARGETS_MAX], ordered[EB_SRV_TARGETS_MAX];
	struct draws d = {data, size, 0};
	uint32_t ttl, min_ttl = UINT32_MAX;
	size_t n = 0;
	int r;

	if (size > INPUT_MAX)
		return 0;
	r = eb_srv_parse(data, size, QNAME, recs, EB_SRV_TARGETS_MAX, &n, &ttl);
	if (r < 0) {
		check(r == -EBADMSG || r == -ENOENT || r == -EHOSTDOWN);
		return 0;
	}
	check(n >= 1 && n <= EB_SRV_TARGETS_MAX);
	for (size_t i = 0; i < n; i++) {
		size_t len = strnlen(recs[i].target, sizeof(recs[i].target));

		check(len > 0 && len <= EB_SRV_NAME_MAX);
		check(recs[i].target[0] != '.' && recs[i].target[len - 1] != '.');
		for (size_t j = 0; j < len; j++)
			check(host_char(recs[i].target[j]));
		check(recs[i].port != 0);
		if (recs[i].ttl < min_ttl)
			min_ttl = recs[i].ttl;
	}
	check(ttl == min_ttl);

	/* The order is a permutation, sorted by priority. */
	memcpy(ordered, recs, n * sizeof(*recs));
	eb_srv_order(ordered, n, draw, &d);
	for (size_t i = 0; i + 1 < n; i++)
		check(ordered[i].priority <= ordered[i + 1].priority);
	for (size_t i = 0; i < n; i++) {
		size_t same = 0, same_ordered = 0;

		for (size_t j = 0; j < n; j++) {
			same += memcmp(&recs[j], &recs[i], sizeof(recs[i])) == 0;
			same_ordered += memcmp(&ordered[j], &recs[i], sizeof(recs[i])) == 0;
		}
		check(same == same_ordered);
	}
	return 0;
}
