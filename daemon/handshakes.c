/* SPDX-License-Identifier: MIT */
#include "handshakes.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"

struct addr_count {
	struct addr_count *next;
	struct peer_addr addr;
	unsigned n;       /* handshakes under way */
	unsigned charged; /* failed ones charged until charged_until */
	uint64_t charged_until;
	bool idle; /* in handshakes.idle: n is 0, charged is not */
	struct eb_list_node idle_node;
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

static void unlink_addr(struct handshakes *h, struct addr_count *c)
{
	struct addr_count **p = find(h, &c->addr);

	if (c->idle) {
		eb_list_remove(&h->idle, &c->idle_node);
		c->idle = false;
		h->n_idle--;
	}
	*p = c->next;
	free(c);
	h->n_addrs--;
}

/* Charges all expire together, at the latest one's end: an address keeps its charges a little
 * longer under a steady churn, never less long. */
static unsigned charges(struct addr_count *c, uint64_t now)
{
	if (c->charged > 0 && now >= c->charged_until)
		c->charged = 0;
	return c->charged;
}

/* Forgets addresses whose charges have run out, oldest first, and the oldest beyond
 * HANDSHAKE_IDLE_MAX: a peer that rotates its addresses grows the table by no more. */
static void sweep(struct handshakes *h, uint64_t now)
{
	while (h->idle.first) {
		struct addr_count *c = eb_list_entry(h->idle.first, struct addr_count, idle_node);

		if (h->n_idle <= HANDSHAKE_IDLE_MAX && charges(c, now) > 0)
			break;
		unlink_addr(h, c);
	}
}

void handshakes_add(struct handshakes *h, struct handshake *hs)
{
	struct addr_count **p, *c;

	eb_list_append(&h->list, &hs->node);
	hs->addr_counted = false;
	if (!counted(&hs->addr) || (h->n_addrs >= h->n_buckets && grow(h) < 0))
		return;
	p = find(h, &hs->addr);
	if (!*p) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->addr = hs->addr;
		*p = c;
		h->n_addrs++;
	}
	c = *p;
	if (c->idle) {
		eb_list_remove(&h->idle, &c->idle_node);
		c->idle = false;
		h->n_idle--;
	}
	c->n++;
	hs->addr_counted = true;
}

void handshakes_remove(struct handshakes *h, struct handshake *hs, bool failed, uint64_t now)
{
	struct addr_count *c;

	eb_list_remove(&h->list, &hs->node);
	if (!hs->addr_counted)
		return;
	hs->addr_counted = false;
	c = *find(h, &hs->addr);
	if (!c)
		return;
	c->n--;
	if (failed && now < hs->accepted_usec + HANDSHAKE_CHARGE_USEC) {
		(void)charges(c, now);
		c->charged++;
		c->charged_until = MAX(c->charged_until, hs->accepted_usec + HANDSHAKE_CHARGE_USEC);
	}
	if (c->n > 0)
		return;
	if (charges(c, now) == 0) {
		unlink_addr(h, c);
		return;
	}
	eb_list_append(&h->idle, &c->idle_node);
	c->idle = true;
	h->n_idle++;
	sweep(h, now);
}

unsigned handshakes_from(struct handshakes *h, const struct peer_addr *a, uint64_t now)
{
	struct addr_count *c;

	if (!counted(a) || h->n_buckets == 0)
		return 0;
	sweep(h, now);
	c = *find(h, a);
	return c ? c->n + charges(c, now) : 0;
}

struct handshake *handshakes_busiest(const struct handshakes *h, unsigned more_than)
{
	const struct addr_count *top = NULL;

	/* Both walks are bounded by max-handshakes (and the idle addresses): this runs only when
	 * every handshake slot is taken. */
	for (unsigned i = 0; i < h->n_buckets; i++)
		for (const struct addr_count *c = h->buckets[i]; c; c = c->next)
			if (!top || c->n > top->n)
				top = c;
	if (!top || top->n <= more_than)
		return NULL;
	/* Its newest: an older one is nearer its end, if it is a real client's. */
	for (struct eb_list_node *n = h->list.last; n; n = n->prev) {
		struct handshake *hs = eb_list_entry(n, struct handshake, node);

		if (hs->addr_counted && hs->addr.family == top->addr.family &&
		    memcmp(hs->addr.bytes, top->addr.bytes, sizeof(hs->addr.bytes)) == 0)
			return hs;
	}
	return NULL;
}

struct handshake *handshakes_oldest(const struct handshakes *h)
{
	return h->list.first ? eb_list_entry(h->list.first, struct handshake, node) : NULL;
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
