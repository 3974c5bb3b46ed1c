/* SPDX-License-Identifier: MIT */
#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "macro.h"

struct workers {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct eb_list todo; /* submitted, not yet taken by a thread */
	struct eb_list done; /* run, waiting for the loop */
	bool stop;

	int efd; /* a thread's word to the loop that done is no longer empty */
	sd_event_source *io;
	pthread_t *threads;
	unsigned n_threads; /* started, to be joined */
};

static void *worker_main(void *arg)
{
	struct workers *ws = arg;

	pthread_mutex_lock(&ws->lock);
	for (;;) {
		struct work *w;
		bool was_empty;

		while (!ws->stop && eb_list_is_empty(&ws->todo))
			pthread_cond_wait(&ws->wake, &ws->lock);
		if (ws->stop)
			break;
		w = eb_list_first(&ws->todo, struct work, node);
		eb_list_remove(&ws->todo, &w->node);
		w->queued = false;
		pthread_mutex_unlock(&ws->lock);

		w->run(w);

		pthread_mutex_lock(&ws->lock);
		was_empty = eb_list_is_empty(&ws->done);
		eb_list_append(&ws->done, &w->node);
		/* One word for a batch: the loop takes the whole list when it wakes. */
		if (was_empty) {
			uint64_t one = 1;

			if (write(ws->efd, &one, sizeof(one)) < 0) {
				/* Only a counter at its maximum refuses, and then the loop is
				 * woken already. */
			}
		}
	}
	pthread_mutex_unlock(&ws->lock);
	return NULL;
}

/* Hands each job of a list taken from the workers back to its owner. done() may submit the job
 * again: it leaves the batch first. */
static void finish(struct eb_list batch, bool cancelled)
{
	struct work *w, *next;

	eb_list_foreach_safe(w, next, &batch, node) {
		eb_list_remove(&batch, &w->node);
		w->queued = false;
		w->done(w, cancelled);
	}
}

static void take_done(struct workers *ws)
{
	struct eb_list batch;

	pthread_mutex_lock(&ws->lock);
	batch = ws->done;
	ws->done = (struct eb_list){0};
	pthread_mutex_unlock(&ws->lock);
	finish(batch, false);
}

static int on_done(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	uint64_t n;

	(void)src, (void)revents;
	/* Read before taking the list: a word written after this read wakes the loop again. */
	(void)!read(fd, &n, sizeof(n));
	take_done(userdata);
	return 0;
}

int workers_new(sd_event *e, unsigned n, struct workers **ret)
{
	struct workers *ws;
	int r;

	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	pthread_mutex_init(&ws->lock, NULL);
	pthread_cond_init(&ws->wake, NULL);
	ws->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ws->threads = calloc(MAX(n, 1u), sizeof(*ws->threads));
	if (ws->efd < 0 || !ws->threads) {
		r = ws->efd < 0 ? -errno : -ENOMEM;
		goto fail;
	}
	r = sd_event_add_io(e, &ws->io, ws->efd, EPOLLIN, on_done, ws);
	if (r < 0)
		goto fail;
	for (unsigned i = 0; i < MAX(n, 1u); i++) {
		char name[16];

		r = -pthread_create(&ws->threads[i], NULL, worker_main, ws);
		if (r < 0)
			goto fail;
		ws->n_threads++;
		snprintf(name, sizeof(name), "eb-worker-%u", i % 100000u);
		(void)pthread_setname_np(ws->threads[i], name);
	}
	*ret = ws;
	return 0;
fail:
	workers_free(ws);
	return r;
}

void workers_submit(struct workers *ws, struct work *w)
{
	pthread_mutex_lock(&ws->lock);
	eb_list_append(&ws->todo, &w->node);
	w->queued = true;
	pthread_cond_signal(&ws->wake);
	pthread_mutex_unlock(&ws->lock);
}

bool workers_cancel(struct workers *ws, struct work *w)
{
	bool queued;

	pthread_mutex_lock(&ws->lock);
	/* Only the queue is searched: a node in the done list would look like one in any list. */
	queued = w->queued;
	if (queued) {
		eb_list_remove(&ws->todo, &w->node);
		w->queued = false;
	}
	pthread_mutex_unlock(&ws->lock);
	return queued;
}

struct workers *workers_free(struct workers *ws)
{
	if (!ws)
		return NULL;
	pthread_mutex_lock(&ws->lock);
	ws->stop = true;
	pthread_cond_broadcast(&ws->wake);
	pthread_mutex_unlock(&ws->lock);
	for (unsigned i = 0; i < ws->n_threads; i++)
		pthread_join(ws->threads[i], NULL);
	/* No thread is left: the lists are the loop's now. What ran is done; the rest never ran.
	 * The queue leaves the workers before its jobs hear back, since a done() may hand its job
	 * back: it then joins an empty queue, and is cancelled again in the next pass. */
	take_done(ws);
	while (!eb_list_is_empty(&ws->todo)) {
		struct eb_list batch = ws->todo;

		ws->todo = (struct eb_list){0};
		finish(batch, true);
	}
	sd_event_source_disable_unref(ws->io);
	safe_close(ws->efd);
	free(ws->threads);
	pthread_cond_destroy(&ws->wake);
	pthread_mutex_destroy(&ws->lock);
	free(ws);
	return NULL;
}

unsigned workers_count(const struct workers *ws)
{
	return ws ? ws->n_threads : 0;
}
