/* SPDX-License-Identifier: MIT */
/* The broker's listening sockets: taken from systemd or bound from the configuration, each
 * accepted connection a session. Batches and the back-off after accept() runs out of fds or
 * memory are libeb's (listeners.h). */
#pragma once

struct broker;

/* Takes the fds systemd passed (LISTEN_FDS), or binds uris (the configuration's listen= when
 * n_uris is 0), and watches them. Logs what fails. */
int listen_open(struct broker *b, char **uris, unsigned n_uris);
/* Closes every listener and the back-off timer; safe to call with none open. */
void listen_close(struct broker *b);
