/* SPDX-License-Identifier: MIT */
/* Load for eb-sink-egd's benchmark: C clients, each a thread, each doing N blocking EGD reads
 * (0x02) of 255 bytes one after another, as QEMU's rng-egd does. Prints MB/s and reads/s. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define READ_SIZE 255

struct worker {
	pthread_t thread;
	const char *path;
	unsigned long reads;
	int error;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *run(void *userdata)
{
	struct worker *w = userdata;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static const unsigned char req[2] = {0x02, READ_SIZE};
	unsigned char buf[READ_SIZE];
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", w->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		w->error = errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (unsigned long i = 0; i < w->reads; i++) {
		size_t got = 0;

		if (write(fd, req, sizeof(req)) != (ssize_t)sizeof(req)) {
			w->error = errno ? errno : EIO;
			break;
		}
		while (got < READ_SIZE) {
			ssize_t k = read(fd, buf + got, READ_SIZE - got);

			if (k <= 0) {
				w->error = k < 0 ? errno : ECONNRESET;
				break;
			}
			got += (size_t)k;
		}
		if (w->error)
			break;
	}
	close(fd);
	return NULL;
}

int main(int argc, char *argv[])
{
	unsigned long clients, reads;
	struct worker *w;
	double t0, t;
	char *end;

	if (argc != 4) {
		fprintf(stderr, "Usage: %s SOCKET CLIENTS READS-PER-CLIENT\n", argv[0]);
		return 2;
	}
	clients = strtoul(argv[2], &end, 10);
	if (*end || clients == 0 || clients > 1024)
		return 2;
	reads = strtoul(argv[3], &end, 10);
	if (*end || reads == 0 || reads > 100000000UL)
		return 2;
	w = calloc(clients, sizeof(*w));
	if (!w)
		return 1;
	t0 = now();
	for (unsigned long i = 0; i < clients; i++) {
		w[i] = (struct worker){.path = argv[1], .reads = reads};
		if (pthread_create(&w[i].thread, NULL, run, &w[i]) != 0)
			return 1;
	}
	for (unsigned long i = 0; i < clients; i++)
		pthread_join(w[i].thread, NULL);
	t = now() - t0;
	for (unsigned long i = 0; i < clients; i++)
		if (w[i].error) {
			fprintf(stderr, "client %lu: %s\n", i, strerror(w[i].error));
			free(w);
			return 1;
		}
	printf(
	    "egd 0x02 reads of %d bytes, %lu client(s) x %lu: %.1f MB/s, %.0f reads/s (%.3f s)\n",
	    READ_SIZE, clients, reads, (double)(clients * reads * READ_SIZE) / t / 1e6,
	    (double)(clients * reads) / t, t);
	free(w);
	return 0;
}
