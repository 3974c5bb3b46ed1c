/* SPDX-License-Identifier: MIT */
/* What upstream.c (the event loop's side) and upstream-thread.c (the client's) say to each other
 * over their SOCK_SEQPACKET pair, one message per record, and the thread's state. */
#pragma once

#include <pthread.h>
#include <stdint.h>

#include "proto.h"

struct eb_client;

enum up_cmd_type {
	UP_CMD_DRAW, /* draw bits more (0: only the path changed) */
	UP_CMD_HOLD, /* the upstream's bytes failed the health tests: drop the rest of the draw */
	UP_CMD_STOP,
};

struct up_cmd {
	uint32_t type; /* enum up_cmd_type */
	uint64_t bits;
	uint32_t n_chain; /* the ids for HELLO, this broker's first */
	uint64_t chain[EB_CHAIN_MAX];
};

enum up_note_type {
	UP_NOTE_DATA,      /* len bytes follow, carrying bits as the upstream vouched */
	UP_NOTE_DONE,      /* the last DRAW is satisfied */
	UP_NOTE_CONNECTED, /* text: the broker */
	UP_NOTE_FAILED,    /* text: why, bits: the errno; the thread retries with back-off */
};

struct up_note {
	uint32_t type; /* enum up_note_type */
	uint32_t bits;
	uint32_t len;
	char text[EB_TEXT_MAX + 64];
};

#define UP_NOTE_MAX (sizeof(struct up_note) + EB_DATA_MAX)

struct up_thread {
	int fd; /* the thread's end */
	struct eb_client *client;
	pthread_t id;
};

void *upstream_thread(void *arg);
