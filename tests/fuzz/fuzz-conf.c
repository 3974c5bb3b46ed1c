/* SPDX-License-Identifier: MIT */
/* Fuzzes the broker's configuration parser through a memfd, checking what a loaded file promises.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conf.h"
#include "fuzz.h"
#include "macro.h"
#include "uri.h"

/* A few hundred lines of at most 200 characters cover every construct. */
#define INPUT_MAX (64 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_close_ int fd = -EBADF;
	_cleanup_free_ char *error = NULL;
	struct eb_conf *conf = NULL;
	char path[64];
	size_t done = 0;
	int r;

	if (size > INPUT_MAX)
		return 0;
	fd = memfd_create("fuzz-conf", MFD_CLOEXEC);
	check(fd >= 0);
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);
		check(n > 0);
		done += (size_t)n;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

	r = eb_conf_load(path, &conf, &error);
	if (r < 0) {
		/* Every refusal names the file and the line. */
		check(r == -EINVAL || r == -ENOMEM);
		check(!error ||
		      (strncmp(error, path, strlen(path)) == 0 && error[strlen(path)] == ':'));
		check(conf == NULL);
		return 0;
	}

	check(conf->capacity_bits >= 4096 && conf->capacity_bits <= (UINT64_C(1) << 31));
	check(conf->capacity_bits % 512 == 0);
	check(conf->low_water_pct < conf->high_water_pct && conf->high_water_pct <= 100);
	check(conf->seed_file && (conf->seed_file[0] == '\0' || conf->seed_file[0] == '/'));
	check(conf->seed_save_interval_s > 0 && conf->status_interval_s > 0);
	check(conf->max_sessions > 0);
	check(conf->n_listen <= EB_CONF_LISTEN_MAX);
	for (unsigned i = 0; i < conf->n_listen; i++) {
		struct eb_uri u;
		check(eb_uri_parse(conf->listen[i], &u) == 0);
	}
	check(conf->n_users <= EB_CONF_USERS_MAX);
	for (unsigned i = 0; i < conf->n_users; i++) {
		const struct eb_user *u = &conf->users[i];
		check(u->name && u->name[0]);
		check(eb_conf_find_user(conf, u->name) == u);
		check(u->roles != 0);
		check(u->n_keys > 0 || u->n_unix_uids > 0 || u->n_unix_gids > 0);
		check(u->n_keys <= EB_USER_KEYS_MAX);
		for (unsigned k = 0; k < u->n_keys; k++) {
			check(u->keys[k].file[0] == '/');
			check(!u->keys[k].loaded);
			check(k == 0 || (u->keys[k].id && eb_key_id_valid(u->keys[k].id)));
		}
		check(u->max_credit_per_byte <= 8);
		for (unsigned k = 0; k < u->n_unix_uids; k++)
			check(eb_conf_find_unix_peer(conf, u->unix_uids[k], (gid_t)-1, NULL, 0) ==
			      u);
		for (unsigned k = 0; k < u->n_unix_gids; k++)
			check(eb_conf_find_unix_peer(conf, (uid_t)-1, (gid_t)-1, &u->unix_gids[k],
			                             1) == u);
	}
	eb_conf_free(conf);
	return 0;
}
