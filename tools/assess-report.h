/* SPDX-License-Identifier: MIT */
/* eb-assess's report of the IID tests and the restart tests: text sections, and members of the
 * JSON object (each starts with ", "). */
#pragma once

#include <stdint.h>

#include "assess-iid.h"
#include "assess-restart.h"

void assess_report_iid_json(const struct assess_iid *iid, uint64_t seed);
void assess_report_iid_text(const struct assess_iid *iid, uint64_t seed);
void assess_report_restart_json(const struct assess_restart *rs);
void assess_report_restart_text(const struct assess_restart *rs);
