/* SPDX-License-Identifier: MIT */
/* The users' keys: key-file= and key = ID PATH read into struct eb_user_key, the key files
 * loaded, and the key a TLS identity names found. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-internal.h"
#include "conf.h"
#include "key.h"
#include "macro.h"

#define USER_NAME_MAX 64

/* One more key for the current user: id NULL for key-file='s, which goes first, as the user's
 * default key; the others follow in the order of their lines. */
static int add_user_key(struct conf_ctx *c, const char *id, size_t id_len, const char *path)
{
	struct eb_user *u = &c->conf->users[c->user];
	struct eb_user_key k = {};
	unsigned at = id ? u->n_keys : 0;

	if (u->n_keys >= EB_USER_KEYS_MAX) {
		c->reason = "too many keys for one user (at most 8)";
		return -E2BIG;
	}
	for (unsigned i = 0; id && i < u->n_keys; i++)
		if (u->keys[i].id && strlen(u->keys[i].id) == id_len &&
		    strncmp(u->keys[i].id, id, id_len) == 0) {
			c->reason = "the user has a key of that id already";
			return -EEXIST;
		}
	if ((id && !(k.id = strndup(id, id_len))) || !(k.file = strdup(path)) ||
	    asprintf(&k.origin, "%s:%u", c->ini.files[c->ini.file], c->ini.line) < 0) {
		free(k.id);
		free(k.file);
		return -ENOMEM;
	}
	memmove(&u->keys[at + 1], &u->keys[at], (u->n_keys - at) * sizeof(u->keys[0]));
	u->keys[at] = k;
	u->n_keys++;
	return 0;
}

int conf_parse_user_key_file(struct conf_ctx *c, const char *value, void *field)
{
	(void)field;
	if (value[0] != '/')
		return -EINVAL;
	return add_user_key(c, NULL, 0, value);
}

/* key = ID PATH */
int conf_parse_user_key(struct conf_ctx *c, const char *value, void *field)
{
	size_t n = strcspn(value, " \t");
	const char *path = value + n + strspn(value + n, " \t");
	char id[EB_KEY_ID_MAX + 1];

	(void)field;
	if (n == 0 || n > EB_KEY_ID_MAX || path[0] != '/')
		return -EINVAL;
	memcpy(id, value, n);
	id[n] = '\0';
	if (!eb_key_id_valid(id))
		return -EINVAL;
	return add_user_key(c, id, n, path);
}

/* Appends "line\n" to *all; false when out of memory. */
static bool append_line(char **all, const char *line)
{
	char *t;

	if (asprintf(&t, "%s%s\n", *all ? *all : "", line) < 0)
		return false;
	free(*all);
	*all = t;
	return true;
}

int eb_conf_load_keys(struct eb_conf *conf, char **ret_error)
{
	_cleanup_free_ char *all = NULL;
	int r = 0;

	if (!conf)
		return -EINVAL;

	/* Every key is tried, so that one run names every file that is wrong. */
	for (unsigned i = 0; i < conf->n_users && r != -ENOMEM; i++)
		for (unsigned j = 0; j < conf->users[i].n_keys; j++) {
			const struct eb_user *u = &conf->users[i];
			struct eb_user_key *key = &conf->users[i].keys[j];
			_cleanup_free_ char *msg = NULL;
			const char *where;
			char *why;
			int k;

			k = eb_key_load(key->file, key->key);
			if (k >= 0) {
				key->loaded = true;
				continue;
			}
			if (r >= 0 || k == -ENOMEM)
				r = k;
			if (k == -ENOMEM)
				break;
			where = key->origin  ? key->origin
			        : conf->path ? conf->path
			                     : "configuration";
			why = eb_key_describe_error(key->file, k);
			if (why && asprintf(&msg, "%s: [user %s]: %s", where, u->name, why) < 0)
				msg = NULL;
			free(why);
			if (!msg || !append_line(&all, msg)) {
				r = -ENOMEM;
				break;
			}
		}
	if (r >= 0)
		return 0;
	if (r == -ENOMEM) {
		free(all);
		all = NULL;
	}
	if (all)
		all[strlen(all) - 1] = '\0'; /* the last line's '\n' */
	if (ret_error)
		*ret_error = TAKE_PTR(all);
	return r;
}

const struct eb_user_key *eb_user_key_by_serial(const struct eb_user *u, uint64_t serial)
{
	for (unsigned i = 0; serial && i < u->n_keys; i++)
		if (u->keys[i].serial == serial)
			return &u->keys[i];
	return NULL;
}

const struct eb_user_key *eb_conf_find_key(const struct eb_conf *conf, const char *identity,
                                           const struct eb_user **ret_user)
{
	const char *slash = identity ? strchr(identity, '/') : NULL;
	size_t n = slash ? (size_t)(slash - identity) : identity ? strlen(identity) : 0;
	const struct eb_user_key *k = NULL;
	const struct eb_user *u;
	char name[USER_NAME_MAX + 1];

	if (n == 0 || n > USER_NAME_MAX)
		return NULL;
	memcpy(name, identity, n);
	name[n] = '\0';
	u = eb_conf_find_user(conf, name);
	if (!u || u->n_keys == 0)
		return NULL;
	if (!slash)
		k = &u->keys[0];
	for (unsigned i = 0; slash && i < u->n_keys && !k; i++)
		if (u->keys[i].id && strcmp(u->keys[i].id, slash + 1) == 0)
			k = &u->keys[i];
	if (!k || !k->loaded)
		return NULL;
	*ret_user = u;
	return k;
}
