/* SPDX-License-Identifier: MIT */
#include "egd-proto.h"

#include <errno.h>

int egd_request_parse(const uint8_t *buf, size_t len, struct egd_request *ret, size_t *ret_size)
{
	struct egd_request q = {};
	size_t need;

	if (len < 1)
		return 0;
	switch (buf[0]) {
	case EGD_CMD_LEVEL:
	case EGD_CMD_PID:
		need = 1;
		break;
	case EGD_CMD_READ:
	case EGD_CMD_READ_BLOCK:
		need = 2;
		break;
	case EGD_CMD_WRITE:
		/* The count byte comes after the bits; the data's length is known only then. */
		if (len < 4)
			return 0;
		need = 4 + (size_t)buf[3];
		break;
	default:
		/* Not an enum switch: buf[0] is any byte a peer sent. */
		return -EBADMSG;
	}
	if (len < need)
		return 0;
	q.cmd = (enum egd_cmd)buf[0];
	if (q.cmd == EGD_CMD_READ || q.cmd == EGD_CMD_READ_BLOCK)
		q.count = buf[1];
	if (q.cmd == EGD_CMD_WRITE) {
		q.bits = (uint16_t)((uint16_t)buf[1] << 8 | buf[2]);
		q.count = buf[3];
		q.data = buf + 4;
	}
	*ret = q;
	*ret_size = need;
	return 1;
}
