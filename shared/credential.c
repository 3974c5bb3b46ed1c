/* SPDX-License-Identifier: MIT */
#include "credential.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

/* A credential word is a name, never a paragraph: longer lines are refused, not cut. */
#define WORD_MAX 256

char *eb_credential_path(const char *name)
{
	const char *d = getenv("CREDENTIALS_DIRECTORY");
	char *p;

	if (!d || d[0] != '/')
		return NULL;
	if (asprintf(&p, "%s/%s", d, name) < 0)
		return NULL;
	return p;
}

int eb_credential_read_word(const char *name, char *buf, size_t size)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_fclose_ FILE *f = NULL;
	char line[WORD_MAX + 2];
	size_t n;

	if (!getenv("CREDENTIALS_DIRECTORY"))
		return 0;
	path = eb_credential_path(name);
	if (!path)
		return getenv("CREDENTIALS_DIRECTORY")[0] == '/' ? -ENOMEM : 0;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : negative_errno();
	if (!fgets(line, sizeof(line), f))
		return -EBADMSG;
	n = strcspn(line, "\n");
	if (n == 0 || n + 1 > size || n > WORD_MAX)
		return -EBADMSG;
	line[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] <= ' ' || (unsigned char)line[i] >= 0x7f)
			return -EBADMSG;
	memcpy(buf, line, n + 1);
	return 1;
}
