/* SPDX-License-Identifier: MIT */
/* What upstream.c (the event loop's side) and upstream-thread.c (the client's) say to each other
 * over their SOCK_SEQPACKET pair, one message per record, and the thread's state. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "key.h"
#include "proto.h"

struct eb_client;
struct eb_conf_upstream;
struct upstream;

enum up_cmd_type {
	UP_CMD_DRAW, /* draw bits more (0: only the path changed) */
	UP_CMD_HOLD, /* the upstream's bytes failed the health tests: drop the rest of the draw */
	UP_CMD_STOP,
	UP_CMD_REKEY, /* a new key for the next connection: key, key_id, key_gen */
};

struct up_cmd {
	uint32_t type; /* enum up_cmd_type */
	uint64_t bits;
	uint32_t n_chain; /* the ids for HELLO, this broker's first */
	uint64_t chain[EB_CHAIN_MAX];
	/* REKEY: the key (wiped by both ends once spent), its id ("": the default key), and
	 * its number, which CONNECTED notes give back to say which key logged in. */
	uint32_t key_gen;
	char key_id[EB_KEY_ID_MAX + 1];
	uint8_t key[EB_KEY_SIZE];
};

enum up_note_type {
	UP_NOTE_DATA,      /* len bytes follow, carrying bits as the upstream vouched */
	UP_NOTE_DONE,      /* the last DRAW is satisfied */
	UP_NOTE_CONNECTED, /* text: the broker, bits: the key_gen it logged in with */
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

/* The key the upstream thread was given last: at start (up_key_init()), or staged by a reload
 * (upstream_key_stage()), numbered from 0 up. Wiped with its struct upstream. */
struct up_key {
	bool tls; /* a broker= needs a key */
	uint32_t gen;
	char id[EB_KEY_ID_MAX + 1]; /* "": the user's default key */
	uint8_t key[EB_KEY_SIZE];
};

/* upstream-key.c: the key c's client loaded at start, when a broker= needs one. */
int up_key_init(struct up_key *k, const struct eb_conf_upstream *c);
/* upstream.c: u's. */
const struct up_key *upstream_key(const struct upstream *u);
