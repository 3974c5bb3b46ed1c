/* SPDX-License-Identifier: MIT */
/* The loop every sink runs: connect (failing over, with back-off), ask for what the program wants,
 * hand each DATA to the program, wait as long as an EMPTY or QUOTA says, fail over when a broker
 * goes away, end at a refusal. Part of libeb's program layer, beside eb_source_run(): it logs
 * what it decides (docs/decisions.md), unless the program takes the events itself. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct eb_client;

/* want(): nothing to draw now, but connect all the same (a new HELLO is due). */
#define EB_SINK_WANT_CONNECT SIZE_MAX

/* take(): the program has all it wanted; the run ends with 0. */
#define EB_SINK_DONE 1
/* take(): the program will not use this broker's bytes (it did not vouch for them): the
 * runtime disconnects, rests and fails over. */
#define EB_SINK_FAILOVER 2

enum eb_sink_event {
	EB_SINK_CONNECTED,   /* a connect pass succeeded */
	EB_SINK_SERVED,      /* the first answer (DATA, EMPTY, QUOTA) since connecting */
	EB_SINK_DATA,        /* a DATA, before take() */
	EB_SINK_WAITING,     /* r: -EAGAIN (EMPTY) or -EDQUOT (QUOTA); ms: the rest it costs */
	EB_SINK_LOST,        /* r: the broker went away or broke the protocol; failing over */
	EB_SINK_MOVING,      /* ms: the broker gave only EMPTY that long; moving to another */
	EB_SINK_RETRYING,    /* r: a connect pass failed; ms: the back-off (with wait() only) */
	EB_SINK_UNREACHABLE, /* r: no broker could be reached by the deadline; the run ends */
	EB_SINK_REFUSED,     /* r: the broker refused this client; the run ends */
	_EB_SINK_EVENT_MAX,
	_EB_SINK_EVENT_INVALID = -EINVAL,
};

/* A sink leaves a broker that has answered only EMPTY (no DATA) for a bound drawn uniformly
 * from [ceiling/2, ceiling] when its list has another target (eb_client_has_other()), at the
 * next EMPTY past it: a broker with nothing to give holds no sink while another may have
 * entropy. The ceiling starts here and doubles with each move that DATA has not followed, up to
 * the max, so that sinks of a fleet whose brokers are all empty neither move in step nor go round
 * them faster and faster; DATA starts it again. */
#define EB_SINK_LEAVE_EMPTY_MIN_MS 20000
#define EB_SINK_LEAVE_EMPTY_MAX_MS 320000

struct eb_sink_ops {
	/* Bytes to ask for next, beyond in_flight bytes already asked for (capped at EB_DATA_MAX);
	 * 0: nothing more now. c is the client (connected or not). May block: eb-sink-file waits
	 * for its FIFO's reader here. */
	size_t (*want)(void *userdata, struct eb_client *c, uint64_t in_flight);
	/* One DATA: len (>= 1) bytes carrying bits (<= 8 x len). 0 to go on, EB_SINK_DONE,
	 * EB_SINK_FAILOVER, or a negative errno (logged by the program) that ends the run. The
	 * runtime wipes buf afterwards. */
	int (*take)(void *userdata, struct eb_client *c, const uint8_t *buf, size_t len,
	            uint32_t bits);
	/* Optional: for a thread that must stop at once. Rests up to ms (-1: until the program
	 * wants something) and returns 0, or a negative errno that ends the run (a stop). With it
	 * the runtime makes one connect pass at a time and backs off through it; without it, it
	 * connects with eb_client_connect_retry(), rests with eb_sleep_ms(), and a run with
	 * nothing wanted and nothing in flight ends with 0. */
	int (*wait)(void *userdata, int ms);
	/* Optional: one connect pass, returning the client now in use in *ret (eb-sink-egd has
	 * one per set of roles). NULL: eb_client_connect() of the client the run began with. */
	int (*connect)(void *userdata, struct eb_client **ret);
	/* Optional: called while connected with no GET in flight, before asking: for what may not
	 * go while a GET is out (eb-sink-egd's PUTs, which wait for their ACK). 0 to go on; a
	 * negative errno when it lost the broker (the runtime fails over, as after a receive). */
	int (*between)(void *userdata, struct eb_client *c);
	/* Optional: told of each event; NULL: eb_sink_log_event(). */
	void (*event)(void *userdata, struct eb_client *c, enum eb_sink_event e, int r,
	              unsigned ms);
};

struct eb_sink_params {
	enum eb_get_mode mode;
	unsigned window;         /* GETs in flight (1..EB_CLIENT_GETS_MAX); 0: 1 */
	uint64_t deadline_ms;    /* eb_now_ms() at which the run ends with -ETIMEDOUT; 0: none */
	unsigned retry_min_ms;   /* an EMPTY or QUOTA's retry hint, bounded: it is the */
	unsigned retry_max_ms;   /* broker's word (0: 60 s) */
	unsigned backoff_min_ms; /* between connect passes, with wait() only; 0: the */
	unsigned backoff_max_ms; /* client's (EB_BACKOFF_RECONNECT_MIN_MS, _MAX_MS) */
	bool persist;            /* a refusal is retried on the back-off too (with wait() only) */
	/* want() returning 0 while GETs are out means the program is done once they are answered
	 * in full (a one-shot draw): the GETs then end the session's requests
	 * (eb_client_end_requests()), and the broker ends the session after its answers. */
	bool oneshot;
	uint8_t *buf; /* EB_DATA_MAX bytes for DATA; NULL: the runtime's own, locked */
};

/* Runs until take() says EB_SINK_DONE (0), nothing is wanted without wait() (0), or an error
 * ends it: the deadline (-ETIMEDOUT), a refusal (-EACCES), a take() or wait() error. Each DATA,
 * EMPTY and QUOTA also goes through eb_cli_sink_answer() (what a sink waits for, in the journal
 * and STATUS=) unless the program takes the events. c may be NULL with ops->connect. */
int eb_sink_run(struct eb_client *c, const struct eb_sink_params *p, const struct eb_sink_ops *ops,
                void *userdata);

/* The runtime's own log lines for an event, for a program that adds to them. */
void eb_sink_log_event(struct eb_client *c, enum eb_sink_event e, int r, unsigned ms);
