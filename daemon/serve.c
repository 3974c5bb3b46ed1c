/* SPDX-License-Identifier: MIT */
/* The broker's GET path: PUTs into the pool, GETs into the queue, and the run source that answers
 * the queue (through scheduler_decide()) and tells sources to SLEEP or WAKE. docs/design.md
 * draws it. Sessions are known here only by their struct serve_request and, for flow control,
 * by the registry's ready entries and the broker's set_asleep hook. */
#include "serve.h"

#include <errno.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "broker.h"
#include "list.h"
#include "log.h"
#include "pool.h"
#include "registry.h"

/* Flow control, as Entropy Broker did it: sources rest from high water until the level falls
 * below low water, so they do not burn CPU on bits nobody can take. */
static void flow_control(struct broker *b)
{
	uint64_t level = eb_pool_level(b->pool);
	struct registry_entry *e;

	if (!b->sources_asleep && level >= broker_high_water(b))
		b->sources_asleep = true;
	else if (b->sources_asleep && level < broker_low_water(b))
		b->sources_asleep = false;
	else
		return;
	/* Up to session_tell_asleep() (session-dispatch.c, wired in brokerd.c): SLEEP or WAKE. */
	registry_foreach_ready(e, &b->registry)
		b->hooks.set_asleep(e, b->sources_asleep);
}

/* The level moved (or its thresholds did): the journal hears of it now, sources and waiting
 * sinks from the run source. */
void serve_pool_changed(struct broker *b)
{
	broker_update_zone(b);
	b->pool_changed = true;
	(void)sd_event_source_set_enabled(b->run_source, SD_EVENT_ONESHOT);
}

int serve_put(struct broker *b, const uint8_t *data, size_t len, uint64_t claim_bits,
              uint64_t *ret_credited)
{
	uint64_t credited = 0;
	int r;

	r = eb_pool_add(b->pool, data, len, claim_bits, &credited);
	if (r < 0)
		return r;
	b->bits_in += credited;
	serve_pool_changed(b);
	*ret_credited = credited;
	return 0;
}

static void arm_queue_timer(struct broker *b)
{
	uint64_t t = sched_queue_deadline(&b->queue);

	if (t == UINT64_MAX) {
		(void)sd_event_source_set_enabled(b->queue_timer, SD_EVENT_OFF);
		return;
	}
	(void)sd_event_source_set_time(b->queue_timer, t);
	(void)sd_event_source_set_enabled(b->queue_timer, SD_EVENT_ONESHOT);
}

void serve_get(struct broker *b, struct serve_request *q)
{
	bool alone = !sched_queue_first(&b->queue);

	sched_queue_push(&b->queue, &q->request);
	/* A GET that finds others waiting is tried with them, when the pool next changes, or on
	 * its own when its wait ends: the queue is served in order, not by who asked last. */
	if (alone) {
		b->queue_changed = true;
		(void)sd_event_source_set_enabled(b->run_source, SD_EVENT_ONESHOT);
	}
	arm_queue_timer(b);
}

void serve_cancel(struct broker *b, struct serve_request *q)
{
	/* The timer may now fire for nobody; the run source then finds nothing due. */
	sched_queue_remove(&b->queue, &q->request);
}

bool serve_waiting(const struct broker *b, const struct serve_request *q)
{
	/* A request is in this queue or in no list: constant time, where sched_queue_has()
	 * would walk (list.h). */
	return eb_list_links_(&b->queue.list, &q->request.node);
}

static struct serve_request *request_of(struct sched_request *r)
{
	return (struct serve_request *)((char *)r - offsetof(struct serve_request, request));
}

/* Takes what decision d grants request r from the pool into b->scratch, and books it. */
static int take(struct broker *b, const struct sched_request *r, const struct sched_view *v,
                const struct sched_decision *d)
{
	const struct eb_user *u = &b->conf->users[r->user];
	struct sched_quota *q = &b->quotas[r->user];
	uint64_t after;
	int k;

	if (!r->drbg) {
		k = eb_pool_take_full(b->pool, b->scratch, d->bytes);
		if (k < 0)
			return k;
		/* The quota pays what the pool spent, whole blocks, not the bits handed out. */
		sched_quota_charge(q, u->quota_bits_per_hour, v->now_usec,
		                   eb_pool_cost_bits(b->pool, d->bytes));
		b->bits_out += d->bytes * 8;
		return 0;
	}
	k = eb_pool_take_drbg(b->pool, b->scratch, d->bytes, d->may_reseed);
	after = eb_pool_level(b->pool);
	if (after < v->level_bits) {
		/* A reseed spent a block of credited entropy: the drawing user pays for it, and
		 * the next one waits its interval. */
		b->drbg_reseeded = true;
		b->drbg_reseed_usec = v->now_usec;
		sched_quota_charge(q, u->quota_bits_per_hour, v->now_usec, v->level_bits - after);
	}
	if (k < 0)
		return k;
	b->bytes_drbg += d->bytes;
	return 0;
}

/* Decides request r and, unless it is to wait, answers it; returns whether it was answered.
 * final: its wait is over. */
static bool serve(struct broker *b, struct sched_request *r, bool final, bool *served)
{
	struct serve_request *q = request_of(r);
	const struct eb_user *u = &b->conf->users[r->user];
	const struct sched_view v = {
	    .now_usec = broker_now(b),
	    .level_bits = eb_pool_level(b->pool),
	    .n_sources = b->registry.n_sources,
	    .drbg_seeded = b->drbg_reseeded,
	    .drbg_reseed_usec = b->drbg_reseed_usec,
	    .quota_bits_per_hour = u->quota_bits_per_hour,
	    .quota = &b->quotas[r->user],
	};
	struct sched_decision d = scheduler_decide(&v, r, final);
	int k;

	if (d.verdict == SCHED_DATA) {
		k = take(b, r, &v, &d);
		if (k == -EAGAIN)
			/* The pool saw less than the decision did: the same as a short pool. */
			d = d.reseed_quota_retry_ms > 0
			        ? (struct sched_decision){.verdict = SCHED_QUOTA,
			                                  .retry_ms = d.reseed_quota_retry_ms}
			        : scheduler_pool_short(&v, final);
		else if (k < 0) {
			log_error_errno(k, "Failed to draw from the pool: %m");
			sched_queue_remove(&b->queue, r);
			/* Up to the GET's owner (answer_get(), session-dispatch.c). */
			q->answer(q, NULL, NULL);
			return true;
		}
	}
	if (d.verdict == SCHED_WAIT)
		return false;
	sched_queue_remove(&b->queue, r);
	/* Up to the GET's owner: answer_get() (session-dispatch.c) for a session. */
	q->answer(q, &d, b->scratch);
	if (d.verdict == SCHED_DATA) {
		explicit_bzero(b->scratch, d.bytes);
		*served = true;
	}
	return true;
}

/* The run source: the one place waiting GETs are answered and sources told to SLEEP or WAKE,
 * one loop iteration after whatever changed the pool or the queue, never inside a session's own
 * handler. */
int serve_on_run(sd_event_source *src, void *userdata)
{
	struct broker *b = userdata;
	bool head = b->pool_changed || b->queue_changed, served = false;
	struct sched_request *r, *next;
	uint64_t now = broker_now(b);

	(void)src;
	if (b->pool_changed)
		flow_control(b);
	b->pool_changed = b->queue_changed = false;
	/* In order while the pool can; the first it cannot back keeps its turn at the head. */
	while (head && (r = sched_queue_first(&b->queue)) && serve(b, r, false, &served))
		;
	/* Waits that are over, wherever they are in the queue: DATA if the pool can, else EMPTY. */
	eb_list_foreach_safe(r, next, &b->queue.list, node) {
		if (now >= r->since_usec + SCHEDULER_WAIT_USEC)
			(void)serve(b, r, true, &served);
	}
	if (served) {
		flow_control(b);
		broker_update_zone(b);
	}
	arm_queue_timer(b);
	return 0;
}

int serve_on_queue_timer(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct broker *b = userdata;

	(void)src, (void)usec;
	return sd_event_source_set_enabled(b->run_source, SD_EVENT_ONESHOT);
}
