/* SPDX-License-Identifier: MIT */
/* Connections from the load balancers named in proxy-protocol-from=: each waits here, before any
 * TLS, for the PROXY protocol header that names its client, then becomes that client's session. */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#include "list.h"

struct broker;

/* Whether a connection just accepted on a TLS listener from peer (accept4()'s address) comes
 * from one of proxy-protocol-from= (and so must begin with a PROXY header); its address in
 * *ret_balancer then. */
bool proxied_expected(struct broker *b, const struct sockaddr *peer, socklen_t peer_len,
                      struct sockaddr_storage *ret_balancer);

/* Takes fd and waits for its header, at most hello-timeout-sec; at most max-handshakes wait at
 * once. Whatever befalls it is logged here: a refusal in one rate-limited line, a health check
 * (a LOCAL header, or no byte, then the end) at debug level only. */
void proxied_new(struct broker *b, int fd, const struct sockaddr_storage *balancer,
                 const char *listener);

/* Closes every connection still waiting (the broker stops). */
void proxied_free_all(struct broker *b);
