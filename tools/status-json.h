/* SPDX-License-Identifier: MIT */
/* eb-metrics' answer to GET /history.json: the status page's data for scripts. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

struct view;

/* The data of v as one JSON object, or {"broker_up": false} alone when !up. -ENOMEM. */
int status_json_write(FILE *f, const struct view *v, bool up);
