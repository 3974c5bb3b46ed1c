/* SPDX-License-Identifier: MIT */
/* Writes to a peer that may have died, without dying of SIGPIPE. */
#pragma once

#include <signal.h>
#include <stdbool.h>

/* OpenSSL writes to its socket with write(), not send(MSG_NOSIGNAL): a TLS record (or the
 * close_notify) written to a peer that has just died raises SIGPIPE, which would kill the program
 * instead of letting it fail over. A write between eb_sigpipe_block() and eb_sigpipe_restore()
 * gets EPIPE instead; the SIGPIPE it raised is swallowed, while the program's disposition and any
 * SIGPIPE already pending are left alone. */
struct eb_sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

void eb_sigpipe_block(struct eb_sigpipe_guard *g);
void eb_sigpipe_restore(struct eb_sigpipe_guard *g);
