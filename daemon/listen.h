/* SPDX-License-Identifier: MIT */
/* The broker's listening sockets: taken from systemd or bound from the configuration, accepted
 * from in batches, rested after accept() runs out of fds or memory. */
#pragma once

struct broker;

/* Takes the fds systemd passed (LISTEN_FDS), or binds uris (the configuration's listen= when
 * n_uris is 0), and watches them. Logs what fails. */
int listeners_open(struct broker *b, char **uris, unsigned n_uris);
/* Closes every listener and the back-off timer; safe to call with none open. */
void listeners_free(struct broker *b);
/* Stops accepting for a while after accept() failed for want of fds or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM): the connection stays queued, so retrying at once would only spin. */
void listeners_pause(struct broker *b);
