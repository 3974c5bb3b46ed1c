/* SPDX-License-Identifier: MIT */
#include "confdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

struct entry {
	char *name; /* the file name, which orders and masks */
	char *path;
};

static void entries_free(struct entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].path);
	}
	free(e);
}

static bool is_dropin(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".conf") == 0;
}

/* Adds dir's drop-ins to *e, a later directory's file replacing an earlier one's of the same name.
 */
static int scan(const char *dir, struct entry **e, size_t *n)
{
	DIR *d;
	struct dirent *de;
	int r = 0;

	d = opendir(dir);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : negative_errno();
	while ((errno = 0, de = readdir(d))) {
		struct entry *x;
		size_t i;

		if (!is_dropin(de->d_name))
			continue;
		for (i = 0; i < *n && strcmp((*e)[i].name, de->d_name) != 0; i++)
			;
		if (i == *n) {
			struct entry *t;

			if (*n >= EB_CONFDIR_FILES_MAX) {
				r = -E2BIG;
				break;
			}
			t = reallocarray(*e, *n + 1, sizeof(**e));
			if (!t) {
				r = -ENOMEM;
				break;
			}
			*e = t;
			(*e)[(*n)++] = (struct entry){};
		}
		/* A new entry gets its name; one seen in an earlier directory keeps it and gets
		 * this directory's path. On failure the half-made entry is freed with the rest. */
		x = &(*e)[i];
		free(x->path);
		x->path = NULL;
		if ((!x->name && !(x->name = strdup(de->d_name))) ||
		    asprintf(&x->path, "%s/%s", dir, de->d_name) < 0) {
			x->path = NULL;
			r = -ENOMEM;
			break;
		}
	}
	if (r == 0 && errno != 0)
		r = negative_errno();
	closedir(d);
	return r;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

int eb_confdir_list(const char *const *dirs, unsigned n_dirs, char ***ret, unsigned *ret_n)
{
	struct entry *e = NULL;
	size_t n = 0;
	char **paths;
	int r;

	for (unsigned i = 0; i < n_dirs; i++) {
		r = scan(dirs[i], &e, &n);
		if (r < 0) {
			entries_free(e, n);
			return r;
		}
	}
	if (n > 0)
		qsort(e, n, sizeof(*e), by_name);
	paths = calloc(n + 1, sizeof(*paths));
	if (!paths) {
		entries_free(e, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		paths[i] = e[i].path;
		e[i].path = NULL;
	}
	entries_free(e, n);
	*ret = paths;
	*ret_n = (unsigned)n;
	return 0;
}

char **eb_confdir_free(char **paths)
{
	if (paths)
		for (char **p = paths; *p; p++)
			free(*p);
	free(paths);
	return NULL;
}
