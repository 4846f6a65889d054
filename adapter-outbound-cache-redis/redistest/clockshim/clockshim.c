/*
 * clockshim: redistest's controlled wall clock (WithClock). Preloaded into
 * redis-server, it adds the offset in nanoseconds that the file named by
 * TLB_CLOCK_FILE holds (read on every call) to CLOCK_REALTIME, as
 * clock_gettime, gettimeofday and time report it; the monotonic clock stays
 * real. It calls the kernel directly (no dlsym, no malloc), so it works
 * under jemalloc, where libfaketime's initialisation recurses.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ns(void) {
	const char *path = getenv("TLB_CLOCK_FILE");
	if (!path) return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return 0;
	char buf[32];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) return 0;
	buf[n] = 0;
	long long v = 0;
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) v = v * 10 + (buf[i] - '0');
	return v;
}

static void shift(struct timespec *ts) {
	long long ns = (long long)ts->tv_nsec + offset_ns();
	ts->tv_sec += ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
	int r = (int)syscall(SYS_clock_gettime, id, ts);
	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
	return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
	(void)tz;
	struct timespec ts;
	if (syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts) != 0) return -1;
	shift(&ts);
	if (tv) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
	return 0;
}

time_t time(time_t *t) {
	struct timespec ts;
	syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
	shift(&ts);
	if (t) *t = ts.tv_sec;
	return ts.tv_sec;
}
