/* SPDX-License-Identifier: MIT */
/* Configuration drop-in directories, read the way systemd reads its own: every "*.conf" of every
 * directory, in the order of their file names; a file in a later directory masks one of the same
 * name in an earlier directory (an empty file, or a symbolic link to /dev/null, masks to nothing).
 */
#pragma once

/* More drop-ins than this is a mistake, not a configuration: one per user of a fleet
 * (eb-keygen --user writes one per guest; EB_CONF_USERS_MAX is 4096) and 256 more. */
#define EB_CONFDIR_FILES_MAX (4096 + 256)

/* Lists the drop-ins of dirs (a directory that does not exist has none): *ret is a
 * NULL-terminated array of paths, *ret_n their count. -E2BIG past EB_CONFDIR_FILES_MAX. */
int eb_confdir_list(const char *const *dirs, unsigned n_dirs, char ***ret, unsigned *ret_n);
/* Frees what eb_confdir_list() returned; accepts NULL, returns NULL. */
char **eb_confdir_free(char **paths);
