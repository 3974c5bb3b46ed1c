/* SPDX-License-Identifier: MIT */
#include "handshakes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "session.h"

struct addr_count {
	struct addr_count *next;
	struct peer_addr addr;
	unsigned n;
};

static bool counted(const struct peer_addr *a)
{
	/* An address the broker could not read is nobody's: it shares no limit. */
	return a->family != 0;
}

static unsigned bucket_of(const struct handshakes *h, const struct peer_addr *a)
{
	/* FNV-1a from a random start: a chain is at most as long as the handshakes under way,
	 * which max-handshakes bounds, and a peer cannot aim its addresses at one chain. */
	uint32_t x = 2166136261u ^ h->seed;

	x = (x ^ (uint32_t)a->family) * 16777619u;
	for (size_t i = 0; i < sizeof(a->bytes); i++)
		x = (x ^ a->bytes[i]) * 16777619u;
	return x % h->n_buckets;
}

static struct addr_count **find(const struct handshakes *h, const struct peer_addr *a)
{
	struct addr_count **p = &h->buckets[bucket_of(h, a)];

	while (*p && !((*p)->addr.family == a->family &&
	               memcmp((*p)->addr.bytes, a->bytes, sizeof(a->bytes)) == 0))
		p = &(*p)->next;
	return p;
}

/* Twice the buckets once there are more addresses than buckets: chains stay short. */
static int grow(struct handshakes *h)
{
	unsigned n = h->n_buckets ? 2 * h->n_buckets : 64;
	struct addr_count **old = h->buckets, **b = calloc(n, sizeof(*b));
	unsigned old_n = h->n_buckets;

	if (!b)
		return -ENOMEM;
	if (!h->buckets && getrandom(&h->seed, sizeof(h->seed), GRND_NONBLOCK) < 0)
		h->seed = (unsigned)(uintptr_t)b;
	h->buckets = b;
	h->n_buckets = n;
	for (unsigned i = 0; i < old_n; i++)
		for (struct addr_count *c = old[i], *next; c; c = next) {
			struct addr_count **p = &h->buckets[bucket_of(h, &c->addr)];

			next = c->next;
			c->next = *p;
			*p = c;
		}
	free(old);
	return 0;
}

void handshakes_add(struct handshakes *h, struct session *s)
{
	struct addr_count **p, *c;

	eb_list_append(&h->list, &s->handshake_node);
	s->addr_counted = false;
	if (!counted(&s->addr) || (h->n_addrs >= h->n_buckets && grow(h) < 0))
		return;
	p = find(h, &s->addr);
	if (!*p) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->addr = s->addr;
		*p = c;
		h->n_addrs++;
	}
	(*p)->n++;
	s->addr_counted = true;
}

void handshakes_remove(struct handshakes *h, struct session *s)
{
	struct addr_count **p, *c;

	eb_list_remove(&h->list, &s->handshake_node);
	if (!s->addr_counted)
		return;
	s->addr_counted = false;
	p = find(h, &s->addr);
	c = *p;
	if (!c || --c->n > 0)
		return;
	*p = c->next;
	free(c);
	h->n_addrs--;
}

unsigned handshakes_from(const struct handshakes *h, const struct peer_addr *a)
{
	struct addr_count *c;

	if (!counted(a) || h->n_buckets == 0)
		return 0;
	c = *find(h, a);
	return c ? c->n : 0;
}

struct session *handshakes_oldest(const struct handshakes *h)
{
	return h->list.first ? eb_list_entry(h->list.first, struct session, handshake_node) : NULL;
}

void handshakes_free(struct handshakes *h)
{
	for (unsigned i = 0; i < h->n_buckets; i++)
		for (struct addr_count *c = h->buckets[i], *next; c; c = next) {
			next = c->next;
			free(c);
		}
	free(h->buckets);
	*h = (struct handshakes){};
}
