/* SPDX-License-Identifier: MIT */
/* eb-brokerctl's runtime actions (drain, undrain, disconnect, disconnect-user) and the broker's
 * state that "status" shows after the pool: the drain, the reloads, the upstream. */
#pragma once

#include <stdbool.h>

struct eb_client;
struct eb_msg_state;
struct json_object;

/* Parses an action's words (argv[0] is the command) into the request: 1, 0 when argv[0] is not
 * an action, or -EINVAL having logged why its argument is wrong. */
struct eb_msg_action_req;
int brokerctl_action_parse(int argc, char *argv[], struct eb_msg_action_req *ret);
/* Sends it and prints what the broker did; returns the exit status: 0 done (or nothing to do),
 * 1 not done (no such session or user, rate-limited, the broker failed). */
int brokerctl_action(struct eb_client *c, const struct eb_msg_action_req *q, bool json);

/* The state's lines under the status's, for people; its fields into o, for scripts. */
void brokerctl_state_print(const struct eb_msg_state *st);
void brokerctl_state_json(const struct eb_msg_state *st, struct json_object *o);
/* The upstream's part alone, for "sources": its lines (none without an [upstream]), and its
 * object (NULL without one). */
void brokerctl_upstream_print(const struct eb_msg_state *st);
struct json_object *brokerctl_upstream_json(const struct eb_msg_state *st);
