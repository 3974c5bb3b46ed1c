/* SPDX-License-Identifier: MIT */
/* Tests for sources/qng.c, the ComScire QNG protocol, with libftdi's calls doubled through link
 * seams (-Wl,--wrap=ftdi_*): a fake device that streams a known sequence after START (preceded by
 * its invalid first byte), answers the delimiter and status commands, and can be told to leave
 * stream bytes on the wire ahead of an answer, to fail its own tests, to fall silent or to be
 * unplugged. What is checked: the first byte after every start is dropped, the delimiter is
 * learned and then found behind stream bytes that arrive late, a status read after such bytes is
 * the status, a short read or the clock brings a status check, the bad-statistics flag comes
 * back as such and is cleared, and a device out of step, silent or gone ends the read. */
#include <errno.h>
#include <ftdi.h>
#include <libusb.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "macro.h"
#include "qng.h"

static const uint8_t DELIMITER[QNG_DELIMITER_LEN] = {0x51, 0x57, 0x00, 0x2a, 0x13, 0x37};
/* The invalid first byte after a start: its first bits are zero on the device. */
#define FIRST_BYTE 0x03u

static struct fake {
	bool streaming;
	bool just_started; /* the next stream byte is the invalid one */
	uint8_t next;      /* the stream: next, next + 7, ... (never FIRST_BYTE's place) */
	uint8_t out[1024]; /* answers waiting to be read */
	size_t out_len;
	bool bad_stats;
	bool stays_bad; /* the flag comes back at once after a clear */
	bool silent;    /* streaming, but nothing comes */
	size_t late;    /* stream bytes that arrive after the drain, ahead of the next answer */
	size_t garbled; /* delimiter answers still to garble */
	size_t short_read_at; /* the stream read that comes back short (1-based); 0: none */
	size_t stream_reads;
	bool gone;
	char cmds[64]; /* commands received: S start, T stop, D delimiter, W status, C clear */
	size_t n_cmds;
	unsigned latency;
	int read_timeout;
} fake;

static struct ftdi_context ctx;

static void push(const uint8_t *b, size_t n)
{
	assert_true(fake.out_len + n <= sizeof(fake.out));
	memcpy(fake.out + fake.out_len, b, n);
	fake.out_len += n;
}

static uint8_t stream_byte(void)
{
	uint8_t b = fake.next;

	fake.next = (uint8_t)(fake.next + 7);
	return b;
}

static void push_late(void)
{
	for (; fake.late > 0; fake.late--) {
		uint8_t b = stream_byte();

		push(&b, 1);
	}
}

int __wrap_ftdi_write_data(struct ftdi_context *ftdi, const unsigned char *buf, int size);
int __wrap_ftdi_write_data(struct ftdi_context *ftdi, const unsigned char *buf, int size)
{
	static const uint8_t garbage[QNG_DELIMITER_LEN] = {0xde, 0xad, 0xbe, 0xef, 0x00, 0x01};
	char c = '?';

	assert_ptr_equal(ftdi, &ctx);
	assert_int_equal(size, 1);
	if (fake.gone)
		return -1;
	switch (buf[0]) {
	case QNG_CMD_START:
		c = 'S';
		fake.streaming = true;
		fake.just_started = true;
		break;
	case QNG_CMD_STOP:
		c = 'T';
		fake.streaming = false;
		break;
	case QNG_CMD_DELIMITER:
		c = 'D';
		push_late();
		if (fake.garbled > 0) {
			fake.garbled--;
			push(garbage, sizeof(garbage));
		} else
			push(DELIMITER, sizeof(DELIMITER));
		break;
	case QNG_CMD_STATUS: {
		uint8_t w[QNG_STATUS_LEN] = {fake.bad_stats ? QNG_STATUS_BAD_STATS : 0, 0, 0, 0};

		c = 'W';
		push_late();
		push(w, sizeof(w));
		break;
	}
	case QNG_CMD_CLEAR_STATS:
		c = 'C';
		fake.bad_stats = fake.stays_bad;
		break;
	default:
		fail_msg("unknown command 0x%02x", buf[0]);
	}
	if (fake.n_cmds + 1 < sizeof(fake.cmds))
		fake.cmds[fake.n_cmds++] = c;
	return 1;
}

int __wrap_ftdi_read_data(struct ftdi_context *ftdi, unsigned char *buf, int size);
int __wrap_ftdi_read_data(struct ftdi_context *ftdi, unsigned char *buf, int size)
{
	size_t n = (size_t)size;

	assert_ptr_equal(ftdi, &ctx);
	assert_true(size > 0);
	if (fake.gone)
		return LIBUSB_ERROR_NO_DEVICE;
	if (fake.out_len > 0) {
		n = MIN(n, fake.out_len);
		memcpy(buf, fake.out, n);
		memmove(fake.out, fake.out + n, fake.out_len - n);
		fake.out_len -= n;
		return (int)n;
	}
	/* A device that failed its tests stops streaming, as the vendor's library expects. */
	if (!fake.streaming || fake.silent || fake.bad_stats)
		return 0; /* the chip's latency timer: an empty packet */
	if (++fake.stream_reads == fake.short_read_at)
		n = MAX(n / 2, (size_t)1);
	for (size_t i = 0; i < n; i++) {
		if (fake.just_started) {
			buf[i] = FIRST_BYTE;
			fake.just_started = false;
		} else
			buf[i] = stream_byte();
	}
	return (int)n;
}

int __wrap_ftdi_tciflush(struct ftdi_context *ftdi);
int __wrap_ftdi_tciflush(struct ftdi_context *ftdi)
{
	assert_ptr_equal(ftdi, &ctx);
	if (fake.gone)
		return -1;
	fake.out_len = 0;
	return 0;
}

int __wrap_ftdi_tcioflush(struct ftdi_context *ftdi);
int __wrap_ftdi_tcioflush(struct ftdi_context *ftdi)
{
	return __wrap_ftdi_tciflush(ftdi);
}

int __wrap_ftdi_set_latency_timer(struct ftdi_context *ftdi, unsigned char latency);
int __wrap_ftdi_set_latency_timer(struct ftdi_context *ftdi, unsigned char latency)
{
	assert_ptr_equal(ftdi, &ctx);
	fake.latency = latency;
	return 0;
}

int __wrap_ftdi_read_data_set_chunksize(struct ftdi_context *ftdi, unsigned int chunksize);
int __wrap_ftdi_read_data_set_chunksize(struct ftdi_context *ftdi, unsigned int chunksize)
{
	assert_ptr_equal(ftdi, &ctx);
	assert_true(chunksize > 0);
	return 0;
}

const char *__wrap_ftdi_get_error_string(struct ftdi_context *ftdi);
const char *__wrap_ftdi_get_error_string(struct ftdi_context *ftdi)
{
	(void)ftdi;
	return "fake error";
}

static int setup(void **state)
{
	(void)state;
	fake = (struct fake){.next = 0x10};
	ctx = (struct ftdi_context){};
	return 0;
}

/* The stream bytes the fake sends from the next one on: next, next + 7, ... */
static void assert_stream(const uint8_t *buf, size_t n, uint8_t from)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(buf[i], (uint8_t)(from + 7 * i));
}

static void test_setup_learns_delimiter(void **state)
{
	struct qng q;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	assert_true(q.have_delimiter);
	assert_memory_equal(q.delimiter, DELIMITER, sizeof(DELIMITER));
	assert_int_equal(fake.latency, QNG_LATENCY_MS);
	assert_int_equal(ctx.usb_read_timeout, QNG_READ_TIMEOUT_MS);
	/* Stopped, then the same answer twice. */
	assert_string_equal(fake.cmds, "TDD");
	assert_false(fake.streaming);
}

static void test_learning_retries_a_garbled_answer(void **state)
{
	struct qng q;

	(void)state;

	/* Two different answers are no delimiter: the whole attempt is made again. */
	fake.garbled = 1;
	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	assert_memory_equal(q.delimiter, DELIMITER, sizeof(DELIMITER));
	assert_string_equal(fake.cmds, "TDDTDD");
}

static void test_first_byte_dropped(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	fake.n_cmds = 0;
	memset(fake.cmds, 0, sizeof(fake.cmds));
	/* The first read checks the status, starts the device and drops its first byte: what
	 * comes back is the stream from its first valid byte. */
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), sizeof(buf));
	assert_false(bad);
	assert_stream(buf, sizeof(buf), 0x10);
	assert_int_equal(q.discarded, 1);
	assert_string_equal(fake.cmds, "TDWS");
	/* Reading on drops nothing more. */
	assert_int_equal(qng_read(&q, buf, 8, 100001, &bad), 8);
	assert_stream(buf, 8, (uint8_t)(0x10 + 7 * 64));
	assert_int_equal(q.discarded, 1);
}

static void test_resync_behind_late_bytes(void **state)
{
	uint8_t buf[32];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), sizeof(buf));
	/* At the next check, 37 stream bytes are still on the wire after the drain, ahead of the
	 * delimiter's answer. Chosen to have the bad-statistics bit: a status read out of step
	 * would see it. */
	fake.next = 0xff;
	fake.late = 37;
	fake.n_cmds = 0;
	memset(fake.cmds, 0, sizeof(fake.cmds));
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000 + QNG_CHECK_MS, &bad), sizeof(buf));
	assert_false(bad);
	assert_int_equal(q.status, 0);
	assert_int_equal(q.stragglers, 37);
	assert_string_equal(fake.cmds, "TDWS");
	/* After the restart: its invalid first byte dropped, the stream. */
	assert_int_equal(q.discarded, 2);
	assert_stream(buf, sizeof(buf), (uint8_t)(0xff + 7 * 37));
}

static void test_out_of_step(void **state)
{
	uint8_t buf[32];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	/* The delimiter never comes back as it was learned. */
	fake.garbled = QNG_SYNC_ATTEMPTS;
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), -EPROTO);
	assert_int_equal(fake.garbled, 0);
}

static void test_short_read_brings_a_check(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	fake.short_read_at = 3; /* the start's first byte is read 1, the first read 2 */
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), sizeof(buf));
	fake.n_cmds = 0;
	memset(fake.cmds, 0, sizeof(fake.cmds));
	/* The second read comes back short: its bytes are good, but the next read checks first,
	 * well before QNG_CHECK_MS. */
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100001, &bad), sizeof(buf) / 2);
	assert_string_equal(fake.cmds, "");
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100002, &bad), sizeof(buf));
	assert_string_equal(fake.cmds, "TDWS");
}

static void test_bad_stats(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), sizeof(buf));
	/* The device fails its own tests and stops: the read that brings nothing is a timeout,
	 * and the status says why. */
	fake.bad_stats = true;
	fake.n_cmds = 0;
	memset(fake.cmds, 0, sizeof(fake.cmds));
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100001, &bad), 0);
	assert_true(bad);
	assert_int_equal(q.bad_stats, 1);
	assert_string_equal(fake.cmds, "TDW");
	/* The next read clears the flag before the start, and the device streams again. */
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100002, &bad), sizeof(buf));
	assert_false(bad);
	assert_string_equal(fake.cmds, "TDWCS");
	assert_false(fake.bad_stats);
}

static void test_bad_stats_that_stay(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	fake.bad_stats = true;
	fake.stays_bad = true;
	/* A device that keeps failing is reported each time, never taken for a silent one. */
	for (int i = 0; i < 3 * (int)QNG_SILENT_MAX; i++) {
		assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000 + (uint64_t)i, &bad), 0);
		assert_true(bad);
	}
	assert_int_equal(q.bad_stats, 3 * QNG_SILENT_MAX);
}

static void test_silent(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	fake.silent = true;
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), -ETIMEDOUT);
	assert_false(bad);
}

static void test_unplugged(void **state)
{
	uint8_t buf[64];
	struct qng q;
	bool bad;

	(void)state;

	assert_int_equal(qng_setup(&q, &ctx, 16384), 0);
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100000, &bad), sizeof(buf));
	fake.gone = true;
	assert_int_equal(qng_read(&q, buf, sizeof(buf), 100001, &bad), -ENODEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_setup_learns_delimiter, setup),
	    cmocka_unit_test_setup(test_learning_retries_a_garbled_answer, setup),
	    cmocka_unit_test_setup(test_first_byte_dropped, setup),
	    cmocka_unit_test_setup(test_resync_behind_late_bytes, setup),
	    cmocka_unit_test_setup(test_out_of_step, setup),
	    cmocka_unit_test_setup(test_short_read_brings_a_check, setup),
	    cmocka_unit_test_setup(test_bad_stats, setup),
	    cmocka_unit_test_setup(test_bad_stats_that_stay, setup),
	    cmocka_unit_test_setup(test_silent, setup),
	    cmocka_unit_test_setup(test_unplugged, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
