/* SPDX-License-Identifier: MIT */
/* A worker thread that conditions donations into the pool while the event loop serves peers. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct broker;
struct session;
struct conditioner;

/* Donations in flight at once, and per session: enough to keep the worker busy while the loop
 * decrypts the next ones, few enough that a donation is credited within milliseconds. */
#define CONDITIONER_SLOTS       16
#define CONDITIONER_PER_SESSION 4

int conditioner_new(struct broker *b, struct conditioner **ret);
/* Finishes every queued donation (crediting it), then stops the thread. */
struct conditioner *conditioner_free(struct conditioner *c);

/* Whether a donation from s would be taken now. */
bool conditioner_has_room(const struct conditioner *c, const struct session *s);
/* Queues len bytes (copied) with the credit claimed for them. The session gets its PUT_ACK,
 * and the broker broker_pool_changed(), from the event loop once the worker is done. */
int conditioner_submit(struct conditioner *c, struct session *s, const uint8_t *data, uint32_t len,
                       uint64_t claim);
/* Forgets s in every queued donation: the data is still conditioned, nobody is acknowledged. */
void conditioner_forget(struct conditioner *c, struct session *s);
