/* SPDX-License-Identifier: MIT */
/* Who an EGD client is (its peer: a uid, an IPv4 address, an IPv6 /64), and the limits on how
 * many clients each peer and all may have: past them an idle client makes room for a newcomer. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "egd-server-internal.h"
#include "list.h"
#include "log.h"
#include "macro.h"

static void peer_key_of(int fd, struct peer_key *ret)
{
	struct sockaddr_storage ss = {};
	socklen_t len = sizeof(ss);
	struct peer_key k = {};

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		ss.ss_family = AF_UNSPEC;
	k.family = ss.ss_family;
	if (ss.ss_family == AF_UNIX) {
		struct ucred uc;
		socklen_t l = sizeof(uc);

		/* Every unix client is someone: an unknown uid counts as one peer, nobody's. */
		k.uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &l) < 0 ? UINT32_MAX : uc.uid;
	} else if (ss.ss_family == AF_INET) {
		memcpy(k.addr, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	} else if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a)) {
			k.family = AF_INET;
			memcpy(k.addr, a->s6_addr + 12, 4);
		} else
			memcpy(k.addr, a->s6_addr, 8);
	}
	*ret = k;
}

static bool peer_key_eq(const struct peer_key *a, const struct peer_key *b)
{
	return a->family == b->family && a->uid == b->uid && memcmp(a->addr, b->addr, 8) == 0;
}

/* The peer for the log: "uid 1000", "192.0.2.1", "2001:db8::/64". */
static const char *peer_name(const struct peer_key *k, char *buf, size_t size)
{
	uint8_t a6[16] = {};
	char a[INET6_ADDRSTRLEN];

	switch (k->family) {
	case AF_UNIX:
		snprintf(buf, size, "uid %" PRIu32, k->uid);
		break;
	case AF_INET:
		snprintf(buf, size, "%s", inet_ntop(AF_INET, k->addr, a, sizeof(a)) ?: "?");
		break;
	case AF_INET6:
		memcpy(a6, k->addr, 8);
		snprintf(buf, size, "%s/64", inet_ntop(AF_INET6, a6, a, sizeof(a)) ?: "?");
		break;
	default:
		snprintf(buf, size, "a peer of address family %d", k->family);
		break;
	}
	return buf;
}

static struct peer *peer_find(struct egd_server *s, const struct peer_key *k)
{
	struct peer *p;

	eb_list_foreach(p, &s->peers, node)
		if (peer_key_eq(&p->key, k))
			return p;
	return NULL;
}

/* Idle: owed no bytes and with no answer pending, so dropping it loses nothing it asked for. */
static bool client_idle(const struct client *c)
{
	return c->owed == 0 && c->out_len == 0;
}

/* The client of peer p (any peer when NULL) that has been idle longest, or NULL. */
static struct client *oldest_idle(struct egd_server *s, const struct peer *p)
{
	struct client *c, *best = NULL;

	eb_list_foreach(c, &s->clients, node)
		if ((!p || c->peer == p) && client_idle(c) && (!best || c->active < best->active))
			best = c;
	return best;
}

/* The peer with the most clients: at the total limit it is the one that gives up a slot. */
static struct peer *largest_peer(struct egd_server *s)
{
	struct peer *p, *best = NULL;

	eb_list_foreach(p, &s->peers, node)
		if (!best || p->n_clients > best->n_clients)
			best = p;
	return best;
}

/* Makes room for a new client of key: nothing when it is within both limits; else drops the
 * longest-idle client of the same peer (at --max-clients-per-peer), or of the peer with the
 * most clients, or of anyone (at --max-clients). Clients owed bytes are never dropped for a
 * newcomer. Returns false, having logged, when there is no room. */
static bool make_room(struct egd_server *s, const struct peer_key *key, struct peer *p)
{
	/* A share of all is a limit of its own only when it is less than all. */
	bool per_peer = p && s->opts.max_clients_per_peer < s->opts.max_clients &&
	                p->n_clients >= s->opts.max_clients_per_peer;
	struct client *victim = NULL;
	uint64_t now = server_now(s);
	char name[64];

	if (per_peer)
		victim = oldest_idle(s, p);
	else if (s->n_clients >= s->opts.max_clients) {
		victim = oldest_idle(s, largest_peer(s));
		if (!victim)
			victim = oldest_idle(s, NULL);
	} else
		return true;

	if (!victim) {
		s->stats.refused++;
		if (now - s->last_refused_log > WARN_INTERVAL_USEC) {
			if (per_peer)
				log_warning(
				    "Refusing clients of %s: all its %u clients are waiting for bytes (--max-clients-per-peer)",
				    peer_name(key, name, sizeof(name)), p->n_clients);
			else
				log_warning(
				    "Refusing clients: all %u are waiting for bytes (--max-clients)",
				    s->n_clients);
			s->last_refused_log = now;
		}
		return false;
	}
	s->stats.dropped_idle++;
	if (now - s->last_evict_log > WARN_INTERVAL_USEC) {
		if (per_peer)
			log_warning(
			    "Dropping idle clients of %s for its new ones: %u is the limit (--max-clients-per-peer)",
			    peer_name(key, name, sizeof(name)), p->n_clients);
		else
			log_warning(
			    "Dropping idle clients of %s for new ones: %u clients is the limit (--max-clients)",
			    peer_name(&victim->peer->key, name, sizeof(name)), s->n_clients);
		s->last_evict_log = now;
	}
	egd_client_free(victim, "idle, dropped to make room");
	return true;
}

struct peer *egd_peer_admit(struct egd_server *s, int fd)
{
	struct peer_key key;
	struct peer *p;

	peer_key_of(fd, &key);
	if (!make_room(s, &key, peer_find(s, &key)))
		return NULL;
	/* Dropping a victim may have freed the peer, when the victim was its last client. */
	p = peer_find(s, &key);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p) {
		log_oom();
		return NULL;
	}
	p->key = key;
	eb_list_append(&s->peers, &p->node);
	return p;
}

void egd_peer_release(struct egd_server *s, struct peer *p)
{
	if (p->n_clients > 0)
		return;
	eb_list_remove(&s->peers, &p->node);
	free(p);
}
