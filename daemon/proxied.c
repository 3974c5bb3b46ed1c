/* SPDX-License-Identifier: MIT */
/* A load balancer's connection, from accept to the PROXY header that names its client. */
#include "proxied.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "conf.h"
#include "log.h"
#include "macro.h"
#include "proxy.h"
#include "session.h"

struct proxied {
	struct broker *broker;
	struct eb_list_node node; /* in broker->proxied */
	int fd;
	sd_event_source *io, *timer;
	struct eb_proxy_reader reader;
	/* A LOCAL header came: the balancer speaks for itself. A health check closes now; a
	 * connection that sends a byte becomes a session as the balancer. */
	bool local;
	struct sockaddr_storage balancer;
	const char *listener;
	char peer[INET6_ADDRSTRLEN + 64]; /* "tcp 127.0.0.1:40000", for the log */
};

_Static_assert(EB_PROXY_HEADER_MAX == 536, "refuse() names the limit");

/* What to tell an administrator: the balancer is listed, so it must send a header. */
#define PROXY_HINT                                                                                 \
	"peers in proxy-protocol-from= must send a PROXY protocol header (HAProxy: send-proxy-v2)"

static void proxied_free(struct proxied *p)
{
	struct broker *b = p->broker;

	eb_list_remove(&b->proxied, &p->node);
	b->n_proxied--;
	sd_event_source_disable_unref(p->io);
	sd_event_source_disable_unref(p->timer);
	safe_close(p->fd);
	free(p);
}

void proxied_free_all(struct broker *b)
{
	while (!eb_list_is_empty(&b->proxied))
		proxied_free(eb_list_first(&b->proxied, struct proxied, node));
}

bool proxied_expected(struct broker *b, const struct sockaddr *peer, socklen_t peer_len,
                      struct sockaddr_storage *ret_balancer)
{
	struct sockaddr_storage ss = {};

	if (b->conf->n_proxy_from == 0 || peer_len < sizeof(sa_family_t) || peer_len > sizeof(ss))
		return false;
	memcpy(&ss, peer, peer_len);
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return false;
	if (!eb_conf_proxy_trusted(b->conf, (struct sockaddr *)&ss))
		return false;
	*ret_balancer = ss;
	return true;
}

/* The connection leaves for a session, as client (NULL: the balancer itself). */
static void hand_over(struct proxied *p, const struct sockaddr_storage *client)
{
	struct broker *b = p->broker;
	struct sockaddr_storage balancer = p->balancer;
	const char *listener = p->listener;
	struct session *s;
	int fd = TAKE_FD(p->fd), r;

	/* The session watches the fd itself: ours must be gone first (epoll takes an fd once). */
	proxied_free(p);
	r = session_new_proxied(b, fd, listener, client, &balancer, &s);
	if (r < 0)
		log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
		         "Failed to set up a session on %s, ignoring: %s", listener, strerror(-r));
}

static void refuse(struct proxied *p, int r)
{
	struct broker *b = p->broker;
	const char *why;

	switch (r) {
	case -EBADMSG:
		why = "no PROXY protocol header, or a malformed one";
		break;
	case -EMSGSIZE:
		why = "a PROXY protocol header longer than 536 bytes";
		break;
	case -EPROTONOSUPPORT:
		why = "a PROXY protocol header for a datagram connection";
		break;
	case -ECONNRESET:
		why = "closed in the middle of its PROXY protocol header";
		break;
	case -ETIMEDOUT:
		why = p->reader.n == 0 ? "no PROXY protocol header in time (hello-timeout-sec)"
		                       : "its PROXY protocol header incomplete in time "
		                         "(hello-timeout-sec)";
		break;
	default:
		why = strerror(-r);
	}
	broker_count(b, EB_COUNTER_PROXY_BAD_HEADER);
	log_peer_refused(b, PEER_LOG_HANDSHAKE, LOG_WARNING, "Refusing %s: %s; " PROXY_HINT,
	                 p->peer, why);
	proxied_free(p);
}

static void step(struct proxied *p)
{
	struct eb_proxy_header h;
	uint8_t byte;
	ssize_t k;
	int r;

	if (!p->local) {
		r = eb_proxy_read(&p->reader, p->fd, &h);
		if (r == -EAGAIN)
			return;
		if (r == -EPIPE) {
			/* Connected and closed without a byte: a plain TCP health check. */
			log_debug("%s closed before its PROXY header", p->peer);
			proxied_free(p);
			return;
		}
		if (r < 0) {
			refuse(p, r);
			return;
		}
		if (!h.local) {
			hand_over(p, &h.src);
			return;
		}
		p->local = true;
	}
	/* After a LOCAL header: HAProxy's health check ends here, and must not fill the journal
	 * with failed handshakes every few seconds; anything else goes on as the balancer. */
	k = recv(p->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k <= 0) {
		log_debug("%s: a PROXY LOCAL health check", p->peer);
		proxied_free(p);
		return;
	}
	hand_over(p, NULL);
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata)
{
	(void)source, (void)fd, (void)revents;
	step(userdata);
	return 0;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata)
{
	struct proxied *p = userdata;

	(void)source, (void)usec;
	if (p->local) {
		log_debug("%s: closing, silent after a PROXY LOCAL header", p->peer);
		proxied_free(p);
		return 0;
	}
	refuse(p, -ETIMEDOUT);
	return 0;
}

static void describe(struct proxied *p)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&p->balancer;
	const struct sockaddr_in *in = (const struct sockaddr_in *)&p->balancer;
	char addr[INET6_ADDRSTRLEN] = "?";

	if (p->balancer.ss_family == AF_INET) {
		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		snprintf(p->peer, sizeof(p->peer), "%s %s:%u", p->listener, addr,
		         ntohs(in->sin_port));
	} else {
		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		snprintf(p->peer, sizeof(p->peer), "%s [%s]:%u", p->listener, addr,
		         ntohs(in6->sin6_port));
	}
}

void proxied_new(struct broker *b, int fd, const struct sockaddr_storage *balancer,
                 const char *listener)
{
	struct proxied *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p) {
		safe_close(fd);
		log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
		         "Failed to set up a connection on %s, ignoring: %s", listener,
		         strerror(ENOMEM));
		return;
	}
	p->broker = b;
	p->fd = fd;
	p->balancer = *balancer;
	p->listener = listener;
	describe(p);
	eb_list_append(&b->proxied, &p->node);
	b->n_proxied++;

	/* Headers come at once from a balancer; those waiting are bounded as handshakes are. */
	if (b->n_proxied > b->conf->max_handshakes) {
		broker_count(b, EB_COUNTER_LIMIT_MAX_HANDSHAKES);
		log_peer_refused(b, PEER_LOG_LIMIT, LOG_WARNING,
		                 "Refusing %s: max-handshakes reached by connections waiting for "
		                 "their PROXY header",
		                 p->peer);
		proxied_free(p);
		return;
	}
	r = sd_event_add_io(b->event, &p->io, fd, EPOLLIN | EPOLLRDHUP | EPOLLET, on_io, p);
	if (r >= 0)
		r = sd_event_add_time_relative(b->event, &p->timer, CLOCK_MONOTONIC,
		                               (uint64_t)b->conf->hello_timeout_s * 1000000ULL,
		                               10 * 1000ULL, on_timer, p);
	if (r < 0) {
		log_peer(b, PEER_LOG_ACCEPT, LOG_WARNING,
		         "Failed to set up a connection on %s, ignoring: %s", listener,
		         strerror(-r));
		proxied_free(p);
		return;
	}
	/* The header may be in already: edge-triggered, the loop would not say so again. */
	step(p);
}
