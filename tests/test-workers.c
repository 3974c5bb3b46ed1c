/* SPDX-License-Identifier: MIT */
/* Tests for daemon/workers.c: jobs run on a thread that is not the loop's, and come back to the
 * loop, each exactly once; done() may hand a job back; a job no thread took can be taken back;
 * stopping cancels what no thread took, runs done() for every job before it returns, and never
 * both runs and cancels one. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-event.h>

#include "../daemon/workers.h"
#include "time-util.h"

/* Generous: CI runs on a loaded two-core machine. */
#define DEADLINE_MS 60000

struct job {
	struct work w;
	pthread_t loop;
	atomic_int runs;
	int dones, cancels;
	int steps_left; /* done() submits again until none is left */
	unsigned sleep_us;
	atomic_bool ran_off_loop;
	struct workers *ws;
	int *finished;
};

static void job_run(struct work *w)
{
	struct job *j = (struct job *)w;

	atomic_fetch_add(&j->runs, 1);
	if (!pthread_equal(pthread_self(), j->loop))
		atomic_store(&j->ran_off_loop, true);
	if (j->sleep_us)
		usleep(j->sleep_us);
}

static void job_done(struct work *w, bool cancelled)
{
	struct job *j = (struct job *)w;

	/* Always on the loop's thread. */
	assert_true(pthread_equal(pthread_self(), j->loop));
	if (cancelled) {
		j->cancels++;
		(*j->finished)++;
		return;
	}
	j->dones++;
	if (j->steps_left > 0) {
		j->steps_left--;
		workers_submit(j->ws, &j->w);
		return;
	}
	(*j->finished)++;
}

static struct job *jobs_new(unsigned n, struct workers *ws, int *finished, int steps,
                            unsigned sleep_us)
{
	struct job *jobs = calloc(n, sizeof(*jobs));

	assert_non_null(jobs);
	for (unsigned i = 0; i < n; i++) {
		jobs[i].w.run = job_run;
		jobs[i].w.done = job_done;
		jobs[i].loop = pthread_self();
		jobs[i].ws = ws;
		jobs[i].finished = finished;
		jobs[i].steps_left = steps;
		jobs[i].sleep_us = sleep_us;
	}
	return jobs;
}

/* Runs the loop until want jobs have finished. */
static void run_until(sd_event *e, const int *finished, int want)
{
	uint64_t deadline = eb_now_ms() + DEADLINE_MS;

	while (*finished < want) {
		assert_true(eb_now_ms() < deadline);
		assert_true(sd_event_run(e, 100 * 1000) >= 0);
	}
}

static void test_jobs_go_and_come_back(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;
	struct job *jobs;
	int finished = 0;
	const unsigned n = 2000;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(workers_new(e, 3, &ws), 0);
	assert_int_equal(workers_count(ws), 3);
	jobs = jobs_new(n, ws, &finished, 0, 0);
	for (unsigned i = 0; i < n; i++)
		workers_submit(ws, &jobs[i].w);
	run_until(e, &finished, (int)n);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(atomic_load(&jobs[i].runs), 1);
		assert_int_equal(jobs[i].dones, 1);
		assert_int_equal(jobs[i].cancels, 0);
		assert_true(atomic_load(&jobs[i].ran_off_loop));
	}
	ws = workers_free(ws);
	assert_null(ws);
	free(jobs);
	sd_event_unref(e);
}

/* A handshake takes several steps, each handed back to a worker from done(). */
static void test_done_submits_again(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;
	struct job *jobs;
	int finished = 0;
	const unsigned n = 300;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(workers_new(e, 2, &ws), 0);
	jobs = jobs_new(n, ws, &finished, 4, 0);
	for (unsigned i = 0; i < n; i++)
		workers_submit(ws, &jobs[i].w);
	run_until(e, &finished, (int)n);
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(atomic_load(&jobs[i].runs), 5);
		assert_int_equal(jobs[i].dones, 5);
	}
	workers_free(ws);
	free(jobs);
	sd_event_unref(e);
}

/* Stopping with a long queue: what a thread took is done, the rest is cancelled without running,
 * every job hears back once, and all of it before workers_free() returns. */
static void test_free_cancels_the_queue(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;
	struct job *jobs;
	int finished = 0, cancelled = 0, ran = 0;
	const unsigned n = 2000;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(workers_new(e, 1, &ws), 0);
	/* 1 ms each: one thread cannot get through 2 s of them before the stop. */
	jobs = jobs_new(n, ws, &finished, 0, 1000);
	for (unsigned i = 0; i < n; i++)
		workers_submit(ws, &jobs[i].w);
	workers_free(ws);
	assert_int_equal(finished, (int)n);
	for (unsigned i = 0; i < n; i++) {
		int runs = atomic_load(&jobs[i].runs);

		assert_int_equal(jobs[i].dones + jobs[i].cancels, 1);
		assert_int_equal(runs, jobs[i].dones);
		cancelled += jobs[i].cancels;
		ran += runs;
	}
	assert_true(cancelled > 0);
	assert_int_equal(cancelled + ran, (int)n);
	free(jobs);
	sd_event_unref(e);
}

static atomic_bool started, release;

static void blocking_run(struct work *w)
{
	job_run(w);
	atomic_store(&started, true);
	while (!atomic_load(&release))
		usleep(1000);
}

/* A job no thread has taken is taken back, and never runs or comes back; one that runs, or has
 * run and waits for the loop, cannot be, and comes back as usual. */
static void test_cancel(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;
	struct job *jobs;
	int finished = 0;
	uint64_t deadline = eb_now_ms() + DEADLINE_MS;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(workers_new(e, 1, &ws), 0);
	jobs = jobs_new(3, ws, &finished, 0, 0);
	jobs[0].w.run = blocking_run;
	atomic_store(&started, false);
	atomic_store(&release, false);
	for (unsigned i = 0; i < 3; i++)
		workers_submit(ws, &jobs[i].w);
	while (!atomic_load(&started)) {
		assert_true(eb_now_ms() < deadline);
		usleep(1000);
	}
	assert_false(workers_cancel(ws, &jobs[0].w)); /* running */
	assert_true(workers_cancel(ws, &jobs[1].w));  /* queued */
	assert_false(workers_cancel(ws, &jobs[1].w)); /* already taken back */
	atomic_store(&release, true);
	run_until(e, &finished, 2);
	assert_int_equal(atomic_load(&jobs[0].runs), 1);
	assert_int_equal(jobs[0].dones, 1);
	assert_int_equal(atomic_load(&jobs[1].runs), 0);
	assert_int_equal(jobs[1].dones + jobs[1].cancels, 0);
	assert_int_equal(jobs[2].dones, 1);

	/* Run, not yet taken by the loop: too late to take back. */
	finished = 0;
	jobs[2].dones = 0;
	workers_submit(ws, &jobs[2].w);
	while (atomic_load(&jobs[2].runs) < 2) {
		assert_true(eb_now_ms() < deadline);
		usleep(1000);
	}
	/* Running or handed back, both too late; the pause aims at the second. */
	usleep(10000);
	assert_false(workers_cancel(ws, &jobs[2].w));
	run_until(e, &finished, 1);
	assert_int_equal(jobs[2].dones, 1);

	workers_free(ws);
	free(jobs);
	sd_event_unref(e);
}

/* The seam that says workers_free() has stopped its threads: it joins them only after the stop
 * is set, so a job released here can no longer be followed by a queued one. */
int __real_pthread_join(pthread_t t, void **ret);
int __wrap_pthread_join(pthread_t t, void **ret);
int __wrap_pthread_join(pthread_t t, void **ret)
{
	atomic_store(&release, true);
	return __real_pthread_join(t, ret);
}

static int resubmits;

/* Cancelled, it hands itself back once, as a handshake step might before it hears of the stop. */
static void resubmit_done(struct work *w, bool cancelled)
{
	struct job *j = (struct job *)w;

	if (cancelled)
		j->cancels++;
	else
		j->dones++;
	if (resubmits-- > 0)
		workers_submit(j->ws, &j->w);
	else
		(*j->finished)++;
}

/* A job handed back from a cancelled done() while the workers stop is cancelled again, once per
 * hand-back, and is left in no list: neither linked to itself nor cancelled twice in one pass. */
static void test_free_cancels_a_job_resubmitted(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;
	struct job *jobs;
	int finished = 0;
	uint64_t deadline = eb_now_ms() + DEADLINE_MS;

	(void)state;
	for (unsigned n = 1; n <= 3; n++) {
		assert_int_equal(sd_event_new(&e), 0);
		assert_int_equal(workers_new(e, 1, &ws), 0);
		/* One blocker on the one thread, n jobs queued behind it; the first of them hands
		 * itself back twice. */
		finished = 0;
		resubmits = 2;
		jobs = jobs_new(n + 1, ws, &finished, 0, 0);
		jobs[0].w.run = blocking_run;
		for (unsigned i = 1; i <= n; i++)
			jobs[i].w.done = i == 1 ? resubmit_done : job_done;
		atomic_store(&started, false);
		atomic_store(&release, false);
		workers_submit(ws, &jobs[0].w);
		while (!atomic_load(&started)) {
			assert_true(eb_now_ms() < deadline);
			usleep(1000);
		}
		for (unsigned i = 1; i <= n; i++)
			workers_submit(ws, &jobs[i].w);
		workers_free(ws);
		assert_int_equal(finished, (int)n + 1);
		assert_int_equal(jobs[0].dones, 1);
		assert_int_equal(atomic_load(&jobs[1].runs), 0);
		assert_int_equal(jobs[1].dones, 0);
		assert_int_equal(jobs[1].cancels, 3);
		assert_null(jobs[1].w.node.next);
		assert_null(jobs[1].w.node.prev);
		for (unsigned i = 2; i <= n; i++) {
			assert_int_equal(atomic_load(&jobs[i].runs), 0);
			assert_int_equal(jobs[i].cancels, 1);
			assert_null(jobs[i].w.node.next);
			assert_null(jobs[i].w.node.prev);
		}
		free(jobs);
		sd_event_unref(e);
	}
}

/* No job at all: the threads start and stop. */
static void test_idle_start_stop(void **state)
{
	sd_event *e = NULL;
	struct workers *ws = NULL;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	assert_int_equal(workers_new(e, 8, &ws), 0);
	assert_int_equal(workers_count(ws), 8);
	assert_null(workers_free(ws));
	assert_int_equal(workers_count(NULL), 0);
	sd_event_unref(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jobs_go_and_come_back),
	    cmocka_unit_test(test_done_submits_again),
	    cmocka_unit_test(test_free_cancels_the_queue),
	    cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_free_cancels_a_job_resubmitted),
	    cmocka_unit_test(test_idle_start_stop),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
