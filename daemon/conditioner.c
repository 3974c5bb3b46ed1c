/* SPDX-License-Identifier: MIT */
#include "conditioner.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "log.h"
#include "pool.h"
#include "session.h"

enum slot_state {
	SLOT_FREE,   /* the loop may fill it */
	SLOT_QUEUED, /* the worker's to condition */
	SLOT_DONE,   /* conditioned; the loop acknowledges and frees it */
	_SLOT_STATE_MAX,
	_SLOT_STATE_INVALID = -22,
};

struct slot {
	enum slot_state state;
	struct session *session; /* touched by the loop only; NULL when the session is gone */
	uint32_t len;
	uint64_t claim, credited;
	int result;
	uint8_t *data; /* EB_DATA_MAX bytes in the locked mapping */
};

/*
 * The slots form a ring used in order: the loop fills at `head`, the worker conditions from
 * `next`, the loop collects from `tail`. One worker keeps the order, so acknowledgements leave
 * in the order donations came, and only the pool's add path runs on the worker: the pool allows
 * exactly that (see pool.h).
 */
struct conditioner {
	struct broker *broker;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t work;
	bool stopping;
	unsigned head, next, tail, queued;
	struct slot slots[CONDITIONER_SLOTS];
	uint8_t *buffers;
	size_t buffers_size;
	int efd;
	sd_event_source *src;
};

static void *worker(void *userdata)
{
	struct conditioner *c = userdata;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct slot *sl;
		uint64_t one = 1;

		while (c->slots[c->next].state != SLOT_QUEUED && !c->stopping)
			pthread_cond_wait(&c->work, &c->lock);
		sl = &c->slots[c->next];
		if (sl->state != SLOT_QUEUED)
			break; /* stopping, and nothing left */
		pthread_mutex_unlock(&c->lock);

		sl->result =
		    eb_pool_add(c->broker->pool, sl->data, sl->len, sl->claim, &sl->credited);
		/* The donation is in the pool now; no copy of it stays behind. */
		explicit_bzero(sl->data, sl->len);

		pthread_mutex_lock(&c->lock);
		sl->state = SLOT_DONE;
		c->next = (c->next + 1) % CONDITIONER_SLOTS;
		if (write(c->efd, &one, sizeof(one)) < 0) {
			/* The counter cannot overflow at 16 slots; nothing else can fail here. */
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Acknowledges finished donations in order, on the event loop. */
static void collect(struct conditioner *c)
{
	struct broker *b = c->broker;
	bool changed = false;

	for (;;) {
		struct slot *sl = &c->slots[c->tail];
		struct session *s;

		pthread_mutex_lock(&c->lock);
		if (sl->state != SLOT_DONE) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		pthread_mutex_unlock(&c->lock);

		s = sl->session;
		if (sl->result < 0)
			log_error_errno(sl->result, "Failed to add to the pool: %m");
		else {
			b->bits_in += sl->credited;
			changed = true;
		}
		if (s)
			session_donation_done(s, sl->result, sl->credited, sl->len);

		pthread_mutex_lock(&c->lock);
		sl->state = SLOT_FREE;
		sl->session = NULL;
		c->queued--;
		c->tail = (c->tail + 1) % CONDITIONER_SLOTS;
		pthread_mutex_unlock(&c->lock);
	}
	if (changed)
		broker_pool_changed(b);
	/* A slot is free again: sessions that stopped parsing for want of one go on. */
	for (struct session *s = b->sessions; s; s = s->next)
		if (s->waits_conditioner)
			session_wake(s);
}

static int on_done(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	uint64_t n;

	(void)src, (void)revents;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return log_error_errno(errno, "Failed to read the conditioner's eventfd: %m");
	collect(userdata);
	return 0;
}

int conditioner_new(struct broker *b, struct conditioner **ret)
{
	struct conditioner *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->broker = b;
	c->efd = -EBADF;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->work, NULL);

	/* Donations wait here for the worker: lock them in memory like the pool itself. */
	c->buffers_size = (size_t)CONDITIONER_SLOTS * EB_DATA_MAX;
	c->buffers =
	    mmap(NULL, c->buffers_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->buffers == MAP_FAILED) {
		c->buffers = NULL;
		r = -ENOMEM;
		goto fail;
	}
	(void)madvise(c->buffers, c->buffers_size, MADV_DONTDUMP);
	(void)mlock(c->buffers, c->buffers_size);
	for (unsigned i = 0; i < CONDITIONER_SLOTS; i++)
		c->slots[i].data = c->buffers + (size_t)i * EB_DATA_MAX;

	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		r = -errno;
		goto fail;
	}
	r = sd_event_add_io(b->event, &c->src, c->efd, EPOLLIN, on_done, c);
	if (r < 0)
		goto fail;
	r = -pthread_create(&c->thread, NULL, worker, c);
	if (r < 0)
		goto fail;
	c->thread_started = true;
	*ret = c;
	return 0;
fail:
	conditioner_free(c);
	return r;
}

struct conditioner *conditioner_free(struct conditioner *c)
{
	if (!c)
		return NULL;
	if (c->thread_started) {
		pthread_mutex_lock(&c->lock);
		c->stopping = true;
		pthread_cond_signal(&c->work);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->thread, NULL);
		/* Credit what the worker finished, so the seed file saved next holds it. */
		collect(c);
	}
	sd_event_source_disable_unref(c->src);
	safe_close(c->efd);
	if (c->buffers) {
		explicit_bzero(c->buffers, c->buffers_size);
		(void)munmap(c->buffers, c->buffers_size);
	}
	pthread_cond_destroy(&c->work);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return NULL;
}

bool conditioner_has_room(const struct conditioner *c, const struct session *s)
{
	return s->donations < CONDITIONER_PER_SESSION && c->queued < CONDITIONER_SLOTS;
}

int conditioner_submit(struct conditioner *c, struct session *s, const uint8_t *data, uint32_t len,
                       uint64_t claim)
{
	struct slot *sl = &c->slots[c->head];

	if (len > EB_DATA_MAX)
		return -EMSGSIZE;
	if (!conditioner_has_room(c, s))
		return -EAGAIN;
	/* Only the loop moves a slot out of FREE, and it is the loop that calls us. */
	memcpy(sl->data, data, len);
	sl->session = s;
	sl->len = len;
	sl->claim = claim;
	sl->credited = 0;
	sl->result = 0;
	s->donations++;

	pthread_mutex_lock(&c->lock);
	sl->state = SLOT_QUEUED;
	c->queued++;
	c->head = (c->head + 1) % CONDITIONER_SLOTS;
	pthread_cond_signal(&c->work);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

void conditioner_forget(struct conditioner *c, struct session *s)
{
	for (unsigned i = 0; i < CONDITIONER_SLOTS; i++)
		if (c->slots[i].session == s)
			c->slots[i].session = NULL;
}
