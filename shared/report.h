/* SPDX-License-Identifier: MIT */
/* The admin's report: the rows of REPORT frames, one per session or per user, paged by id. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

enum eb_report_table {
	EB_REPORT_SESSIONS = 1, /* established sessions: sources, sinks, admins */
	EB_REPORT_USERS = 2,    /* configured users, connected or not */
	EB_REPORT_HISTORY = 3,  /* the broker's history: samples and per-source/sink totals */
	EB_REPORT_COUNTERS = 4, /* version 2: what the broker refused, its sessions and limits */
	_EB_REPORT_TABLE_MAX,
	_EB_REPORT_TABLE_INVALID = -EINVAL,
};

/* What the broker can tell of a source from the data it sends; it never sees the source's own
 * health tests, only their effect (a failing source sends nothing). */
enum eb_source_health {
	EB_SOURCE_NONE = 0,     /* the session is not a source */
	EB_SOURCE_NEW = 1,      /* no PUT yet */
	EB_SOURCE_OK = 2,       /* the latest PUT claimed credit and was given it */
	EB_SOURCE_NO_CLAIM = 3, /* the latest PUT claimed nothing, or the user's cap is 0 */
	EB_SOURCE_STUCK = 4, /* the latest PUT repeated itself: the broker's test withheld credit */
	EB_SOURCE_SILENT = 5, /* awake, but no PUT for EB_SOURCE_SILENT_MS */
	_EB_SOURCE_HEALTH_MAX,
	_EB_SOURCE_HEALTH_INVALID = -EINVAL,
};

/* A source that has been awake this long without a PUT is silent: a source whose own health
 * tests failed sends nothing until they pass again. */
#define EB_SOURCE_SILENT_MS 60000

/* What the broker knows of a source session, for eb_source_health(). */
struct eb_source_seen {
	bool source;      /* the session has the source role */
	bool asleep;      /* told to SLEEP */
	uint32_t idle_ms; /* since its last PUT (or HELLO) */
	uint64_t bytes_in;
	bool put_claimed; /* the latest PUT claimed credit, after the user's cap */
	bool put_stuck;   /* the broker's own test withheld the latest PUT's credit */
};

/* The health column: silent first (a source that has gone quiet matters more than what its last
 * PUT was), then new, stuck, no-claim or ok by the latest PUT. */
enum eb_source_health eb_source_health(const struct eb_source_seen *s);

/* Session flags. */
enum {
	EB_REPORT_ASLEEP = 1 << 0,   /* told to SLEEP, no WAKE yet */
	EB_REPORT_WAITING = 1 << 1,  /* a GET waits for an answer; waiting_ms says how long */
	EB_REPORT_QUOTA = 1 << 2,    /* the user has a quota; quota_left_bits is what it holds */
	EB_REPORT_TLS = 1 << 3,      /* over TLS (TCP, vsock, unix-tls), else plain unix */
	EB_REPORT_UPSTREAM = 1 << 4, /* the broker's own draw from its [upstream], a source */
	/* Version 2, sinks: starving because the latest answer was QUOTA, not EMPTY. */
	EB_REPORT_QUOTA_SPENT = 1 << 5,
	/* Version 3: a guest's session found drawing while another session of its user and key
	 * drew too: a copy of one machine (docs/vm-seeding.md, "Snapshots and clones"). */
	EB_REPORT_CLONE = 1 << 6,
};
#define EB_REPORT_SESSION_FLAGS                                                                    \
	(EB_REPORT_ASLEEP | EB_REPORT_WAITING | EB_REPORT_QUOTA | EB_REPORT_TLS |                  \
	 EB_REPORT_UPSTREAM | EB_REPORT_QUOTA_SPENT | EB_REPORT_CLONE)
/* The upstream's row comes after every session's. */
#define EB_REPORT_UPSTREAM_ID UINT64_MAX

/* The rows' layouts: version 0 is the first; version 1 adds, after the texts, a session's EMPTY
 * answers and how long it has been starving, and a user's EMPTY answers; version 2 adds their
 * QUOTA answers, a user's max-sessions and the counters table; version 3 has version 2's layout
 * and adds the session flag EB_REPORT_CLONE. A broker answers in the version asked for, so a
 * client that asks for 0 reads what it always read. */
#define EB_REPORT_VERSION 3

/* Rows in one REPORT; a table of 10,000 sessions is 79 pages. */
#define EB_REPORT_ROWS_MAX 128
/* "tcp [2001:db8::1]:40000", "unix pid=12 uid=1000": the broker's words for a peer. */
#define EB_PEER_MAX 127

struct eb_report_session {
	uint64_t id; /* the broker's number for the session: increasing, never reused */
	uint8_t roles;
	enum eb_source_health health;
	uint8_t flags;
	uint32_t claim_mbits_per_byte; /* the HELLO's claim */
	uint32_t connected_s;          /* since accept */
	uint32_t last_ms;              /* since the last HELLO, PUT or GET */
	uint32_t waiting_ms;           /* EB_REPORT_WAITING: since the GET arrived; else 0 */
	uint64_t bytes_in;             /* PUT bytes taken */
	uint64_t bits_in;              /* of those, bits credited */
	uint64_t bits_out;             /* full-entropy bits served */
	uint64_t bytes_drbg;           /* DRBG bytes served */
	uint64_t quota_left_bits;      /* EB_REPORT_QUOTA: the user's bucket now; else 0 */
	uint64_t empty_answers;        /* version 1: GETs answered EMPTY */
	uint32_t starving_ms;   /* version 1, sinks: since the first GET not yet followed by DATA,
	                         * while the latest answer was EMPTY (version 2: or QUOTA) or a GET
	                         * waits; else 0 */
	uint64_t quota_answers; /* version 2: GETs answered QUOTA */
	char user[EB_KIND_MAX + 1];
	char kind[EB_KIND_MAX + 1];
	char peer[EB_PEER_MAX + 1];
};

/* User flags. */
enum {
	EB_REPORT_USER_QUOTA = 1 << 0, /* quota_bits_per_hour and quota_left_bits are set */
};

struct eb_report_user {
	uint64_t id; /* its place in the configuration, from 1; a reload may renumber */
	uint8_t roles;
	uint8_t flags;
	uint32_t sessions, sources, sinks; /* established now; one session may be both */
	uint64_t bytes_in, bits_in, bits_out,
	    bytes_drbg; /* since start, closed sessions included */
	uint64_t quota_bits_per_hour, quota_left_bits;
	uint64_t empty_answers; /* version 1: its sessions' GETs answered EMPTY, since start */
	uint64_t quota_answers; /* version 2: answered QUOTA, since start */
	uint32_t max_sessions;  /* version 2: its max-sessions */
	char name[EB_KIND_MAX + 1];
};

/* The most bytes one row takes on the wire. */
#define EB_REPORT_SESSION_ROW_MAX (68 + 6 + 2 * EB_KIND_MAX + EB_PEER_MAX + 12 + 8)
#define EB_REPORT_USER_ROW_MAX    (72 + 2 + EB_KIND_MAX + 8 + 12)
/* Enough for the rows of any one REPORT. */
#define EB_REPORT_ROWS_SIZE (EB_REPORT_ROWS_MAX * EB_REPORT_SESSION_ROW_MAX)

/* Appends a row in layout version to buf; returns the bytes written, -ENOBUFS when it does not
 * fit, or -EINVAL for a field out of range (what the decoder would refuse; a version 0 row has
 * the version 1 fields 0). */
int eb_report_session_encode_version(const struct eb_report_session *row, uint8_t version,
                                     uint8_t *buf, size_t size);
int eb_report_user_encode_version(const struct eb_report_user *row, uint8_t version, uint8_t *buf,
                                  size_t size);
/* The same in version 0. */
int eb_report_session_encode(const struct eb_report_session *row, uint8_t *buf, size_t size);
int eb_report_user_encode(const struct eb_report_user *row, uint8_t *buf, size_t size);

/* Reads the rows of a REPORT that eb_msg_decode() accepted. */
struct eb_report_rows {
	const uint8_t *p;
	size_t left;
	uint8_t version;
};
void eb_report_rows_init(struct eb_report_rows *it, const struct eb_msg_report *m);
/* 1 and the next row in *ret, 0 at the end, -EBADMSG for a row that is not well-formed. */
int eb_report_next_session(struct eb_report_rows *it, struct eb_report_session *ret);
int eb_report_next_user(struct eb_report_rows *it, struct eb_report_user *ret);

/*
 * The counters table (4): what the broker refused since it started, and its sessions against
 * their limits now. It has one layout, asked for as version 2. A row is a u64 id (enum
 * eb_counter) and a u64 value, in id order; a client skips an id it does not know, so that a
 * broker may count more. One page holds them all.
 */
enum eb_counter {
	/* Peers refused at a limit (the configuration's key). */
	EB_COUNTER_LIMIT_MAX_SESSIONS = 1,
	EB_COUNTER_LIMIT_MAX_LOCAL_SESSIONS = 2,
	EB_COUNTER_LIMIT_MAX_HANDSHAKES = 3,
	EB_COUNTER_LIMIT_MAX_HANDSHAKES_PER_ADDRESS = 4,
	EB_COUNTER_LIMIT_USER_MAX_SESSIONS = 5, /* a [user]'s max-sessions */
	/* Peers that did not authenticate. */
	EB_COUNTER_AUTH_UNKNOWN_USER = 6,  /* a TLS identity no [user] has */
	EB_COUNTER_AUTH_WRONG_KEY = 7,     /* a known user, the wrong key */
	EB_COUNTER_AUTH_UNMAPPED_PEER = 8, /* a local peer no [user] maps by uid or gid */
	EB_COUNTER_AUTH_OTHER = 9,         /* unreadable credentials, a key replaced meanwhile */
	EB_COUNTER_TLS_FAILED = 10,        /* any other failed TLS handshake (not a close) */
	/* PROXY protocol headers. */
	EB_COUNTER_PROXY_BAD_HEADER = 11,  /* from a balancer: malformed, late, cut short */
	EB_COUNTER_PROXY_NOT_ALLOWED = 12, /* from an address not in proxy-protocol-from */
	/* Authenticated peers refused or closed: a malformed frame, a forbidden request. */
	EB_COUNTER_REFUSED_REQUEST = 13,
	/* Sessions of a guest (guest = yes) that began to draw while another session of the same
	 * user and key was drawing: copies of one machine, each counted but the first. */
	EB_COUNTER_CLONES = 14,
	/* Gauges, now: sessions (handshakes included) and their limits. */
	EB_COUNTER_NETWORK_SESSIONS = 32,
	EB_COUNTER_LOCAL_SESSIONS = 33,
	EB_COUNTER_HANDSHAKES = 34,
	EB_COUNTER_MAX_SESSIONS = 35,
	EB_COUNTER_MAX_LOCAL_SESSIONS = 36,
	EB_COUNTER_MAX_HANDSHAKES = 37,
	/* Not a count: the broker's id for this run (the one chaining carries), so that a page
	 * can say which broker it is. */
	EB_COUNTER_BROKER_ID = 48,
	_EB_COUNTER_MAX,
	_EB_COUNTER_INVALID = -EINVAL,
};

struct eb_report_counter {
	uint64_t id; /* enum eb_counter, or one this client does not know */
	uint64_t value;
};

#define EB_REPORT_COUNTER_ROW 16

/* Appends a row to buf: its bytes, -ENOBUFS, or -EINVAL for id 0. */
int eb_report_counter_encode(const struct eb_report_counter *row, uint8_t *buf, size_t size);
/* 1 and the next row in *ret, 0 at the end, -EBADMSG for a row that is not well-formed. */
int eb_report_next_counter(struct eb_report_rows *it, struct eb_report_counter *ret);
/* The counter's name ("limit-max-sessions"), or NULL for an id this client does not know. */
const char *eb_counter_to_string(enum eb_counter c);

const char *eb_report_table_to_string(enum eb_report_table t);
const char *eb_source_health_to_string(enum eb_source_health h);

/*
 * The history table (3): what the broker kept of the last hour and day (daemon/history.c,
 * docs/protocol.md 3.13). It has one layout, asked for as version 1; version 0 of table 3 is
 * malformed. A row's kind is the top byte of its id, so that one listing in id order gives the
 * hour's samples, then the day's, then the sources' totals, then the sinks'.
 */
enum eb_history_kind {
	EB_HISTORY_HOUR = 1,   /* a sample of EB_HISTORY_FINE_MS (10 s): the last hour */
	EB_HISTORY_DAY = 2,    /* a sample of EB_HISTORY_COARSE_MS (1 min): the last day */
	EB_HISTORY_SOURCE = 3, /* the totals of one source (user and kind), or of the others */
	EB_HISTORY_SINK = 4,   /* the same for a sink */
	_EB_HISTORY_KIND_MAX,
	_EB_HISTORY_KIND_INVALID = -EINVAL,
};

#define EB_HISTORY_FINE_MS   10000u
#define EB_HISTORY_COARSE_MS 60000u
#define EB_HISTORY_HOUR_MAX  360u  /* samples of the hour: 10 s each */
#define EB_HISTORY_DAY_MAX   1440u /* samples of the day: 1 min each */
#define EB_HISTORY_NAMED_MAX 32u   /* named sources (and as many sinks); the rest are "others" */
#define EB_HISTORY_ID_SHIFT  56
#define EB_HISTORY_SEQ_MAX   ((UINT64_C(1) << EB_HISTORY_ID_SHIFT) - 1)
/* The slot of the "others" row: after every named one. */
#define EB_HISTORY_OTHERS        EB_HISTORY_SEQ_MAX
#define EB_HISTORY_ID(kind, seq) (((uint64_t)(kind) << EB_HISTORY_ID_SHIFT) | (seq))

/* One interval of the broker's life. Gauges are read at its end, counts are what happened
 * during it. A day sample is the roll-up of six hour samples: their counts summed, the gauges
 * of the last. Intervals are shorter under the broker's test-only interval (docs/testing.md);
 * interval_ms always says what a sample spans. */
struct eb_history_sample {
	uint64_t seq;         /* 1 and above, one more per interval of its kind since start */
	uint64_t end_ms;      /* CLOCK_REALTIME at the end of the interval, ms since the epoch */
	uint32_t interval_ms; /* 1 and above: what it spans */
	uint64_t pool_bits;   /* gauge: the pool level */
	uint64_t bits_in;     /* input credit during it (as bits_in in STATUS) */
	uint64_t bits_out;    /* full-entropy bits served during it (as bits_out in STATUS) */
	uint32_t sources, sinks, admins; /* gauges: established sessions with that role */
	uint32_t alarms; /* PUTs whose credit the broker's own health test withheld ("stuck") */
	uint32_t empty;  /* GETs answered EMPTY */
};

/* Row flags of a total. */
enum {
	EB_HISTORY_OTHERS_ROW = 1 << 0, /* everything not in a named row; user and kind are "" */
};

/* A source's input credit, or a sink's full-entropy bits, over the hour and the day. A named
 * row is one user and HELLO kind; it keeps its slot while it counts, and gives it up after a
 * day without anything. The hour covers the current minute and the 59 before it; the day, the
 * current hour and the 23 before it, so hour_bits <= day_bits. */
struct eb_history_total {
	uint64_t slot; /* 1..EB_HISTORY_NAMED_MAX, or EB_HISTORY_OTHERS */
	uint8_t flags;
	uint32_t idle_s;    /* since it last counted (a PUT or a DATA), saturating */
	uint64_t hour_bits; /* at most day_bits */
	uint64_t day_bits;
	char user[EB_KIND_MAX + 1];
	char kind[EB_KIND_MAX + 1];
};

/* One row of the history table, as it is on the wire. */
struct eb_report_history_row {
	enum eb_history_kind kind;
	union {
		struct eb_history_sample sample; /* EB_HISTORY_HOUR, EB_HISTORY_DAY */
		struct eb_history_total total;   /* EB_HISTORY_SOURCE, EB_HISTORY_SINK */
	};
};

#define EB_REPORT_HISTORY_SAMPLE_ROW    64
#define EB_REPORT_HISTORY_TOTAL_ROW_MAX (32 + 2 * (2 + EB_KIND_MAX))

/* Appends a row to buf; returns the bytes written, -ENOBUFS when it does not fit, or -EINVAL for
 * a row the decoder would refuse. */
int eb_report_history_encode(const struct eb_report_history_row *row, uint8_t *buf, size_t size);
/* The row's id on the wire: its kind in the top byte, its seq or slot below. */
uint64_t eb_report_history_id(const struct eb_report_history_row *row);
/* 1 and the next row in *ret, 0 at the end, -EBADMSG for a row that is not well-formed. */
int eb_report_next_history(struct eb_report_rows *it, struct eb_report_history_row *ret);

/*
 * The whole history, gathered from the pages of one listing: what eb-brokerctl history and
 * eb-metrics draw. Samples are oldest first; sources and sinks in slot order, the "others" row
 * (if any) last. About 125 KiB: allocate it, do not put it on the stack.
 */
struct eb_history {
	uint32_t n_hour, n_day, n_sources, n_sinks;
	struct eb_history_sample hour[EB_HISTORY_HOUR_MAX];
	struct eb_history_sample day[EB_HISTORY_DAY_MAX];
	struct eb_history_total sources[EB_HISTORY_NAMED_MAX + 1];
	struct eb_history_total sinks[EB_HISTORY_NAMED_MAX + 1];
};

/* Adds a decoded row to h, which starts zeroed. -EBADMSG when the row does not follow the last
 * one in its kind's order (seq or slot increasing). Samples past their kind's maximum push out the
 * oldest (a sample may come between two pages); totals past theirs are -E2BIG. */
int eb_history_add(struct eb_history *h, const struct eb_report_history_row *row);

const char *eb_history_kind_to_string(enum eb_history_kind k);
