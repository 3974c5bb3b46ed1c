/* SPDX-License-Identifier: MIT */
/* Loop protection for chained brokers: ids carried upwards in HELLO, checked by each upstream. */
#include "chain.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "broker.h"
#include "log.h"

int chain_init(struct broker *b)
{
	char id[17];

	/* 64 random bits: two brokers of one site share an id with probability about n^2 / 2^65,
	 * and the worst a clash does is refuse a chain that was not a cycle. */
	if (getrandom(&b->chain_id, sizeof(b->chain_id), 0) != sizeof(b->chain_id))
		return -errno;
	log_info("Broker id %s (carried in HELLO when drawing from an upstream broker)",
	         chain_id_to_string(b->chain_id, id));
	return 0;
}

const char *chain_id_to_string(uint64_t id, char buf[static 17])
{
	snprintf(buf, 17, "%016" PRIx64, id);
	return buf;
}

static bool contains(const uint64_t *ids, unsigned n, uint64_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

int chain_path(const struct broker *b, uint64_t ret[EB_CHAIN_MAX])
{
	const struct chain_link *l;
	unsigned n = 0;

	ret[n++] = b->chain_id;
	eb_list_foreach(l, &b->chain_links, node) {
		for (unsigned i = 0; i < l->n; i++) {
			if (contains(ret, n, l->ids[i]))
				continue;
			if (n == EB_CHAIN_MAX)
				return -E2BIG;
			ret[n++] = l->ids[i];
		}
	}
	return (int)n;
}

void chain_join(struct broker *b, struct chain_link *link)
{
	eb_list_append(&b->chain_links, &link->node);
}

void chain_leave(struct broker *b, struct chain_link *link)
{
	eb_list_remove(&b->chain_links, &link->node);
}

static void format_chain(const struct eb_msg_hello *h, char *buf, size_t size)
{
	size_t k = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < h->n_chain && k < size; i++) {
		char id[17];
		int w = snprintf(buf + k, size - k, "%s%s", i ? " " : "",
		                 chain_id_to_string(h->chain[i], id));

		if (w < 0)
			break;
		k += (size_t)w;
	}
}

/* Whether this broker's path upstream would still fit EB_CHAIN_MAX with h's ids in it. */
static bool path_fits(const struct broker *b, const struct eb_msg_hello *h)
{
	uint64_t path[EB_CHAIN_MAX];
	int n = chain_path(b, path);

	if (n < 0)
		return false;
	for (unsigned i = 0; i < h->n_chain; i++) {
		if (contains(path, (unsigned)n, h->chain[i]))
			continue;
		if (n == EB_CHAIN_MAX)
			return false;
		path[n++] = h->chain[i];
	}
	return true;
}

/* The ids the links of user hold, counted with repeats: what that user spends of the budget. */
static unsigned user_ids(const struct broker *b, int user)
{
	const struct chain_link *l;
	unsigned n = 0;

	eb_list_foreach(l, &b->chain_links, node)
		if (l->user == user)
			n += l->n;
	return n;
}

struct chain_link *chain_make_way(const struct broker *b, int user, const struct eb_msg_hello *h)
{
	struct chain_link *l, *evict = NULL;
	unsigned mine = user_ids(b, user) + h->n_chain, most = 0;

	if (!b->upstream || path_fits(b, h))
		return NULL;
	eb_list_foreach(l, &b->chain_links, node) {
		unsigned theirs;

		if (l->user == user)
			continue;
		theirs = user_ids(b, l->user);
		/* Ties stay: the newcomer must hold fewer than the one it displaces, so two users
		 * cannot take turns displacing each other. */
		if (theirs > mine && (theirs > most || (theirs == most && l->n > evict->n))) {
			most = theirs;
			evict = l;
		}
	}
	return evict;
}

int chain_accept(struct broker *b, int user, const char *peer, const struct eb_msg_hello *h,
                 struct chain_link *link, const char **ret_why)
{
	const struct eb_user *u = &b->conf->users[user];
	char id[17], ids[EB_CHAIN_MAX * 17 + 1];

	/* Ids go into what this broker tells its own upstream, so they are taken only from a
	 * user the configuration names a downstream broker: a sink's made-up ids would otherwise
	 * fill the path and stop this broker's refills, or name the upstream and have it refused.
	 */
	if (!u->downstream_broker) {
		log_peer_refused(
		    b, PEER_LOG_REFUSED, LOG_WARNING,
		    "Refusing %s: user %s sent the broker ids of a chained broker but is not "
		    "one; set downstream-broker = yes in its [user] section if it is",
		    peer, u->name);
		*ret_why = "broker ids from a user that is not a broker";
		return -EPERM;
	}
	/* A path that would outgrow what this broker can carry upstream is refused here, at the
	 * broker that joins it, which then retries with back-off: the brokers already drawing
	 * through this one, and this one's own refills, carry on. */
	if (b->upstream && !path_fits(b, h)) {
		log_peer_refused(
		    b, PEER_LOG_REFUSED, LOG_WARNING,
		    "Refusing %s (user %s): with its %u broker ids, more than %u brokers would "
		    "draw through this one",
		    peer, u->name, h->n_chain, EB_CHAIN_MAX);
		*ret_why = "chain too deep: more than 16 brokers";
		return -E2BIG;
	}
	if (!contains(h->chain, h->n_chain, b->chain_id)) {
		link->user = user;
		link->n = h->n_chain;
		memcpy(link->ids, h->chain, sizeof(link->ids));
		if (b->chain_refused_user == user)
			b->chain_refused_user = -1;
		return 0;
	}

	/* A downstream retries with back-off while the cycle stands: one line says it, the
	 * retries are debug. */
	format_chain(h, ids, sizeof(ids));
	if (b->chain_refused_user != user || b->chain_refused_first != h->chain[0]) {
		log_warning(
		    "Refusing %s (user %s): its chain of brokers (%s) contains this broker "
		    "(%s); serving it would make this broker draw from itself through a cycle",
		    peer, u->name, ids, chain_id_to_string(b->chain_id, id));
		b->chain_refused_user = user;
		b->chain_refused_first = h->chain[0];
	} else
		log_debug("Refusing %s (user %s) again: chain %s has a cycle", peer, u->name, ids);
	*ret_why = "cycle: the brokers drawing through you include this one";
	return -ELOOP;
}
