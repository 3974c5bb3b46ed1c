/* SPDX-License-Identifier: MIT */
/* The agent's listener: one line for a load balancer, then the connection closes. It tells the
 * pool level to whoever reaches it, so it listens on the balancer's side only
 * (eb-brokerd-agent.socket(8)). */
#include "agent.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent-word.h"
#include "broker.h"
#include "listeners.h"
#include "log.h"
#include "macro.h"
#include "pool.h"

static const char *why(const struct broker *b, enum agent_word w)
{
	switch (w) {
	case AGENT_READY:
		return "by the pool level";
	case AGENT_DRAIN:
		return b->drained ? "drained by an admin" : "the pool is empty";
	case AGENT_MAINT:
		return "stopping";
	case _AGENT_WORD_MAX:
	case _AGENT_WORD_INVALID:
		break;
	}
	return "";
}

void agent_answer(struct broker *b, int fd)
{
	_cleanup_close_ int c = fd;
	const struct agent_view v = {
	    .level_bits = eb_pool_level(b->pool),
	    .capacity_bits = eb_pool_capacity(b->pool),
	    .empty_bits = eb_pool_cost_bits(b->pool, 32),
	    .refilled_bits = broker_low_water(b),
	    .drained = b->drained,
	    .stopping = b->stopping,
	};
	enum agent_word w;
	unsigned weight;
	char line[32], drop[512];
	int n;

	w = agent_decide(&b->agent, &v, &weight);
	n = agent_format(w, weight, line, sizeof(line));
	if (w != b->agent_word) {
		log_info("Agent: telling load balancers \"%.*s\" (%s)", n > 0 ? n - 1 : 0, line,
		         why(b, w));
		b->agent_word = w;
	}
	/* A fresh socket's buffer takes a line this short whole, or the balancer is gone. */
	if (n > 0)
		(void)send(c, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	/* What the balancer sent (agent-send) is dropped unread, but taken out of the socket
	 * first, so that the close is a FIN rather than a reset. */
	(void)recv(c, drop, sizeof(drop), MSG_DONTWAIT);
	(void)shutdown(c, SHUT_WR);
}

void agent_answer_pending(struct broker *b)
{
	for (unsigned i = 0; i < b->listeners.n; i++) {
		const struct eb_listener *l = &b->listeners.v[i];

		if (strcmp(l->name, AGENT_LISTENER) != 0)
			continue;
		/* At most a backlog's worth: the broker is on its way out. */
		for (int k = 0; k < 64; k++) {
			int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd < 0)
				break;
			agent_answer(b, fd);
		}
	}
}
