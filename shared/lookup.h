/* SPDX-License-Identifier: MIT */
/* Name look-ups a caller can give up on. glibc's getaddrinfo() and res_nquery() take no deadline
 * and no stop, and wait as long as /etc/resolv.conf says (5 s and 2 tries per server by
 * default): each look-up here runs on a thread of its own while the caller waits for it, its
 * deadline or a stop, and leaves it behind when the deadline or the stop comes first; that
 * thread frees what it holds when the look-up ends. docs/decisions.md says why. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct addrinfo;

/* Look-ups given up on whose threads are still running, at most: past it a new look-up fails
 * with -EAGAIN at once. Each such thread ends when the resolver gives up (seconds), so only a
 * caller retrying faster than that against a silent server reaches it. */
#define EB_LOOKUP_ABANDONED_MAX 16

/* What ends a wait for a look-up. */
struct eb_lookup_bound {
	uint64_t deadline_ms; /* on eb_now_ms()'s clock; 0: none */
	int cancel_fd; /* a stop shows on it as one of cancel_events or POLLHUP; -EBADF: none */
	short cancel_events;
};

/* getaddrinfo(host, port, hints), within b. 0 and *ret (the caller's, freeaddrinfo()) when it
 * answered with addresses; -ETIMEDOUT when the deadline came first, -ECANCELED on a stop, -EAGAIN
 * when EB_LOOKUP_ABANDONED_MAX look-ups are still running; otherwise getaddrinfo()'s code in
 * *ret_gai (0 when it never answered) and -EADDRNOTAVAIL, or -ENOMEM. */
int eb_lookup_addrinfo(const char *host, const char *port, const struct addrinfo *hints,
                       const struct eb_lookup_bound *b, struct addrinfo **ret, int *ret_gai);

/* res_nquery(name, class, type) with a resolver state of its own whose wait per try (retrans_s)
 * and tries per server (retry) are at most those given, whatever resolv.conf says, within b.
 * The answer's length (at most size, in answer); -ETIMEDOUT, -ECANCELED, -EAGAIN as above;
 * -ENXIO when the resolver failed, its h_errno in *ret_herrno; -EIO when /etc/resolv.conf is
 * unusable; -ENOMEM. */
int eb_lookup_query(const char *name, int class, int type, int retrans_s, int retry,
                    uint8_t *answer, size_t size, const struct eb_lookup_bound *b, int *ret_herrno);
