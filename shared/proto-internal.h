/* SPDX-License-Identifier: MIT */
/* The codec's tools, shared by proto.c (frames and messages) and report.c (the admin's report
 * rows): a bounds-checked cursor over a peer's payload and a writer into a checked buffer. */
#pragma once

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"

/* A source cannot honestly claim more than 8 bits of entropy per byte; in 1/1000 bit units. */
#define CLAIM_MBITS_MAX 8000

static inline bool roles_valid(unsigned roles)
{
	return roles != 0 && (roles & ~(unsigned)EB_ROLE_ALL) == 0;
}

/* Whether n bytes are text a peer may send: valid UTF-8 without control characters. */
bool eb_proto_text_valid(const uint8_t *p, size_t n);
/* The length of a text held in a char[max + 1], or -EINVAL when it is not terminated within
 * the array or is not valid text. */
int eb_proto_text_length(const char *s, size_t max, size_t *ret);

/* Reads a payload that a peer wrote: every take checks what is left first, so a short payload
 * becomes -EBADMSG and never a read past the end. */
struct cursor {
	const uint8_t *p;
	size_t left;
};

static inline int take(struct cursor *c, size_t n, const uint8_t **ret)
{
	if (c->left < n)
		return -EBADMSG;
	*ret = c->p;
	c->p += n;
	c->left -= n;
	return 0;
}

static inline int take_u8(struct cursor *c, uint8_t *ret)
{
	const uint8_t *p;
	int r;

	r = take(c, 1, &p);
	if (r < 0)
		return r;
	*ret = p[0];
	return 0;
}

static inline int take_be16(struct cursor *c, uint16_t *ret)
{
	const uint8_t *p;
	uint16_t v;
	int r;

	r = take(c, sizeof(v), &p);
	if (r < 0)
		return r;
	memcpy(&v, p, sizeof(v));
	*ret = be16toh(v);
	return 0;
}

static inline int take_be32(struct cursor *c, uint32_t *ret)
{
	const uint8_t *p;
	uint32_t v;
	int r;

	r = take(c, sizeof(v), &p);
	if (r < 0)
		return r;
	memcpy(&v, p, sizeof(v));
	*ret = be32toh(v);
	return 0;
}

static inline int take_be64(struct cursor *c, uint64_t *ret)
{
	const uint8_t *p;
	uint64_t v;
	int r;

	r = take(c, sizeof(v), &p);
	if (r < 0)
		return r;
	memcpy(&v, p, sizeof(v));
	*ret = be64toh(v);
	return 0;
}

/* Reserved bytes must be zero so that a later version can give them a meaning and know that an
 * older peer never sent anything there. */
static inline int take_zero(struct cursor *c, size_t n)
{
	const uint8_t *p;
	int r;

	r = take(c, n, &p);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return -EBADMSG;
	return 0;
}

/* A u16-length-prefixed text into a NUL-terminated buffer of max + 1 bytes. */
static inline int take_text(struct cursor *c, size_t max, char *ret)
{
	const uint8_t *p;
	uint16_t n;
	int r;

	r = take_be16(c, &n);
	if (r < 0)
		return r;
	if (n > max)
		return -EBADMSG;
	r = take(c, n, &p);
	if (r < 0)
		return r;
	if (!eb_proto_text_valid(p, n))
		return -EBADMSG;
	memcpy(ret, p, n);
	ret[n] = '\0';
	return 0;
}

/* Writes a payload whose size eb_msg_encode() has already checked against the buffer, so running
 * out of room here is our bug, not the peer's. */
struct writer {
	uint8_t *p;
	size_t left;
};

static inline void put(struct writer *w, const void *p, size_t n)
{
	assert(w->left >= n);
	if (n > 0)
		memcpy(w->p, p, n);
	w->p += n;
	w->left -= n;
}

static inline void put_u8(struct writer *w, uint8_t v)
{
	put(w, &v, sizeof(v));
}

static inline void put_be16(struct writer *w, uint16_t v)
{
	v = htobe16(v);
	put(w, &v, sizeof(v));
}

static inline void put_be32(struct writer *w, uint32_t v)
{
	v = htobe32(v);
	put(w, &v, sizeof(v));
}

static inline void put_be64(struct writer *w, uint64_t v)
{
	v = htobe64(v);
	put(w, &v, sizeof(v));
}

static inline void put_zero(struct writer *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put_u8(w, 0);
}

/* Lengths were validated before, so they fit the u16 prefix. */
static inline void put_text(struct writer *w, const char *s)
{
	size_t n = strlen(s);

	put_be16(w, (uint16_t)n);
	put(w, s, n);
}

/* report.c: REPORT_REQ and REPORT, called from the codec's three switches. */
int eb_report_msg_validate(const struct eb_msg *m, size_t *ret_size);
int eb_report_msg_decode(struct cursor *c, struct eb_msg *m);
void eb_report_msg_encode(struct writer *w, const struct eb_msg *m);
/* report-history.c: one row of the history table (report.h). */
struct eb_report_history_row;
int eb_report_history_take(struct cursor *c, struct eb_report_history_row *ret);
/* report-counters.c: one row of the counters table. */
struct eb_report_counter;
int eb_report_counter_take(struct cursor *c, struct eb_report_counter *ret);
/* proto-admin.c: ACTION_REQ, ACTION, STATE_REQ and STATE, called from the same switches. */
int eb_admin_msg_validate(const struct eb_msg *m, size_t *ret_size);
int eb_admin_msg_decode(struct cursor *c, struct eb_msg *m);
void eb_admin_msg_encode(struct writer *w, const struct eb_msg *m);
