/* SPDX-License-Identifier: MIT */
/* The broker's seed file: "EBSEED1\n", u32 BE credit bits, u32 BE length, then length bytes. */
#include "seedfile.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"
#include "macro.h"
#include "pool.h"

#define SEED_MAGIC     "EBSEED1\n"
#define SEED_MAGIC_LEN (sizeof(SEED_MAGIC) - 1)
#define SEED_HEADER    (SEED_MAGIC_LEN + 4 + 4)
/* A drained pool of the default 1 Mibit is 128 KiB; the cap keeps a stop and a start quick
 * even with a huge pool, and bounds what a corrupted or hostile file makes us read. */
#define SEED_DATA_MAX (16u << 20)
/* Uncredited filler: one SHA-512 block's worth, as systemd-random-seed keeps a few hundred bits. */
#define SEED_FRESH 64

/* A heap buffer wiped when it goes out of scope: it holds pool content. */
struct secret {
	uint8_t *p;
	size_t n;
};

static void secret_done(struct secret *s)
{
	if (s->p) {
		explicit_bzero(s->p, s->n);
		free(s->p);
	}
}

static int secret_alloc(struct secret *s, size_t n)
{
	s->p = malloc(MAX(n, (size_t)1));
	if (!s->p)
		return -ENOMEM;
	s->n = n;
	return 0;
}

/* Writes a complete file next to path and renames it over path, so that a crash leaves either the
 * old file or the new one, never a torn one; the fsyncs make the rename itself durable before the
 * caller relies on it (load credits only after this returns). */
static int write_atomic(const char *path, uint64_t credit_bits, const uint8_t *data, size_t len)
{
	uint8_t header[SEED_HEADER];
	const struct iovec iov[] = {{header, sizeof(header)}, {(void *)data, len}};
	uint32_t be;

	assert(len <= SEED_DATA_MAX);
	assert(credit_bits <= 8 * (uint64_t)len);

	memcpy(header, SEED_MAGIC, SEED_MAGIC_LEN);
	be = htobe32((uint32_t)credit_bits);
	memcpy(header + SEED_MAGIC_LEN, &be, 4);
	be = htobe32((uint32_t)len);
	memcpy(header + SEED_MAGIC_LEN + 4, &be, 4);
	return eb_replace_file(path, iov, ELEMENTSOF(iov), NULL);
}

/* Uncredited bytes for a file that must exist but carries no credit. The periodic save passes the
 * pool, whose DRBG output depends on pool entropy once a DRBG-mode request has seeded it; the save
 * never spends a block on a seed or reseed of its own (those are rationed and charged to the
 * sinks that draw). Load passes NULL because the pool must not be drawn on before the file's own
 * content is in. Otherwise the kernel's CRNG stands in, without blocking, and an empty uncredited
 * file is still a valid one: returns how many bytes it wrote. */
static size_t fresh_bytes(struct eb_pool *pool, uint8_t *buf, size_t len)
{
	ssize_t k;

	if (pool && eb_pool_take_drbg(pool, buf, len, false) >= 0)
		return len;
	k = getrandom(buf, len, GRND_NONBLOCK);
	return k == (ssize_t)len ? len : 0;
}

static int write_uncredited(const char *path, struct eb_pool *pool)
{
	uint8_t buf[SEED_FRESH];
	size_t n = fresh_bytes(pool, buf, sizeof(buf));
	int r;

	r = write_atomic(path, 0, buf, n);
	explicit_bzero(buf, sizeof(buf));
	return r;
}

int eb_seedfile_save(const char *path, struct eb_pool *pool, bool drain, uint64_t *ret_bits)
{
	_cleanup_(secret_done) struct secret s = {};
	uint64_t bits = 0;
	size_t n;
	int r;

	assert(path);
	assert(pool);

	if (!path[0])
		return -EINVAL;
	if (!drain || eb_pool_level(pool) == 0) {
		r = write_uncredited(path, pool);
		if (r < 0)
			return r;
		if (ret_bits)
			*ret_bits = 0;
		return 0;
	}

	r = secret_alloc(&s, (size_t)MIN(eb_pool_level(pool) / 8, (uint64_t)SEED_DATA_MAX));
	if (r < 0)
		return r;
	/* Export moves the blocks out: should the write fail they are lost, never counted twice. */
	n = eb_pool_export(pool, s.p, s.n, &bits);
	r = write_atomic(path, bits, s.p, n);
	if (r < 0)
		return r;
	if (ret_bits)
		*ret_bits = bits;
	return 0;
}

/* Exactly len bytes: a file that shrank under us is no seed file. */
static int read_exactly(int fd, uint8_t *buf, size_t len)
{
	ssize_t k = eb_read_all(fd, buf, len);

	if (k < 0)
		return (int)k;
	return (size_t)k == len ? 0 : -EBADMSG;
}

/* Checks the header and returns the credit the file claims, capped at 8 bits a byte. */
static int parse(const uint8_t *buf, size_t size, uint64_t *ret_credit)
{
	uint32_t credit, len;

	if (size < SEED_HEADER || memcmp(buf, SEED_MAGIC, SEED_MAGIC_LEN) != 0)
		return -EBADMSG;
	memcpy(&credit, buf + SEED_MAGIC_LEN, 4);
	memcpy(&len, buf + SEED_MAGIC_LEN + 4, 4);
	credit = be32toh(credit);
	len = be32toh(len);
	if (len != size - SEED_HEADER)
		return -EBADMSG;
	*ret_credit = MIN((uint64_t)credit, 8 * (uint64_t)len);
	return 0;
}

int eb_seedfile_load(const char *path, struct eb_pool *pool, bool credit, uint64_t *ret_credited)
{
	_cleanup_(secret_done) struct secret s = {};
	_cleanup_close_ int fd = -EBADF;
	uint64_t claim = 0, credited = 0;
	struct stat st;
	int r, bad;

	assert(path);
	assert(pool);

	if (!path[0])
		return -EINVAL;
	/* O_NONBLOCK so that a FIFO in the file's place cannot stall start-up (with SIGTERM
	 * blocked, as the broker has it by then) before fstat() sees what it is. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();

	bad = 0;
	if (!S_ISREG(st.st_mode) || st.st_size < 0 ||
	    (uint64_t)st.st_size > SEED_HEADER + (uint64_t)SEED_DATA_MAX) {
		bad = -EBADMSG;
	} else {
		r = secret_alloc(&s, (size_t)st.st_size);
		if (r < 0)
			return r;
		r = read_exactly(fd, s.p, s.n);
		if (r < 0 && r != -EBADMSG)
			return r;
		bad = r < 0 ? r : parse(s.p, s.n, &claim);
	}
	fd = safe_close(fd);

	/* Credit a file only if nobody else could have read it: its bits must be secret. */
	if (st.st_uid != geteuid() || (st.st_mode & 0077) != 0)
		claim = 0;

	/* Replace the file before crediting its content: if we crash after this point the next
	 * start finds an uncredited file, and if the replacement fails nothing is credited, so a
	 * crash loop can never count the same seed twice. */
	r = write_uncredited(path, NULL);
	if (r < 0)
		claim = 0;

	if (bad == 0) {
		const uint8_t *data = s.p + SEED_HEADER;
		size_t len = s.n - SEED_HEADER, used = 0;
		int k;

		if (!credit)
			claim = 0;
		if (claim > 0 && claim == 8 * (uint64_t)len) {
			/* Full-entropy blocks from eb_pool_export(): back into the ring as they
			 * are, so that a stop and a start keep the level. */
			used = eb_pool_restore(pool, data, len, &credited);
		} else if (claim > 0) {
			/* Anything else is conditioned like a source's input. */
			k = eb_pool_add(pool, data, len, claim, &credited);
			if (k < 0)
				return k;
			used = len;
		}
		/* What earned no credit (no room, or none asked) still goes to the DRBGs. */
		if (used < len) {
			k = eb_pool_add(pool, data + used, len - used, 0, NULL);
			if (k < 0)
				return k;
		}
	} else if (s.p) {
		/* A damaged file may still hold entropy: the DRBGs get it, without credit. */
		(void)eb_pool_add(pool, s.p, s.n, 0, NULL);
	}
	if (bad < 0)
		return bad;
	if (r < 0)
		return r;
	if (ret_credited)
		*ret_credited = credited;
	return 0;
}
