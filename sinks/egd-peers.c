/* SPDX-License-Identifier: MIT */
/* Who an EGD client is (its peer: a uid, an IPv4 address, an IPv6 /64), and the limits on how
 * many clients each peer and all may have: past them an idle client, or else one waiting for
 * bytes, makes room for a newcomer. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "egd-server-internal.h"
#include "list.h"
#include "log.h"
#include "macro.h"

/* Whether a TCP peer is on this host: 127/8, ::1, or 127/8 mapped into IPv6. */
static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* An address and port as sock_diag takes them: IPv4 (also mapped into IPv6) in the first word. */
static int diag_endpoint(const struct sockaddr_storage *ss, __be16 *ret_port, __be32 ret_addr[4])
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		*ret_port = a->sin_port;
		memcpy(ret_addr, &a->sin_addr, 4);
		return AF_INET;
	}
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

	*ret_port = a->sin6_port;
	if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
		memcpy(ret_addr, a->sin6_addr.s6_addr + 12, 4);
		return AF_INET;
	}
	memcpy(ret_addr, &a->sin6_addr, 16);
	return AF_INET6;
}

/* The uid that owns the other end of a loopback TCP connection, as the kernel's sock_diag
 * (NETLINK_SOCK_DIAG) reports it: the peer's socket is the one whose own end is the peer's
 * address and port and whose other end is ours, looked up by that exact 4-tuple. Every local
 * user can connect from any 127.x.y.z, so an address proves nothing about who connects; the
 * socket's owner does. 0 and the uid, or a negative errno. */
static int loopback_owner(const struct sockaddr_storage *peer, const struct sockaddr_storage *local,
                          uint32_t *ret_uid)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
	    .nlh = {.nlmsg_len = sizeof(req),
	            .nlmsg_type = SOCK_DIAG_BY_FAMILY,
	            .nlmsg_flags = NLM_F_REQUEST},
	    .r = {.sdiag_protocol = IPPROTO_TCP,
	          .idiag_states = ~0u,
	          .id.idiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
	};
	const struct timeval tv = {.tv_sec = 1};
	union {
		struct nlmsghdr h;
		uint8_t b[1024];
	} buf;
	_cleanup_close_ int nl = -EBADF;
	ssize_t n;

	req.r.sdiag_family =
	    (uint8_t)diag_endpoint(peer, &req.r.id.idiag_sport, req.r.id.idiag_src);
	if (diag_endpoint(local, &req.r.id.idiag_dport, req.r.id.idiag_dst) != req.r.sdiag_family)
		return -EAFNOSUPPORT;

	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	/* The kernel answers within the send; the timeout only bounds the unexpected. */
	(void)setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(nl, &req, sizeof(req), 0) < 0)
		return -errno;
	n = recv(nl, &buf, sizeof(buf), 0);
	if (n < 0)
		return -errno;
	if (!NLMSG_OK(&buf.h, (size_t)n))
		return -EBADMSG;
	if (buf.h.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&buf.h);

		return buf.h.nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error < 0 ? e->error
		                                                                   : -EBADMSG;
	}
	if (buf.h.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    buf.h.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
		return -EBADMSG;
	*ret_uid = ((const struct inet_diag_msg *)NLMSG_DATA(&buf.h))->idiag_uid;
	return 0;
}

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
	} else if (is_loopback(&ss)) {
		struct sockaddr_storage local = {};
		socklen_t ll = sizeof(local);

		/* A local peer is its uid, the same peer over TCP as over the unix socket. When
		 * the kernel cannot say (no sock_diag), every loopback client is one peer, uid
		 * unknown: one local user must not count as a thousand. */
		k.family = AF_UNIX;
		if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0 ||
		    loopback_owner(&ss, &local, &k.uid) < 0)
			k.uid = UINT32_MAX - 1;
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
		if (k->uid == UINT32_MAX - 1)
			snprintf(buf, size,
			         "loopback TCP clients whose uid sock_diag did not give");
		else
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

/* How readily a client makes way for a newcomer: 2 idle (owed no bytes, no answer pending:
 * dropping it loses nothing it asked for), 1 waiting for bytes of a blocking read with nothing
 * pending (it loses the read it waits on, which an empty buffer may never fill: such clients
 * held every slot once, and one local user locked all others out), 0 with an answer on its way
 * (dropped by the sweep when it does not read it). */
static int client_yield(const struct client *c)
{
	if (c->out_len > 0)
		return 0;
	return c->owed == 0 ? 2 : 1;
}

/* The client of peer p (any peer when NULL) that makes way first: idle ones before those owed
 * bytes, each the longest inactive first. NULL when every one has an answer on its way. */
static struct client *oldest_idle(struct egd_server *s, const struct peer *p)
{
	struct client *c, *best = NULL;

	eb_list_foreach(c, &s->clients, node) {
		int y = client_yield(c);

		if ((p && c->peer != p) || y == 0)
			continue;
		if (!best || y > client_yield(best) ||
		    (y == client_yield(best) && c->active < best->active))
			best = c;
	}
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
 * most clients, or of anyone (at --max-clients); a client waiting for bytes goes when no idle
 * one is left there. Returns false, having logged, when there is no room. */
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
				    "Refusing clients of %s: all its %u clients have answers on their way (--max-clients-per-peer)",
				    peer_name(key, name, sizeof(name)), p->n_clients);
			else
				log_warning(
				    "Refusing clients: all %u have answers on their way (--max-clients)",
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
