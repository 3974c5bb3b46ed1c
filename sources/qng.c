/* SPDX-License-Identifier: MIT */
/* ComScire QNG protocol over libftdi: start, stop, the delimiter, the status word. */
#include "qng.h"

#include <errno.h>
#include <ftdi.h>
#include <libusb.h>
#include <string.h>

#include "log.h"
#include "macro.h"

/* libftdi returns libusb's codes from a read, -666 for a context with no device, and -1 for a
 * failed write whatever the cause; the caller tells an unplugged device from a failed write. */
static int ftdi_errno(int r)
{
	if (r == LIBUSB_ERROR_NO_DEVICE || r == -666)
		return -ENODEV;
	if (r == LIBUSB_ERROR_TIMEOUT)
		return -ETIMEDOUT;
	return -EIO;
}

static int command(struct qng *q, uint8_t cmd)
{
	int r = ftdi_write_data(q->ftdi, &cmd, 1);

	if (r == 1)
		return 0;
	log_debug("Command 0x%02x not sent: %s", cmd, ftdi_get_error_string(q->ftdi));
	return r < 0 ? ftdi_errno(r) : -EIO;
}

/* One read of up to n bytes: the count, 0 when nothing came within the chip's latency or the
 * transfer's timeout, or a negative errno. */
static ssize_t read_some(struct qng *q, uint8_t *buf, size_t n)
{
	int r = ftdi_read_data(q->ftdi, buf, (int)MIN(n, (size_t)INT32_MAX));

	if (r == LIBUSB_ERROR_TIMEOUT)
		return 0;
	if (r < 0) {
		log_debug("Read failed: %s", ftdi_get_error_string(q->ftdi));
		return ftdi_errno(r);
	}
	return MIN((size_t)r, n);
}

/* Reads exactly n bytes, or fewer when the device falls silent. */
static ssize_t read_exact(struct qng *q, uint8_t *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = read_some(q, buf + got, n - got);

		if (k <= 0)
			return k < 0 ? k : (ssize_t)got;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* After STOP: empties the chip's buffer and libftdi's, then reads what was still on its way until
 * a read comes back short (the device has been quiet for a latency period). */
static int drain(struct qng *q)
{
	uint8_t buf[512];
	size_t total = 0;
	ssize_t k;
	int r;

	r = ftdi_tciflush(q->ftdi);
	if (r < 0)
		return ftdi_errno(r);
	do {
		k = read_some(q, buf, sizeof(buf));
		if (k < 0)
			return (int)k;
		total += (size_t)k;
		if (total > QNG_DRAIN_MAX)
			return log_debug_errno(EPROTO, "Still streaming after %zu bytes since STOP",
			                       total);
	} while ((size_t)k == sizeof(buf));
	explicit_bzero(buf, sizeof(buf));
	q->stragglers += total;
	return 0;
}

/* After the delimiter command: reads until what arrived ends with the delimiter, skipping the
 * stream bytes ahead of it. -EAGAIN when it did not come within QNG_SYNC_WINDOW bytes. */
static int find_delimiter(struct qng *q)
{
	uint8_t win[QNG_SYNC_WINDOW];
	size_t n = 0;

	while (n < sizeof(win)) {
		/* The delimiter's length first, then a byte at a time: nothing past the delimiter
		 * is taken, so the next command's answer is read whole. */
		size_t want = n < QNG_DELIMITER_LEN ? QNG_DELIMITER_LEN - n : 1;
		ssize_t k = read_some(q, win + n, want);

		if (k < 0)
			return (int)k;
		if (k == 0)
			break;
		n += (size_t)k;
		if (n >= QNG_DELIMITER_LEN &&
		    memcmp(win + n - QNG_DELIMITER_LEN, q->delimiter, QNG_DELIMITER_LEN) == 0) {
			q->stragglers += n - QNG_DELIMITER_LEN;
			explicit_bzero(win, n);
			return 0;
		}
	}
	explicit_bzero(win, n);
	log_debug("No delimiter in the %zu bytes after asking for it", n);
	return -EAGAIN;
}

/* With the device stopped and drained: the delimiter is whatever it answers twice in a row,
 * whole. -EAGAIN when the two answers differ or fall short. */
static int learn_delimiter(struct qng *q)
{
	uint8_t a[QNG_DELIMITER_LEN], b[QNG_DELIMITER_LEN];
	ssize_t k;
	int r;

	for (unsigned i = 0; i < 2; i++) {
		r = command(q, QNG_CMD_DELIMITER);
		if (r < 0)
			return r;
		k = read_exact(q, i == 0 ? a : b, QNG_DELIMITER_LEN);
		if (k < 0)
			return (int)k;
		if (k < (ssize_t)QNG_DELIMITER_LEN)
			return -EAGAIN;
	}
	if (memcmp(a, b, sizeof(a)) != 0)
		return -EAGAIN;
	memcpy(q->delimiter, a, sizeof(a));
	q->have_delimiter = true;
	return 0;
}

int qng_sync(struct qng *q)
{
	int r;

	for (unsigned attempt = 0; attempt < QNG_SYNC_ATTEMPTS; attempt++) {
		r = command(q, QNG_CMD_STOP);
		if (r < 0)
			return r;
		q->streaming = false;
		r = drain(q);
		if (r < 0)
			return r;
		if (!q->have_delimiter)
			r = learn_delimiter(q);
		else {
			r = command(q, QNG_CMD_DELIMITER);
			if (r < 0)
				return r;
			r = find_delimiter(q);
		}
		if (r != -EAGAIN)
			return r;
	}
	return -EPROTO;
}

/* Resynchronises and reads the status word. 1 when it has the bad-statistics bit. */
static int check(struct qng *q, uint64_t now_ms)
{
	uint8_t w[QNG_STATUS_LEN];
	ssize_t k;
	int r;

	r = qng_sync(q);
	if (r < 0)
		return r;
	r = command(q, QNG_CMD_STATUS);
	if (r < 0)
		return r;
	k = read_exact(q, w, sizeof(w));
	if (k < 0)
		return (int)k;
	if (k < (ssize_t)sizeof(w))
		return log_debug_errno(EPROTO, "The status word came short (%zd of %zu bytes)", k,
		                       sizeof(w));
	q->status =
	    (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
	q->checked_ms = now_ms;
	if (!(q->status & QNG_STATUS_BAD_STATS))
		return 0;
	q->bad_stats++;
	q->clear_stats = true;
	log_debug("Status 0x%08x: bad statistics", q->status);
	return 1;
}

/* Starts the stream, after clearing the bad-statistics flag if the last status had it, and drops
 * its first byte, whose first bits the device always sends as zero. -EAGAIN when not even that
 * byte came. */
static int start(struct qng *q)
{
	uint8_t first;
	ssize_t k;
	int r;

	if (q->clear_stats) {
		r = command(q, QNG_CMD_CLEAR_STATS);
		if (r < 0)
			return r;
		q->clear_stats = false;
	}
	r = command(q, QNG_CMD_START);
	if (r < 0)
		return r;
	k = read_some(q, &first, 1);
	if (k < 0)
		return (int)k;
	if (k == 0)
		return -EAGAIN;
	first = 0;
	q->discarded++;
	q->streaming = true;
	return 0;
}

int qng_setup(struct qng *q, struct ftdi_context *ftdi, unsigned read_chunk)
{
	int r;

	*q = (struct qng){.ftdi = ftdi};
	if (ftdi_read_data_set_chunksize(ftdi, read_chunk) < 0 ||
	    ftdi_set_latency_timer(ftdi, QNG_LATENCY_MS) < 0)
		return log_debug_errno(EIO, "Chip settings refused: %s",
		                       ftdi_get_error_string(ftdi));
	ftdi->usb_read_timeout = QNG_READ_TIMEOUT_MS;
	r = ftdi_tcioflush(ftdi);
	if (r < 0)
		return ftdi_errno(r);
	return qng_sync(q);
}

ssize_t qng_read(struct qng *q, uint8_t *buf, size_t n, uint64_t now_ms, bool *ret_bad_stats)
{
	ssize_t k;
	int r;

	*ret_bad_stats = false;
	for (;;) {
		if (q->check_due || now_ms - q->checked_ms >= QNG_CHECK_MS) {
			r = check(q, now_ms);
			if (r < 0)
				return r;
			q->check_due = false;
			if (r > 0) {
				/* The device's silence, if it was silent, is explained. */
				q->silent = 0;
				*ret_bad_stats = true;
				return 0;
			}
		}
		if (!q->streaming) {
			r = start(q);
			if (r < 0 && r != -EAGAIN)
				return r;
		}
		k = q->streaming ? read_some(q, buf, n) : 0;
		if (k < 0)
			return k;
		if (k == 0) {
			/* As the vendor's library does: a read that brings nothing is a timeout,
			 * and the status says whether the device stopped for failing its tests. */
			if (++q->silent > QNG_SILENT_MAX)
				return -ETIMEDOUT;
			q->check_due = true;
			continue;
		}
		q->silent = 0;
		if ((size_t)k < n)
			q->check_due = true;
		return k;
	}
}

void qng_stop(struct qng *q)
{
	if (command(q, QNG_CMD_STOP) < 0)
		log_debug("Could not stop the device, ignoring");
	q->streaming = false;
}
