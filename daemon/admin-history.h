/* SPDX-License-Identifier: MIT */
/* The broker's history (history.h) as the admin reads it: made, and sampled from its timer. */
#pragma once

struct broker;

/* Made, and sampled from its timer, every 10 s or every $EB_HISTORY_INTERVAL_MS (docs/testing.md:
 * tests only, 1..10000). Logs its errors. */
int admin_history_start(struct broker *b);
void admin_history_stop(struct broker *b);
