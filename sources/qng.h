/* SPDX-License-Identifier: MIT */
/* The protocol of ComScire's QNG quantum RNGs (R2000KU, R32MU): one-byte commands written to the
 * FTDI chip inside them, random bytes streamed back, the internal serial number as a delimiter to
 * find the start of a command's answer in that stream, and a status word with a bad-statistics
 * bit. Everything here goes through libftdi's read, write and flush calls, which the unit tests
 * double (tests/test-qng.c); finding and opening the device is the program's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ftdi_context;

/* The commands and the status bit, as the vendor's BSD-licensed QWQNG library (qwqng.hpp) names
 * their values; the code here is the project's own. The VM suite's emulated device
 * (tests/vm/qng-emulator.py) answers the same values. */
#define QNG_CMD_START       0x96u /* stream random bytes; the first one after it is invalid */
#define QNG_CMD_STOP        0xe0u /* stop streaming */
#define QNG_CMD_DELIMITER   0x60u /* answer with the internal serial number */
#define QNG_CMD_STATUS      0xb0u /* answer with the status word */
#define QNG_CMD_CLEAR_STATS 0xc0u /* clear the bad-statistics flag */
/* The status word's bit for "the generator failed the device's own statistical tests". */
#define QNG_STATUS_BAD_STATS 0x0004u

#define QNG_DELIMITER_LEN 6u /* bytes of the internal serial number */
#define QNG_STATUS_LEN    4u /* bytes of the status word, least significant first */

/* The chip's latency timer: how long it holds a part-filled buffer before sending it. A read
 * that brings less than asked thus means the device stopped streaming for that long. */
#define QNG_LATENCY_MS 2u
/* How long one read may wait for the USB transfer (a chip that sends nothing, not even its
 * latency timer's empty packets, is not working). */
#define QNG_READ_TIMEOUT_MS 500u
/* The status is checked after every read that came back short, and at least this often. */
#define QNG_CHECK_MS 10000u
/* Bytes that may still arrive after STOP before the stream is taken for never stopping, and
 * bytes searched for the delimiter after the command that asks for it. */
#define QNG_DRAIN_MAX   (1024u * 1024u)
#define QNG_SYNC_WINDOW 512u
/* Attempts at finding the delimiter before the device is taken for out of step for good. */
#define QNG_SYNC_ATTEMPTS 4u
/* Status checks in a row that found the device well but brought no byte after its restart. */
#define QNG_SILENT_MAX 3u

struct qng {
	struct ftdi_context *ftdi;
	uint8_t delimiter[QNG_DELIMITER_LEN];
	bool have_delimiter; /* learned by the first qng_sync() */
	bool streaming;      /* START sent and its invalid first byte dropped */
	bool check_due;      /* a read came back short: check the status before reading on */
	bool clear_stats;    /* the last status had the bad-statistics bit: clear it at the start */
	uint64_t checked_ms; /* when the status was last checked */
	unsigned silent;     /* checks in a row, status good, with no byte read since */
	uint32_t status;     /* the last status word */
	/* What the protocol skipped, for the log: stream bytes found ahead of a delimiter, and the
	 * invalid first bytes after each start. */
	uint64_t stragglers;
	uint64_t discarded;
	uint64_t bad_stats; /* status checks that found the bad-statistics bit */
};

/* Sets up the opened chip (read chunk size, latency timer, flushed buffers), stops the device,
 * learns its delimiter (the same answer twice in a row) and reads its status. 0, -EIO (the chip
 * refused a setting), -ENODEV (gone), -EPROTO (no steady answer). */
int qng_setup(struct qng *q, struct ftdi_context *ftdi, unsigned read_chunk);

/* Stops the device, skips what it still streams, asks for the delimiter and finds it in what
 * arrives (the stream bytes ahead of it are skipped), up to QNG_SYNC_ATTEMPTS times: afterwards
 * the next byte read is the answer to the next command. The first call learns the delimiter. */
int qng_sync(struct qng *q);

/* Fills buf with up to n random bytes; now_ms is the caller's clock, for the periodic status
 * check. Starts the device when it is stopped and drops the invalid first byte after the start;
 * after a short read or a timeout, and every QNG_CHECK_MS, stops it, resynchronises and reads
 * the status. Returns the count (> 0); 0 with *ret_bad_stats when the device reports that its
 * own tests failed (the flag is cleared and the device restarted at the next call); -ENODEV
 * when it is gone, -ETIMEDOUT when it sends nothing while its status says all is well, -EPROTO
 * when it is out of step, -EIO for another failure of the chip. */
ssize_t qng_read(struct qng *q, uint8_t *buf, size_t n, uint64_t now_ms, bool *ret_bad_stats);

/* Stops the device (what a close leaves behind: an idle QNG). */
void qng_stop(struct qng *q);
