/* SPDX-License-Identifier: MIT */
/* eb-metrics' answer to GET /metrics. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

struct view;

/* The figures of v, or eb_broker_up 0 alone when !up; in OpenMetrics when om (with its # EOF),
 * else in the Prometheus text format. */
void prometheus_write(FILE *f, const struct view *v, bool up, bool om);
