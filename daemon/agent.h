/* SPDX-License-Identifier: MIT */
/* The agent: a listener named "agent" (eb-brokerd-agent.socket) where a load balancer's agent
 * check reads one line about this broker (agent-word.h) and the connection closes. */
#pragma once

#include <stdbool.h>

struct broker;

/* The name of the socket systemd hands over for the agent. */
#define AGENT_LISTENER "agent"

/* Answers a connection accepted on the agent's listener, and closes it (fd taken). */
void agent_answer(struct broker *b, int fd);
/* The broker stops: the checks already waiting on the agent's listeners are answered "maint". */
void agent_answer_pending(struct broker *b);
