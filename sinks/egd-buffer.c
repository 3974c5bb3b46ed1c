/* SPDX-License-Identifier: MIT */
#include "egd-buffer.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "macro.h"

struct egd_buffer {
	size_t map_size;
	size_t capacity;
	size_t head; /* index of the oldest byte */
	size_t level;
	bool locked;
	unsigned char data[];
};

int egd_buffer_new(size_t capacity, struct egd_buffer **ret)
{
	struct egd_buffer *b;
	size_t size;
	void *p;

	if (capacity < EGD_BUFFER_MIN || capacity > EGD_BUFFER_MAX)
		return -ERANGE;
	size = sizeof(struct egd_buffer) + capacity;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return negative_errno();
	b = p;
	b->map_size = size;
	b->capacity = capacity;
	/* Served bytes must never reach a core file, swap or a child that could hand them out a
	 * second time. These are best effort; the caller reports a failed lock. */
	(void)madvise(p, size, MADV_DONTDUMP);
	(void)madvise(p, size, MADV_WIPEONFORK);
	b->locked = mlock(p, size) == 0;
	*ret = b;
	return 0;
}

struct egd_buffer *egd_buffer_free(struct egd_buffer *b)
{
	size_t size;
	bool locked;

	if (!b)
		return NULL;
	size = b->map_size;
	locked = b->locked;
	explicit_bzero(b, size);
	if (locked)
		(void)munlock(b, size);
	(void)munmap(b, size);
	return NULL;
}

bool egd_buffer_locked(const struct egd_buffer *b)
{
	return b->locked;
}

size_t egd_buffer_capacity(const struct egd_buffer *b)
{
	return b->capacity;
}

size_t egd_buffer_level(const struct egd_buffer *b)
{
	return b->level;
}

size_t egd_buffer_space(const struct egd_buffer *b)
{
	return b->capacity - b->level;
}

size_t egd_buffer_put(struct egd_buffer *b, const void *src, size_t n)
{
	const unsigned char *s = src;
	size_t done = 0;

	n = MIN(n, egd_buffer_space(b));
	while (done < n) {
		size_t tail = (b->head + b->level) % b->capacity;
		size_t k = MIN(n - done, b->capacity - tail);

		memcpy(b->data + tail, s + done, k);
		b->level += k;
		done += k;
	}
	return n;
}

size_t egd_buffer_take(struct egd_buffer *b, void *dst, size_t n)
{
	unsigned char *d = dst;
	size_t done = 0;

	n = MIN(n, b->level);
	while (done < n) {
		size_t k = MIN(n - done, b->capacity - b->head);

		memcpy(d + done, b->data + b->head, k);
		explicit_bzero(b->data + b->head, k);
		b->head = (b->head + k) % b->capacity;
		b->level -= k;
		done += k;
	}
	if (b->level == 0)
		b->head = 0;
	return n;
}

void egd_buffer_clear(struct egd_buffer *b)
{
	explicit_bzero(b->data, b->capacity);
	b->head = b->level = 0;
}
