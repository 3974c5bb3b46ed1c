/* SPDX-License-Identifier: MIT */
/* What an admin may do at runtime (ACTION_REQ: drain, disconnect) and the broker's state it reads
 * back (STATE: the drain, the reloads, the upstream). */
#pragma once

#include <stdbool.h>

struct broker;
struct registry_entry;
struct eb_msg;
struct eb_msg_action_req;

/* At most this many actions in a window, from every admin together; the next is answered
 * LIMITED. An operator types a few; a script gone wrong must not close every session in a loop. */
#define ADMIN_ACTIONS_BURST         10
#define ADMIN_ACTIONS_INTERVAL_USEC (10 * 1000000ULL)

/* Carries out q for the admin session asker, logs it with who asked, and writes the ACTION
 * answer into *ret. */
void admin_action(struct broker *b, struct registry_entry *asker, const struct eb_msg_action_req *q,
                  struct eb_msg *ret);
/* The STATE answer into *ret. */
void admin_state(struct broker *b, struct eb_msg *ret);
