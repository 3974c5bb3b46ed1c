/* SPDX-License-Identifier: MIT */
#include "kernel-reseed.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "io.h"
#include "kernel.h"
#include "log.h"
#include "macro.h"

/* systemd-random-seed (systemd 252, src/random-seed/random-seed.c) credits a seed file only when
 * it carries this mark, the one it sets itself on a seed it drew from an initialised CRNG. */
#define SEED_CREDITABLE_XATTR "user.random-seed-creditable"

/* The seed file's mark, set on the new file before it is made durable: a file system without
 * user xattrs (tmpfs before Linux 6.6) keeps the seed unmarked, as systemd itself does there:
 * the next boot mixes it in without credit. Any other refusal is the step's failure. */
static int mark_creditable(int fd, const char *path)
{
	if (fsetxattr(fd, SEED_CREDITABLE_XATTR, "1", 1, 0) >= 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return negative_errno();
	log_debug("%s: the file system keeps no user xattrs; the seed is not marked creditable",
	          path);
	return 0;
}

/* A seed file a later boot would reuse: what it held is what the copies share, so it is
 * replaced by bytes of the CRNG that has just taken the broker's bits. One that does not exist is
 * left so (nothing would reuse it). 1: rewritten, 0: absent.
 *
 * The new file is marked creditable: it is written only after the broker's authenticated bits
 * went in and RNDRESEEDCRNG made the CRNG take them, so its bytes are this copy's alone, drawn
 * from an initialised CRNG, which is what systemd's own mark says (docs/decisions.md). */
static int rewrite_seed_file(const char *path)
{
	uint8_t buf[EB_RESEED_SEED_MAX];
	struct stat st;
	size_t len;
	ssize_t k;
	int r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	len = st.st_size < EB_RESEED_SEED_MIN   ? EB_RESEED_SEED_MIN
	      : st.st_size > EB_RESEED_SEED_MAX ? EB_RESEED_SEED_MAX
	                                        : (size_t)st.st_size;
	k = getrandom(buf, len, GRND_NONBLOCK);
	if (k != (ssize_t)len) {
		r = k < 0 ? negative_errno() : -EIO;
		explicit_bzero(buf, sizeof(buf)); /* a short read leaves part of a seed */
		return r;
	}
	r = eb_replace_file(path, &(struct iovec){buf, len}, 1, mark_creditable);
	explicit_bzero(buf, sizeof(buf));
	return r < 0 ? r : 1;
}

/* The generation in path: 0 when it does not exist; -EBADMSG for anything but a number this
 * program would have written. */
static int read_generation(const char *path, uint64_t *ret)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[EB_RESEED_GENERATION_MAX_LEN + 1], *end;
	unsigned long long v;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno != ENOENT)
			return negative_errno();
		*ret = 0;
		return 0;
	}
	n = eb_read_all(fd, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (n == 0 || n > EB_RESEED_GENERATION_MAX_LEN || buf[0] < '0' || buf[0] > '9')
		return -EBADMSG;
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno != 0 || (*end != '\0' && strcmp(end, "\n") != 0) || v == UINT64_MAX)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int bump_generation(const char *path, uint64_t *ret)
{
	_cleanup_free_ char *dir = NULL;
	const char *slash = strrchr(path, '/');
	char text[32];
	uint64_t g = 0;
	int r, n;

	/* Its directory is under /run, made anew at each boot: made here when it is missing. */
	if (slash && slash != path) {
		dir = strndup(path, (size_t)(slash - path));
		if (!dir)
			return -ENOMEM;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return negative_errno();
	}
	r = read_generation(path, &g);
	if (r < 0)
		return r;
	n = snprintf(text, sizeof(text), "%" PRIu64 "\n", g + 1);
	r = eb_replace_file(path, &(struct iovec){text, (size_t)n}, 1, NULL);
	if (r < 0)
		return r;
	/* Readable by every application that reseeds its own generator after the kernel. */
	if (chmod(path, 0644) < 0)
		return negative_errno();
	*ret = g + 1;
	return 0;
}

int kernel_reseed_finish(int fd, const char *const *seed_files, size_t n_seed_files,
                         const char *generation_file, uint64_t *ret_generation,
                         const char **ret_step)
{
	uint64_t g = 0;
	int r;

	r = eb_kernel_reseed(fd);
	if (r < 0) {
		*ret_step = "RNDRESEEDCRNG";
		return r;
	}
	for (size_t i = 0; i < n_seed_files; i++) {
		r = rewrite_seed_file(seed_files[i]);
		if (r < 0) {
			*ret_step = "seed file";
			return log_debug_errno(r, "Failed to rewrite %s: %m", seed_files[i]);
		}
		log_debug("%s %s", r > 0 ? "Rewrote" : "No seed file at", seed_files[i]);
	}
	r = bump_generation(generation_file, &g);
	if (r < 0) {
		*ret_step = "generation";
		return r;
	}
	*ret_generation = g;
	return 0;
}

bool kernel_reseed_is_fork_record(const char *record, size_t len)
{
	static const char prefix[] = "random: ", text[] = EB_RESEED_FORK_TEXT;
	const char *semi = memchr(record, ';', len), *end;
	size_t n;

	if (!semi)
		return false;
	semi++;
	/* The record's text ends at its first newline; what follows is its key=value lines. */
	end = memchr(semi, '\n', len - (size_t)(semi - record));
	n = end ? (size_t)(end - semi) : len - (size_t)(semi - record);
	return n >= sizeof(prefix) - 1 + sizeof(text) - 1 &&
	       memcmp(semi, prefix, sizeof(prefix) - 1) == 0 &&
	       memmem(semi, n, text, sizeof(text) - 1) != NULL;
}
