/* SPDX-License-Identifier: MIT */
/* Name look-ups on a thread of their own, waited for up to a deadline or a stop (lookup.h). */
#include "lookup.h"

#include <arpa/nameser.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <resolv.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* <arpa/nameser.h> brings <sys/param.h>'s MIN and MAX; macro.h's are the project's. */
#undef MIN
#undef MAX
#include "macro.h"
#include "time-util.h"

/* Look-ups given up on whose threads still run. */
static atomic_int abandoned;

enum job_kind {
	JOB_ADDRINFO,
	JOB_QUERY,
};

/* One look-up, shared by the caller and the thread that runs it: each holds a reference, and
 * whichever lets go last frees it, so the caller can leave without waiting. */
struct job {
	atomic_int refs;
	atomic_bool over; /* set by the first of: the thread done, the caller gone */
	int efd;          /* an eventfd the thread writes once the look-up is done */
	enum job_kind kind;
	/* What to look up. */
	char name[NS_MAXDNAME];
	char port[8];
	struct addrinfo hints;
	int class, type, retrans_s, retry;
	size_t size;
	/* What the thread found. */
	struct addrinfo *ai;
	int gai;
	uint8_t *answer;
	int len, herr;
	bool init_failed;
};

static void job_unref(struct job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->ai)
		freeaddrinfo(j->ai);
	free(j->answer);
	safe_close(j->efd);
	free(j);
}

static void run_query(struct job *j)
{
	struct __res_state st;

	memset(&st, 0, sizeof(st));
	if (res_ninit(&st) < 0) {
		j->init_failed = true;
		return;
	}
	/* The thread outlives a caller that gave up only as long as these allow. */
	st.retrans = MIN(st.retrans, j->retrans_s);
	st.retry = MIN(st.retry, j->retry);
	j->len = res_nquery(&st, j->name, j->class, j->type, j->answer, (int)j->size);
	j->herr = st.res_h_errno;
	res_nclose(&st);
}

static void *job_thread(void *arg)
{
	struct job *j = arg;
	uint64_t one = 1;
	ssize_t k;

	switch (j->kind) {
	case JOB_ADDRINFO:
		j->gai = getaddrinfo(j->name, j->port, &j->hints, &j->ai);
		break;
	case JOB_QUERY:
		run_query(j);
		break;
	}
	/* A caller that left counted this thread among the abandoned ones: it is over now. */
	if (atomic_exchange(&j->over, true))
		atomic_fetch_sub(&abandoned, 1);
	/* It cannot fail: one write cannot overflow an eventfd's counter, and no signal reaches
	 * this thread. */
	k = write(j->efd, &one, sizeof(one));
	(void)k;
	job_unref(j);
	return NULL;
}

static int job_new(enum job_kind kind, const char *name, struct job **ret)
{
	struct job *j;

	if (strlen(name) >= sizeof(j->name))
		return -EINVAL;
	if (atomic_load(&abandoned) >= EB_LOOKUP_ABANDONED_MAX)
		return -EAGAIN;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->efd < 0) {
		int r = negative_errno();

		free(j);
		return r;
	}
	atomic_init(&j->refs, 1);
	j->kind = kind;
	snprintf(j->name, sizeof(j->name), "%s", name);
	*ret = j;
	return 0;
}

/* Starts j's thread, detached, with every signal blocked: a signal meant for the program goes
 * to one of its own threads, where its handler or signalfd expects it. */
static int job_start(struct job *j)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t id;
	int r;

	r = -pthread_attr_init(&attr);
	if (r < 0)
		return r;
	(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	atomic_fetch_add(&j->refs, 1);
	r = -pthread_create(&id, &attr, job_thread, j);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (r < 0)
		atomic_fetch_sub(&j->refs, 1);
	return r;
}

/* Waits for j's thread within b: 0 once it is done, -ETIMEDOUT or -ECANCELED first. */
static int job_wait(struct job *j, const struct eb_lookup_bound *b)
{
	int cancel_fd = b ? b->cancel_fd : -EBADF;

	for (;;) {
		struct pollfd p[2] = {
		    {.fd = j->efd, .events = POLLIN},
		    {.fd = cancel_fd, .events = b ? b->cancel_events : 0},
		};
		int timeout = -1, k;

		if (b && b->deadline_ms) {
			uint64_t left = eb_ms_until(b->deadline_ms);

			if (left == 0)
				return -ETIMEDOUT;
			timeout = (int)MIN(left, (uint64_t)INT_MAX);
		}
		k = poll(p, cancel_fd >= 0 ? 2 : 1, timeout);
		if (k < 0 && errno != EINTR)
			return negative_errno();
		if (k <= 0)
			continue;
		/* The thread set over before its write: this load pairs with that store, so that
		 * what it found is seen whole here. */
		if ((p[0].revents & POLLIN) && atomic_load(&j->over))
			return 0;
		if (cancel_fd >= 0 && (p[1].revents & (p[1].events | POLLHUP | POLLERR | POLLNVAL)))
			return -ECANCELED;
	}
}

/* Runs j and waits for it within b. 0: its results are the caller's to read; else the caller has
 * let go of j, which its thread frees when it ends. */
static int job_run(struct job *j, const struct eb_lookup_bound *b)
{
	int r;

	r = job_start(j);
	if (r < 0) {
		job_unref(j);
		return r;
	}
	r = job_wait(j, b);
	if (r < 0) {
		/* Counted before it is known whether the thread is still running, so that the
		 * thread, if it ends meanwhile, never takes back a count not yet made. */
		atomic_fetch_add(&abandoned, 1);
		if (atomic_exchange(&j->over, true))
			atomic_fetch_sub(&abandoned, 1);
		job_unref(j);
	}
	return r;
}

int eb_lookup_addrinfo(const char *host, const char *port, const struct addrinfo *hints,
                       const struct eb_lookup_bound *b, struct addrinfo **ret, int *ret_gai)
{
	struct job *j;
	int r;

	*ret_gai = 0;
	r = job_new(JOB_ADDRINFO, host, &j);
	if (r < 0)
		return r;
	snprintf(j->port, sizeof(j->port), "%s", port);
	j->hints = *hints;
	r = job_run(j, b);
	if (r < 0)
		return r;
	*ret_gai = j->gai;
	if (j->gai == 0) {
		*ret = TAKE_PTR(j->ai);
		r = 0;
	} else
		r = j->gai == EAI_MEMORY ? -ENOMEM : -EADDRNOTAVAIL;
	job_unref(j);
	return r;
}

int eb_lookup_query(const char *name, int class, int type, int retrans_s, int retry,
                    uint8_t *answer, size_t size, const struct eb_lookup_bound *b, int *ret_herrno)
{
	struct job *j;
	int r;

	*ret_herrno = 0;
	if (size > INT_MAX)
		return -EINVAL;
	r = job_new(JOB_QUERY, name, &j);
	if (r < 0)
		return r;
	j->answer = malloc(size);
	if (!j->answer) {
		job_unref(j);
		return -ENOMEM;
	}
	j->class = class;
	j->type = type;
	j->retrans_s = retrans_s;
	j->retry = retry;
	j->size = size;
	r = job_run(j, b);
	if (r < 0)
		return r;
	if (j->init_failed)
		r = -EIO;
	else if (j->len < 0) {
		*ret_herrno = j->herr;
		r = -ENXIO;
	} else {
		r = MIN(j->len, (int)size);
		memcpy(answer, j->answer, (size_t)r);
	}
	job_unref(j);
	return r;
}
