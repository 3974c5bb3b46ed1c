/* SPDX-License-Identifier: MIT */
/* Replays fuzzer inputs without libFuzzer: each file named on the command line, or every file in
 * a named directory, is handed to LLVMFuzzerTestOneInput() once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "macro.h"

/* Far above what any fuzzer takes; it only keeps a stray file from eating memory. */
#define FILE_MAX (64 * 1024 * 1024)

static int run_file(int dirfd, const char *path, size_t *count)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ uint8_t *buf = NULL;
	struct stat st;
	size_t done = 0;

	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return negative_errno();
	if (fstat(fd, &st) < 0)
		return negative_errno();
	if (!S_ISREG(st.st_mode))
		return -EISDIR;
	if (st.st_size > FILE_MAX)
		return -EFBIG;

	/* Exactly the file's size, so that a sanitizer sees any read past the end of the input. */
	buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
	if (!buf)
		return -ENOMEM;
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)n;
	}

	(void)LLVMFuzzerTestOneInput(buf, done);
	(*count)++;
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs a directory's regular files in name order, so that a failure is reproducible. */
static int run_dir(const char *path, size_t *count)
{
	_cleanup_close_ int dfd = -EBADF;
	int fd2;
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, allocated = 0;
	int r = 0;

	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	/* closedir() closes the fd it was given; keep dfd for openat(). */
	fd2 = dup(dfd);
	if (fd2 < 0)
		return negative_errno();
	d = fdopendir(fd2);
	if (!d) {
		r = negative_errno();
		safe_close(fd2);
		return r;
	}

	while ((errno = 0, de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == allocated) {
			size_t k = allocated ? 2 * allocated : 64;
			char **t = reallocarray(names, k, sizeof(*names));

			if (!t) {
				r = -ENOMEM;
				break;
			}
			names = t;
			allocated = k;
		}
		names[n] = strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	if (r == 0 && errno != 0)
		r = negative_errno();
	closedir(d);

	if (r == 0 && n > 0)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = run_file(dfd, names[i], count);
		if (r < 0)
			fprintf(stderr, "%s/%s: %s\n", path, names[i], strerror(-r));
	}

	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

int main(int argc, char *argv[])
{
	size_t count = 0;

	if (argc < 2) {
		fprintf(stderr, "Usage: %s FILE|DIRECTORY...\n", argv[0]);
		return 2;
	}

	for (int i = 1; i < argc; i++) {
		struct stat st;
		int r;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode))
			r = run_dir(argv[i], &count);
		else {
			r = run_file(AT_FDCWD, argv[i], &count);
			if (r < 0)
				fprintf(stderr, "%s: %s\n", argv[i], strerror(-r));
		}
		if (r < 0)
			return 1;
	}

	/* An empty corpus tests nothing; say so rather than pass. */
	if (count == 0) {
		fprintf(stderr, "No inputs found.\n");
		return 1;
	}
	printf("Replayed %zu inputs.\n", count);
	return 0;
}
