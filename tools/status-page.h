/* SPDX-License-Identifier: MIT */
/* eb-metrics' answer to GET /: one self-contained HTML page of the broker's state and history. */
#pragma once

#include <stdio.h>

struct view;

/* The page for v; with error set (the broker did not answer), a page that says so alone. */
void status_page_write(FILE *f, const struct view *v, const char *error);

/* Text for HTML, element content or a quoted attribute alike. */
void html_escape(FILE *f, const char *s);
