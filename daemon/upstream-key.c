/* SPDX-License-Identifier: MIT */
/* [upstream]'s key: the one the thread was given, and whether a reload brings another. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "conf.h"
#include "key.h"
#include "macro.h"
#include "upstream-internal.h"
#include "upstream.h"
#include "uri.h"

int up_key_init(struct up_key *k, const struct eb_conf_upstream *c)
{
	_cleanup_free_ char *path = c->key_file ? NULL : eb_key_default_path();
	int r;

	*k = (struct up_key){};
	for (unsigned i = 0; i < c->n_brokers; i++) {
		struct eb_uri uri;

		if (eb_uri_parse(c->brokers[i], &uri) >= 0 && eb_uri_is_tls(&uri) > 0)
			k->tls = true;
	}
	if (!k->tls)
		return 0;
	/* The client loaded it just now; kept to tell whether a reload brings another. */
	r = eb_key_load(c->key_file ? c->key_file : path, k->key);
	if (r < 0)
		return r;
	snprintf(k->id, sizeof(k->id), "%s", c->key_id ? c->key_id : "");
	return 0;
}

bool upstream_same_peer(const struct eb_conf_upstream *a, const struct eb_conf_upstream *b)
{
	bool same = a->n_brokers == b->n_brokers &&
	            (a->user == b->user || (a->user && b->user && strcmp(a->user, b->user) == 0));

	for (unsigned i = 0; same && i < a->n_brokers; i++)
		same = strcmp(a->brokers[i], b->brokers[i]) == 0;
	return same;
}

int upstream_key_check(const struct upstream *u, const struct eb_conf_upstream *old,
                       const struct eb_conf_upstream *new, struct upstream_key *ret,
                       char **ret_error)
{
	const struct up_key *cur = u ? upstream_key(u) : NULL;
	_cleanup_free_ char *default_path = NULL;
	const char *path = new->key_file;
	int r;

	*ret = (struct upstream_key){};
	/* A section added or removed, another broker= or user=: no key is staged (the first two
	 * wait for a restart or stop the drawing; broker-config.c says which). */
	if (!cur || !cur->tls || !old->set || !new->set || !upstream_same_peer(old, new))
		return 0;
	if (!path) {
		default_path = eb_key_default_path();
		path = default_path;
	}
	if (!path) {
		*ret_error = strdup("[upstream]: no key-file= and no credential eb.key");
		return -ENOKEY;
	}
	r = eb_key_load(path, ret->key);
	if (r < 0) {
		_cleanup_free_ char *why = eb_key_describe_error(path, r);

		if (asprintf(ret_error, "[upstream]: %s", why ? why : "key file unreadable") < 0)
			*ret_error = NULL;
		return r;
	}
	snprintf(ret->key_id, sizeof(ret->key_id), "%s", new->key_id ? new->key_id : "");
	snprintf(ret->path, sizeof(ret->path), "%s", path);
	/* The same id and bytes: nothing to stage, whatever the file is called. */
	ret->change = strcmp(ret->key_id, cur->id) != 0 ||
	              CRYPTO_memcmp(ret->key, cur->key, EB_KEY_SIZE) != 0;
	if (!ret->change)
		explicit_bzero(ret->key, sizeof(ret->key));
	return 0;
}
