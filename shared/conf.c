/* SPDX-License-Identifier: MIT */
/* The configuration files into struct eb_conf: sections and users, what spans keys, the keys. */
#include "conf.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "conf-internal.h"
#include "inifile.h"
#include "key.h"
#include "macro.h"

#define DEFAULT_CAPACITY_BITS  UINT64_C(1048576)
#define DEFAULT_LOW_WATER_PCT  25
#define DEFAULT_HIGH_WATER_PCT 90
#define DEFAULT_SEED_FILE      "/var/lib/entropy-broker/seed"
#define DEFAULT_SEED_SAVE_S    600
#define DEFAULT_STATUS_S       60
#define DEFAULT_MAX_SESSIONS   1024
#define DEFAULT_MAX_LOCAL      256
#define DEFAULT_MAX_HANDSHAKES 64
#define DEFAULT_MAX_LINGERING  64
#define DEFAULT_MAX_PER_ADDR   8
#define DEFAULT_HELLO_S        10
#define DEFAULT_FRAME_S        30
#define DEFAULT_USER_SESSIONS  128
#define DEFAULT_MAX_CREDIT     8
#define USER_NAME_MAX          64
#define DEFAULT_UPSTREAM_LOW   50
#define DEFAULT_UPSTREAM_DRAW  UINT64_C(65536)

bool eb_conf_user_name_valid(const char *s, size_t n)
{
	if (n == 0 || n > USER_NAME_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-'))
			return false;
	}
	return true;
}

/* Frees what a user holds and wipes its keys; the struct is left for reuse. */
static void user_clear(struct eb_user *u)
{
	for (unsigned i = 0; i < u->n_keys; i++) {
		explicit_bzero(u->keys[i].key, sizeof(u->keys[i].key));
		free(u->keys[i].id);
		free(u->keys[i].file);
		free(u->keys[i].origin);
	}
	free(u->name);
	*u = (struct eb_user){};
}

/* A user of the same name in an earlier file is replaced whole by this section: a drop-in or the
 * main file redefines a user, it does not patch it. In the same file it is an error. */
static int add_user(struct conf_ctx *c, const char *name, size_t n)
{
	struct eb_conf *conf = c->conf;
	struct eb_user *users;
	struct eb_ini_place *places;
	char *copy;
	unsigned i;

	for (i = 0; i < conf->n_users; i++)
		if (strlen(conf->users[i].name) == n && strncmp(conf->users[i].name, name, n) == 0)
			break;
	if (i < conf->n_users && c->user_places[i].file == c->ini.file)
		return eb_ini_error(&c->ini,
		                    "duplicate section [user %s], first defined on line %u",
		                    conf->users[i].name, c->user_places[i].line);
	if (i == conf->n_users && conf->n_users >= EB_CONF_USERS_MAX)
		return eb_ini_error(&c->ini, "too many users (at most %u)", EB_CONF_USERS_MAX);

	copy = strndup(name, n);
	if (!copy)
		return -ENOMEM;
	if (i < conf->n_users) {
		user_clear(&conf->users[i]);
	} else {
		users = reallocarray(conf->users, conf->n_users + 1, sizeof(*users));
		if (!users)
			goto oom;
		conf->users = users;
		places = reallocarray(c->user_places, conf->n_users + 1, sizeof(*places));
		if (!places)
			goto oom;
		c->user_places = places;
		conf->n_users++;
	}
	conf->users[i] = (struct eb_user){
	    .name = copy,
	    .max_credit_per_byte = DEFAULT_MAX_CREDIT,
	    .max_sessions = DEFAULT_USER_SESSIONS,
	};
	c->user_places[i] = eb_ini_here(&c->ini);
	c->user = i;
	return 0;
oom:
	free(copy);
	return -ENOMEM;
}

/* A new file: its own [broker] and keys may come again, overriding the files before. */
static void begin_file(struct eb_ini *ini, void *userdata)
{
	struct conf_ctx *c = userdata;

	(void)ini;
	c->broker_line = 0;
	c->upstream_line = 0;
	c->section = CONF_SECTION_NONE;
	c->seen = 0;
}

/* The reader checked the header's syntax; what a section may be called is the table's. */
static int begin_section(struct eb_ini *ini, const char *p, size_t n, void *userdata)
{
	char q[EB_INI_QUOTE_SIZE];
	struct conf_ctx *c = userdata;
	const char *name, *end = p + n;

	c->seen = 0;
	if (n == 6 && strncmp(p, "broker", 6) == 0) {
		if (c->broker_line > 0)
			return eb_ini_error(ini,
			                    "duplicate section [broker], first defined on line %u",
			                    c->broker_line);
		c->section = CONF_SECTION_BROKER;
		c->broker_line = ini->line;
		return 0;
	}

	/* A later file's [upstream] replaces an earlier one whole, as a [user] does. */
	if (n == 8 && strncmp(p, "upstream", 8) == 0) {
		if (c->upstream_line > 0)
			return eb_ini_error(
			    ini, "duplicate section [upstream], first defined on line %u",
			    c->upstream_line);
		conf_upstream_clear(&c->conf->upstream);
		c->conf->upstream = (struct eb_conf_upstream){
		    .set = true,
		    .low_water_pct = DEFAULT_UPSTREAM_LOW,
		    .draw_bits = DEFAULT_UPSTREAM_DRAW,
		};
		c->section = CONF_SECTION_UPSTREAM;
		c->upstream_line = ini->line;
		c->upstream_place = eb_ini_here(ini);
		return 0;
	}

	if (n > 5 && strncmp(p, "user", 4) == 0 && (p[4] == ' ' || p[4] == '\t')) {
		name = p + 5 + strspn(p + 5, " \t");
		n = (size_t)(end - name);
		if (!eb_conf_user_name_valid(name, n)) {
			_cleanup_free_ char *copy = strndup(name, n);
			if (!copy)
				return -ENOMEM;
			return eb_ini_error(
			    ini,
			    "invalid user name \"%s\": expected 1..%u letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit",
			    eb_ini_quote(copy, q, sizeof(q)), USER_NAME_MAX);
		}
		c->section = CONF_SECTION_USER;
		return add_user(c, name, n);
	}

	{
		_cleanup_free_ char *copy = strndup(p, n);
		if (!copy)
			return -ENOMEM;
		return eb_ini_error(
		    ini, "unknown section [%s]: expected [broker], [upstream] or [user NAME]",
		    eb_ini_quote(copy, q, sizeof(q)));
	}
}

static int set_key(struct eb_ini *ini, const char *name, const char *value, void *userdata)
{
	char q[EB_INI_QUOTE_SIZE], k[EB_INI_QUOTE_SIZE];
	struct conf_ctx *c = userdata;
	const struct conf_item *it;
	void *base;
	size_t i;
	int r;

	it = conf_find_item(c->section, name, &i);
	if (!it)
		return eb_ini_error(ini, "unknown key \"%s\" in %s",
		                    eb_ini_quote(name, k, sizeof(k)),
		                    c->section == CONF_SECTION_BROKER     ? "[broker]"
		                    : c->section == CONF_SECTION_UPSTREAM ? "[upstream]"
		                                                          : "[user NAME]");
	if (!it->repeatable && (c->seen & (UINT64_C(1) << i)))
		return eb_ini_error(ini, "duplicate key %s, first set on line %u", it->key,
		                    c->item_place[i].line);
	/* listen= collects addresses within a file; a later file's list replaces an earlier's. */
	if (it->repeatable && !(c->seen & (UINT64_C(1) << i)) && c->section == CONF_SECTION_BROKER)
		conf_listen_clear(c->conf);

	base = c->section == CONF_SECTION_BROKER     ? (void *)c->conf
	       : c->section == CONF_SECTION_UPSTREAM ? (void *)&c->conf->upstream
	                                             : (void *)&c->conf->users[c->user];
	c->reason = NULL;
	r = it->parse(c, value, (uint8_t *)base + it->offset);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		if (c->reason)
			return eb_ini_error(ini, "invalid value \"%s\" for %s: %s",
			                    eb_ini_quote(value, q, sizeof(q)), it->key, c->reason);
		return eb_ini_error(ini, "invalid value \"%s\" for %s: expected %s",
		                    eb_ini_quote(value, q, sizeof(q)), it->key, it->expected);
	}

	c->seen |= UINT64_C(1) << i;
	c->item_place[i] = eb_ini_here(ini);
	return 0;
}

static const struct eb_ini_ops ops = {
    .begin_file = begin_file,
    .section = begin_section,
    .key = set_key,
};

static struct eb_ini_place broker_item_place(const struct conf_ctx *c, const char *key)
{
	size_t i;

	if (!conf_find_item(CONF_SECTION_BROKER, key, &i))
		return (struct eb_ini_place){};
	return c->item_place[i];
}

static bool place_before(struct eb_ini_place a, struct eb_ini_place b)
{
	return a.file < b.file || (a.file == b.file && a.line < b.line);
}

static bool has_id(const uint32_t *ids, unsigned n, uint32_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* The first uid of a's that b maps too, or -1. */
static int64_t shared_uid(const struct eb_user *a, const struct eb_user *b)
{
	for (unsigned i = 0; i < a->n_unix_uids; i++)
		if (has_id(b->unix_uids, b->n_unix_uids, a->unix_uids[i]))
			return a->unix_uids[i];
	return -1;
}

static int64_t shared_gid(const struct eb_user *a, const struct eb_user *b)
{
	for (unsigned i = 0; i < a->n_unix_gids; i++)
		if (has_id(b->unix_gids, b->n_unix_gids, a->unix_gids[i]))
			return a->unix_gids[i];
	return -1;
}

static bool maps_same_peer(const struct eb_user *a, const struct eb_user *b)
{
	return shared_uid(a, b) >= 0 || shared_gid(a, b) >= 0;
}

/* A later file is authoritative over an earlier one: a user there that maps a uid or gid an
 * earlier file's user maps takes it, and the earlier user is dropped whole (a shipped drop-in's
 * mapping gives way to the administrator's own). Within one file the clash is an error, left
 * for validate(). */
static void drop_overridden_users(struct conf_ctx *c)
{
	struct eb_conf *conf = c->conf;
	unsigned k = 0;

	for (unsigned i = 0; i < conf->n_users; i++) {
		bool dropped = false;

		for (unsigned j = 0; j < conf->n_users && !dropped; j++)
			dropped = j != i && c->user_places[j].file > c->user_places[i].file &&
			          maps_same_peer(&conf->users[i], &conf->users[j]);
		if (dropped) {
			user_clear(&conf->users[i]);
			continue;
		}
		conf->users[k] = conf->users[i];
		c->user_places[k] = c->user_places[i];
		k++;
	}
	conf->n_users = k;
}

/* What no single line can show: relations between keys, and users that could never connect.
 * Every such error is recorded, each user's first. */
static void validate(struct conf_ctx *c)
{
	const struct eb_conf *conf = c->conf;

	if (conf->low_water_pct >= conf->high_water_pct) {
		struct eb_ini_place lo = broker_item_place(c, "low-water-percent"),
				    hi = broker_item_place(c, "high-water-percent");

		eb_ini_error_at(&c->ini, place_before(lo, hi) ? hi : lo,
		                "low-water-percent (%u) must be below high-water-percent (%u)",
		                conf->low_water_pct, conf->high_water_pct);
	}

	if (conf->upstream.set && conf->upstream.n_brokers == 0)
		eb_ini_error_at(
		    &c->ini, c->upstream_place,
		    "[upstream] has no broker=: expected the address of at least one broker to draw from");

	for (unsigned i = 0; i < conf->n_users; i++) {
		const struct eb_user *u = &conf->users[i];

		if (u->roles == 0) {
			eb_ini_error_at(
			    &c->ini, c->user_places[i],
			    "[user %s] has no role: expected role = source, sink or admin",
			    u->name);
			continue;
		}
		if (u->n_keys == 0 && u->n_unix_uids == 0 && u->n_unix_gids == 0) {
			eb_ini_error_at(
			    &c->ini, c->user_places[i],
			    "[user %s] has neither key-file nor unix-uid or unix-gid, so it could never connect",
			    u->name);
			continue;
		}

		/* A peer must map to one user, or its rights would depend on the order of sections.
		 */
		for (unsigned j = 0; j < i; j++) {
			const struct eb_user *o = &conf->users[j];
			int64_t id;

			if ((id = shared_uid(u, o)) >= 0) {
				eb_ini_error_at(
				    &c->ini, c->user_places[i],
				    "[user %s] has unix-uid %u, which [user %s] on line %u has already",
				    u->name, (unsigned)id, o->name, c->user_places[j].line);
				break;
			}
			if ((id = shared_gid(u, o)) >= 0) {
				eb_ini_error_at(
				    &c->ini, c->user_places[i],
				    "[user %s] has unix-gid %u, which [user %s] on line %u has already",
				    u->name, (unsigned)id, o->name, c->user_places[j].line);
				break;
			}
		}
	}
}

int eb_conf_new_default(struct eb_conf **ret)
{
	struct eb_conf *conf;

	if (!ret)
		return -EINVAL;
	conf = calloc(1, sizeof(*conf));
	if (!conf)
		return -ENOMEM;
	*conf = (struct eb_conf){
	    .capacity_bits = DEFAULT_CAPACITY_BITS,
	    .low_water_pct = DEFAULT_LOW_WATER_PCT,
	    .high_water_pct = DEFAULT_HIGH_WATER_PCT,
	    .seed_file = strdup(DEFAULT_SEED_FILE),
	    .seed_save_interval_s = DEFAULT_SEED_SAVE_S,
	    .status_interval_s = DEFAULT_STATUS_S,
	    .max_sessions = DEFAULT_MAX_SESSIONS,
	    .max_local_sessions = DEFAULT_MAX_LOCAL,
	    .max_handshakes = DEFAULT_MAX_HANDSHAKES,
	    .max_lingering = DEFAULT_MAX_LINGERING,
	    .max_handshakes_per_address = DEFAULT_MAX_PER_ADDR,
	    .hello_timeout_s = DEFAULT_HELLO_S,
	    .frame_timeout_s = DEFAULT_FRAME_S,
	    .handshake_threads = EB_CONF_HANDSHAKE_THREADS_AUTO,
	};
	if (!conf->seed_file) {
		free(conf);
		return -ENOMEM;
	}
	*ret = conf;
	return 0;
}

struct eb_conf *eb_conf_free(struct eb_conf *conf)
{
	if (!conf)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		user_clear(&conf->users[i]);
	free(conf->users);
	conf_listen_clear(conf);
	conf_upstream_clear(&conf->upstream);
	free(conf->seed_file);
	free(conf->path);
	free(conf);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct eb_conf *, eb_conf_free);

static void set_error(char **ret_error, char *error)
{
	if (ret_error)
		*ret_error = error;
	else
		free(error);
}

int eb_conf_load_files(const char *const *paths, unsigned n_paths, struct eb_conf **ret,
                       char **ret_error)
{
	_cleanup_(eb_conf_freep) struct eb_conf *conf = NULL;
	struct conf_ctx c = {};
	int r;

	if (!paths || n_paths == 0 || !ret)
		return -EINVAL;

	r = eb_conf_new_default(&conf);
	if (r < 0) {
		set_error(ret_error, NULL);
		return r;
	}
	conf->path = strdup(paths[n_paths - 1]);
	if (!conf->path) {
		set_error(ret_error, NULL);
		return -ENOMEM;
	}

	c.conf = conf;
	if (eb_ini_parse(&c.ini, paths, n_paths, &ops, &c) >= 0) {
		drop_overridden_users(&c);
		validate(&c);
	}
	free(c.user_places);
	r = eb_ini_finish(&c.ini, ret_error);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(conf);
	return 0;
}

int eb_conf_load(const char *path, struct eb_conf **ret, char **ret_error)
{
	return eb_conf_load_files(&path, 1, ret, ret_error);
}

bool eb_conf_proxy_trusted(const struct eb_conf *conf, const struct sockaddr *peer)
{
	for (unsigned i = 0; i < conf->n_proxy_from; i++)
		if (eb_cidr_match(&conf->proxy_from[i], peer))
			return true;
	return false;
}

const struct eb_user *eb_conf_find_user(const struct eb_conf *conf, const char *name)
{
	if (!conf || !name)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		if (strcmp(conf->users[i].name, name) == 0)
			return &conf->users[i];
	return NULL;
}

/* The uid decides before the gid: a uid names one account, a gid a whole group of them; and the
 * primary gid before the supplementary groups, which a process gathers from several places. */
const struct eb_user *eb_conf_find_unix_peer(const struct eb_conf *conf, uid_t uid, gid_t gid,
                                             const gid_t *groups, size_t n_groups)
{
	const struct eb_user *found = NULL;

	if (!conf)
		return NULL;
	for (unsigned i = 0; i < conf->n_users; i++)
		if (has_id(conf->users[i].unix_uids, conf->users[i].n_unix_uids, uid))
			return &conf->users[i];
	for (unsigned i = 0; i < conf->n_users; i++)
		if (has_id(conf->users[i].unix_gids, conf->users[i].n_unix_gids, gid))
			return &conf->users[i];
	for (unsigned i = 0; i < conf->n_users; i++) {
		const struct eb_user *u = &conf->users[i];

		for (size_t k = 0; groups && k < n_groups; k++)
			if (has_id(u->unix_gids, u->n_unix_gids, groups[k])) {
				if (found)
					return NULL; /* two users: neither */
				found = u;
				break;
			}
	}
	return found;
}
