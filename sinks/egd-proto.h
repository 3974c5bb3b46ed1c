/* SPDX-License-Identifier: MIT */
/* The EGD protocol's requests, parsed from a client's bytes without ever reading past them. */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* The longest request: 0x03, u16 bits, u8 count, then count (at most 255) bytes. */
#define EGD_REQUEST_MAX (1 + 2 + 1 + 255)
/* A count byte caps every read and write at 255 bytes. */
#define EGD_COUNT_MAX 255

enum egd_cmd {
	EGD_CMD_LEVEL = 0x00,      /* reply: u32 BE bits available */
	EGD_CMD_READ = 0x01,       /* u8 n; reply: u8 m (m <= n), m bytes */
	EGD_CMD_READ_BLOCK = 0x02, /* u8 n; reply: exactly n bytes, no count */
	EGD_CMD_WRITE = 0x03,      /* u16 BE bits, u8 n, n bytes; no reply */
	EGD_CMD_PID = 0x04,        /* reply: u8 len, ASCII pid */
	_EGD_CMD_MAX,
	_EGD_CMD_INVALID = -EINVAL,
};

struct egd_request {
	enum egd_cmd cmd;
	uint8_t count;       /* READ, READ_BLOCK: bytes asked for; WRITE: bytes carried */
	uint16_t bits;       /* WRITE: entropy the client claims for its bytes */
	const uint8_t *data; /* WRITE: the bytes, pointing into the parsed buffer */
};

/* Parses the request at the start of buf. Returns 1 with *ret and *ret_size (bytes it spans)
 * when a whole request is there, 0 when more bytes are needed, -EBADMSG for an unknown command
 * byte. */
int egd_request_parse(const uint8_t *buf, size_t len, struct egd_request *ret, size_t *ret_size);
