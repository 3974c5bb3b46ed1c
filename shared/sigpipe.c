/* SPDX-License-Identifier: MIT */
#include "sigpipe.h"

#include <pthread.h>
#include <time.h>

void eb_sigpipe_block(struct eb_sigpipe_guard *g)
{
	sigset_t set, pending;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
	g->was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

void eb_sigpipe_restore(struct eb_sigpipe_guard *g)
{
	static const struct timespec zero = {0};
	sigset_t set, pending;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	/* Only a SIGPIPE our write raised is taken; one pending before stays for the program. */
	if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1)
		(void)sigtimedwait(&set, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}
