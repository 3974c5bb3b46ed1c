/* SPDX-License-Identifier: MIT */
/* eb-brokerctl history: the broker's last hour and day as sparklines, or as JSON. */
#pragma once

#include <stdbool.h>

struct eb_client;

/* Reads the history table and prints it; logs its errors. 0 or a negative errno. */
int brokerctl_history(struct eb_client *c, bool json);
