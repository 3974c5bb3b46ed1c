/* SPDX-License-Identifier: MIT */
/* eb-brokerd put together: the broker made and its layers wired, run, and taken down. */
#pragma once

struct broker;
struct eb_conf;

/* Takes conf, also on failure; config_path is kept for reloads (SIGHUP). */
int brokerd_new(struct eb_conf *conf, const char *config_path, struct broker **ret);
struct broker *brokerd_free(struct broker *b);
static inline void brokerd_freep(struct broker **b)
{
	if (*b)
		brokerd_free(*b);
}

/* Takes the fds systemd passed, or binds the URIs given (or the config's). */
int brokerd_listen(struct broker *b, char **uris, unsigned n_uris);
/* READY=1, the loop until a signal ends it, a goodbye to every ready peer and the seed saved. */
int brokerd_run(struct broker *b);
