/* SPDX-License-Identifier: MIT */
/* The broker's configuration: read at start, read again on SIGHUP (reload), and the descriptor
 * limit the session limits need. */
#pragma once

struct broker;
struct eb_conf;

/* Loads the configuration and its keys from path (NULL: EB_CONF_DEFAULT_PATH, whose absence
 * means defaults and no users). Logs every error found, one line each with file and line; on
 * failure hands the first of them to *ret_error (malloc()ed) if ret_error is not NULL. */
int broker_config_load(const char *path, struct eb_conf **ret, char **ret_error);
/* Raises the soft RLIMIT_NOFILE to what max-sessions and max-local-sessions need. */
void broker_config_raise_nofile(const struct eb_conf *conf);
/* SIGHUP: reads the configuration again; a file that does not load changes nothing. */
void broker_config_reload(struct broker *b);
/* Numbers the keys in new: a key old had too (the same user, id, bytes and hash) keeps its
 * number, any other gets a new one; returns how many got a new one (added), and in *ret_removed
 * (if not NULL) how many of old's keys new does not have. A handshake's key lookup hands the
 * number out, the session checks it once the handshake is done (a key removed while the peer was
 * still proving it is refused), and a reload closes the sessions whose number is gone. */
unsigned broker_config_number_keys(struct broker *b, const struct eb_conf *old, struct eb_conf *new,
                                   unsigned *ret_removed);
