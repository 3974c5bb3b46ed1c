/* SPDX-License-Identifier: MIT */
/* Shared by conf.c (the files into struct eb_conf) and conf-table.c (the keys and their values)
 * alone. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "inifile.h"

enum conf_section {
	CONF_SECTION_NONE,
	CONF_SECTION_BROKER,
	CONF_SECTION_USER,
	CONF_SECTION_UPSTREAM,
};

struct conf_ctx;
typedef int (*conf_parse_fn)(struct conf_ctx *c, const char *value, void *field);

struct conf_item {
	enum conf_section section;
	const char *key;
	conf_parse_fn parse;
	size_t offset;   /* into struct eb_conf for [broker], struct eb_user for [user],
	                  * struct eb_conf_upstream for [upstream] */
	bool repeatable; /* listen= and broker= may be given several times; the rest once */
	const char *expected;
};

#define CONF_ITEMS_MAX 40

/* The table's state over the reader's: files are read in order, later ones override earlier
 * ones. */
struct conf_ctx {
	struct eb_ini ini;
	struct eb_conf *conf;
	enum conf_section section;
	unsigned user;                      /* index of the current [user] in conf->users */
	struct eb_ini_place *user_places;   /* each user's section header, for later errors */
	unsigned broker_line;               /* the current file's [broker], 0 before it */
	unsigned upstream_line;             /* the current file's [upstream], 0 before it */
	struct eb_ini_place upstream_place; /* the [upstream] in force, for later errors */
	uint64_t seen;                      /* bit i: item i was set in the current section */
	struct eb_ini_place item_place[CONF_ITEMS_MAX]; /* where each item was set last */
	const char *reason;   /* a parser's own explanation, instead of the item's "expected" */
	char reason_buf[160]; /* where a parser words a reason that names the item at fault */
};

/* The item for key in section s and its index (< CONF_ITEMS_MAX), or NULL: an unknown key. */
const struct conf_item *conf_find_item(enum conf_section s, const char *key, size_t *ret_index);

/* key-file= and key = ID PATH in a [user] (conf-keys.c): one more key for the current user. */
int conf_parse_user_key_file(struct conf_ctx *c, const char *value, void *field);
int conf_parse_user_key(struct conf_ctx *c, const char *value, void *field);

/* Empties the listen= list, which a later file's list replaces whole. */
void conf_listen_clear(struct eb_conf *conf);
/* Empties [upstream], which a later file's section replaces whole. */
void conf_upstream_clear(struct eb_conf_upstream *u);
