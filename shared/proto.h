/* SPDX-License-Identifier: MIT */
/* The wire protocol: typed, length-prefixed, big-endian frames and their messages. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every frame is an 8-byte header followed by the payload:
 *
 *   u8  type      (enum eb_msg_type)
 *   u8  flags     (0; receivers refuse unknown bits)
 *   u16 reserved  (0; receivers refuse anything else)
 *   u32 length    (payload bytes, at most EB_FRAME_PAYLOAD_MAX)
 *
 * All integers are big-endian. The first frame a client sends is HELLO, which carries the
 * protocol version; the broker answers WELCOME or ERROR. docs/protocol.md is the reference.
 */

#define EB_PROTO_VERSION     1
#define EB_FRAME_HEADER_SIZE 8
#define EB_FRAME_PAYLOAD_MAX (64 * 1024 + 64)
#define EB_FRAME_MAX         (EB_FRAME_HEADER_SIZE + EB_FRAME_PAYLOAD_MAX)
/* The largest PUT or DATA body: 64 KiB keeps one frame within the payload limit. */
#define EB_DATA_MAX     (64 * 1024)
#define EB_KIND_MAX     64
#define EB_TEXT_MAX     256
#define EB_DEFAULT_PORT 55225
/* The most broker ids a chained HELLO carries: a chain of brokers deeper than this is refused. */
#define EB_CHAIN_MAX 16

enum eb_msg_type {
	EB_MSG_HELLO = 1,       /* client -> broker: version, roles, kind */
	EB_MSG_WELCOME = 2,     /* broker -> client: version, user, limits */
	EB_MSG_PUT = 3,         /* source -> broker: data and claimed credit */
	EB_MSG_PUT_ACK = 4,     /* broker -> source: bits credited */
	EB_MSG_GET = 5,         /* sink -> broker: bits wanted and mode */
	EB_MSG_DATA = 6,        /* broker -> sink: bytes and the bits they carry */
	EB_MSG_EMPTY = 7,       /* broker -> sink: cannot serve now, retry after N ms */
	EB_MSG_SLEEP = 8,       /* broker -> source: pool full, stop until WAKE or N ms */
	EB_MSG_WAKE = 9,        /* broker -> source: pool below low water, resume */
	EB_MSG_QUOTA = 10,      /* broker -> sink: quota spent, retry after N ms */
	EB_MSG_ERROR = 11,      /* either way: code and text; the sender closes after it */
	EB_MSG_STATUS_REQ = 12, /* admin -> broker */
	EB_MSG_STATUS = 13,     /* broker -> admin */
	EB_MSG_REPORT_REQ = 14, /* admin -> broker: a page of a table (report.h) */
	EB_MSG_REPORT = 15,     /* broker -> admin: the page's rows */
	EB_MSG_ACTION_REQ = 16, /* admin -> broker: drain, disconnect... (proto-admin.c) */
	EB_MSG_ACTION = 17,     /* broker -> admin: what it did */
	EB_MSG_STATE_REQ = 18,  /* admin -> broker */
	EB_MSG_STATE = 19,      /* broker -> admin: drain, reloads, the upstream */
	_EB_MSG_MAX,
	_EB_MSG_INVALID = -EINVAL,
};

enum eb_role {
	EB_ROLE_SOURCE = 1 << 0,
	EB_ROLE_SINK = 1 << 1,
	EB_ROLE_ADMIN = 1 << 2,
};
#define EB_ROLE_ALL (EB_ROLE_SOURCE | EB_ROLE_SINK | EB_ROLE_ADMIN)

enum eb_get_mode {
	EB_GET_FULL = 0, /* full-entropy output (SP 800-90C RBG3), debits the pool */
	EB_GET_DRBG = 1, /* DRBG output, does not debit the pool beyond its seed */
	_EB_GET_MODE_MAX,
	_EB_GET_MODE_INVALID = -EINVAL,
};

enum eb_error_code {
	EB_ERR_PROTOCOL = 1,  /* malformed frame or message out of order */
	EB_ERR_VERSION = 2,   /* unsupported protocol version */
	EB_ERR_AUTH = 3,      /* unknown user or bad key */
	EB_ERR_FORBIDDEN = 4, /* the user's roles do not allow this request */
	EB_ERR_TOO_LARGE = 5, /* a size is over a limit */
	EB_ERR_INTERNAL = 6,  /* the broker failed; try another */
	EB_ERR_SHUTDOWN = 7,  /* the broker is stopping */
	EB_ERR_BUSY = 8,      /* a session limit is reached; try again later or another broker */
	_EB_ERR_MAX,
	_EB_ERR_INVALID = -EINVAL,
};

/* A frame as it sits in a receive buffer; payload points into that buffer. */
struct eb_frame {
	enum eb_msg_type type;
	uint8_t flags;
	uint32_t length;
	const uint8_t *payload;
};

struct eb_msg_hello {
	uint16_t version;
	uint8_t roles;                 /* enum eb_role bits the client asks for */
	uint32_t claim_mbits_per_byte; /* a source's claimed entropy, in 1/1000 bit per byte */
	char kind[EB_KIND_MAX + 1];    /* free text, e.g. "stream /dev/hwrng"; NUL-terminated */
	/* A broker drawing from an upstream broker sends its own id first, then the ids of the
	 * brokers drawing through it (docs/decisions.md: chaining); 0 for every other client. */
	uint8_t n_chain;
	uint64_t chain[EB_CHAIN_MAX];
};

struct eb_msg_welcome {
	uint16_t version;
	uint8_t roles;     /* the roles granted */
	uint32_t max_data; /* largest PUT/DATA body the broker takes or sends */
	char user[EB_KIND_MAX + 1];
};

struct eb_msg_put {
	uint32_t credit_bits; /* entropy the source claims for data */
	const uint8_t *data;
	uint32_t len; /* 1..EB_DATA_MAX */
};

struct eb_msg_put_ack {
	uint32_t credited_bits;
	uint32_t accepted_bytes;
};

struct eb_msg_get {
	uint32_t bits; /* wanted; 8..EB_DATA_MAX*8, a multiple of 8 */
	enum eb_get_mode mode;
};

struct eb_msg_data {
	uint32_t bits; /* entropy these bytes carry (0 for DRBG mode) */
	const uint8_t *data;
	uint32_t len;
};

struct eb_msg_retry { /* EMPTY, SLEEP and QUOTA */
	uint32_t retry_ms;
};

struct eb_msg_error {
	enum eb_error_code code;
	char text[EB_TEXT_MAX + 1];
};

/* STATUS's layouts: 0, the first (an empty STATUS_REQ), and 1, which adds the pool's carried
 * and dropped credit (docs/protocol.md 3.10, 3.11). */
#define EB_STATUS_VERSION 1

struct eb_msg_status_req {
	uint8_t version; /* 0 .. EB_STATUS_VERSION; 0 is the empty payload */
};

struct eb_msg_status {
	uint8_t version; /* the layout: the STATUS_REQ's; not on the wire, said by the length */
	uint64_t pool_bits;
	uint64_t capacity_bits;
	uint64_t bits_in;    /* credited since start */
	uint64_t bits_out;   /* delivered as full entropy since start */
	uint64_t bytes_drbg; /* delivered in DRBG mode since start */
	uint32_t sources;
	uint32_t sinks;
	uint32_t uptime_s;
	/* Version 1: input credit short of a block, waiting outside the level (0..575), and the
	 * credit dropped at the cuts of blocks since start (docs/pool.md). */
	uint64_t carried_bits;
	uint64_t dropped_bits;
};

/* An admin asks for the rows of a table whose ids are above after (0: from the start). */
struct eb_msg_report_req {
	uint8_t table;   /* enum eb_report_table */
	uint8_t version; /* of the rows' layout: 0 .. EB_REPORT_VERSION (report.h) */
	uint64_t after;
};

/* One page of a table: count rows in id order, their bytes in rows (report.h reads and writes
 * them). next is the last row's id when more rows follow, else 0. */
struct eb_msg_report {
	uint8_t table;
	uint8_t version; /* the rows' layout: the REPORT_REQ's */
	uint16_t count;
	uint64_t next;
	const uint8_t *rows;
	uint32_t rows_len;
};

/* What an admin may do at runtime (docs/protocol.md 3.14). */
enum eb_action {
	EB_ACTION_DRAIN = 1,           /* tell balancers to send no new clients (the agent) */
	EB_ACTION_UNDRAIN = 2,         /* the end of a drain */
	EB_ACTION_DISCONNECT = 3,      /* close the session numbered session */
	EB_ACTION_DISCONNECT_USER = 4, /* close every session of user but the asker's */
	_EB_ACTION_MAX,
	_EB_ACTION_INVALID = -EINVAL,
};

enum eb_action_result {
	EB_ACTION_DONE = 0,
	EB_ACTION_UNCHANGED = 1, /* nothing to do: already drained, not drained */
	EB_ACTION_NOT_FOUND = 2, /* no such session, or the user has none */
	EB_ACTION_LIMITED = 3,   /* too many actions lately: retry after retry_ms */
	_EB_ACTION_RESULT_MAX,
	_EB_ACTION_RESULT_INVALID = -EINVAL,
};

struct eb_msg_action_req {
	uint8_t action;             /* enum eb_action */
	uint64_t session;           /* DISCONNECT: the session's id; else 0 */
	char user[EB_KIND_MAX + 1]; /* DISCONNECT_USER: the user's name; else "" */
};

struct eb_msg_action {
	uint8_t action;             /* the ACTION_REQ's */
	uint8_t result;             /* enum eb_action_result */
	uint32_t sessions;          /* sessions closed */
	uint32_t retry_ms;          /* LIMITED: when another action will be taken; else 0 */
	char text[EB_TEXT_MAX + 1]; /* what the broker did, in words */
};

/* STATE flags. */
enum {
	EB_STATE_DRAINED = 1 << 0,       /* an admin drained the broker: drained_* are set */
	EB_STATE_STOPPING = 1 << 1,      /* the broker is stopping */
	EB_STATE_RELOAD_FAILED = 1 << 2, /* the last reload failed: reload_text says why */
	EB_STATE_UPSTREAM = 1 << 3,      /* the broker has an [upstream] */
};
#define EB_STATE_FLAGS                                                                             \
	(EB_STATE_DRAINED | EB_STATE_STOPPING | EB_STATE_RELOAD_FAILED | EB_STATE_UPSTREAM)

/* The upstream's state, with EB_STATE_UPSTREAM; else EB_UPSTREAM_NONE. */
enum eb_upstream_state {
	EB_UPSTREAM_NONE = 0,
	EB_UPSTREAM_CONNECTING = 1, /* no attempt has ended yet */
	EB_UPSTREAM_CONNECTED = 2,
	EB_UPSTREAM_FAILING = 3, /* the latest attempt failed: upstream_reason says why */
	_EB_UPSTREAM_STATE_MAX,
	_EB_UPSTREAM_STATE_INVALID = -EINVAL,
};

/* The broker's state beyond STATUS's figures. Times are CLOCK_REALTIME in ms since the epoch,
 * 0 for never. */
struct eb_msg_state {
	uint8_t flags;
	uint8_t upstream;                  /* enum eb_upstream_state */
	uint32_t reloads, reload_failures; /* since start */
	uint64_t config_loaded_ms;  /* the running configuration was loaded (start or reload) */
	uint64_t last_reload_ms;    /* the last reload ended, well or not */
	uint64_t drained_ms;        /* EB_STATE_DRAINED: since when */
	uint64_t upstream_since_ms; /* the upstream has been in its state since */
	uint64_t upstream_data_ms;  /* the upstream's last DATA */
	char drained_by[EB_KIND_MAX + 1];      /* the admin user who drained it */
	char reload_text[EB_TEXT_MAX + 1];     /* what the last reload changed, or its error */
	char upstream_broker[EB_TEXT_MAX + 1]; /* the broker it last tried */
	char upstream_reason[EB_TEXT_MAX + 1]; /* FAILING: why */
};

struct eb_msg {
	enum eb_msg_type type;
	union {
		struct eb_msg_hello hello;
		struct eb_msg_welcome welcome;
		struct eb_msg_put put;
		struct eb_msg_put_ack put_ack;
		struct eb_msg_get get;
		struct eb_msg_data data;
		struct eb_msg_retry retry; /* EMPTY, SLEEP, QUOTA */
		struct eb_msg_error error;
		struct eb_msg_status_req status_req;
		struct eb_msg_status status;
		struct eb_msg_report_req report_req;
		struct eb_msg_report report;
		struct eb_msg_action_req action_req;
		struct eb_msg_action action;
		struct eb_msg_state state;
	};
};

/* Parses one frame header + payload from buf. Returns 0 and fills *ret and *ret_size (bytes the
 * frame takes) when a whole frame is there; -EAGAIN when more bytes are needed; -EMSGSIZE when
 * the length is over EB_FRAME_PAYLOAD_MAX; -EBADMSG for an unknown type or nonzero
 * flags/reserved. */
int eb_frame_parse(const uint8_t *buf, size_t len, struct eb_frame *ret, size_t *ret_size);

/* Checks a frame header alone, for a reader that takes the header and then exactly its payload:
 * fills *ret but its payload (NULL), with the errors of eb_frame_parse(). */
int eb_frame_header_parse(const uint8_t *buf, size_t len, struct eb_frame *ret);

/* Writes a frame header for a payload of length bytes into buf[EB_FRAME_HEADER_SIZE]. */
void eb_frame_header_write(uint8_t *buf, enum eb_msg_type type, uint32_t length);

/* Decodes a frame's payload into *ret. Pointers in *ret (PUT and DATA bodies, REPORT rows) point
 * into the frame's payload. Returns -EBADMSG for a payload that is truncated, too long, or has a
 * field out of range, REPORT rows included. WAKE carries no payload; STATUS_REQ none or a
 * version. */
int eb_msg_decode(const struct eb_frame *frame, struct eb_msg *ret);

/* Encodes msg as a whole frame (header included) into buf of size bytes; returns the frame's
 * size, or -ENOBUFS when it does not fit, -EINVAL for a field out of range. */
int eb_msg_encode(const struct eb_msg *msg, uint8_t *buf, size_t size);

const char *eb_msg_type_to_string(enum eb_msg_type t);
const char *eb_error_code_to_string(enum eb_error_code c);
/* "source,sink" for a role mask into buf; returns buf. */
const char *eb_roles_to_string(unsigned roles, char *buf, size_t size);
const char *eb_action_to_string(enum eb_action a);
const char *eb_action_result_to_string(enum eb_action_result r);
const char *eb_upstream_state_to_string(enum eb_upstream_state s);
