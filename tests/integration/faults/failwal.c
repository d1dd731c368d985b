/* LD_PRELOAD shim for tests: while the file named by $SHARDQ_FAULT_FILE exists, every write
   or sync of a file whose name ends in ".wal" fails with EIO, as on a failing disk. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static int failing(int fd) {
    const char *flag = getenv("SHARDQ_FAULT_FILE");
    if (flag == NULL || access(flag, F_OK) != 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 4) return 0;
    path[n] = 0;
    return strcmp(path + n - 4, ".wal") == 0;
}

#define WRAP(ret, name, params, args)                              \
    ret name params {                                              \
        static ret (*real) params;                                 \
        if (!real) real = (ret (*) params)dlsym(RTLD_NEXT, #name); \
        if (failing(fd)) { errno = EIO; return -1; }               \
        return real args;                                          \
    }

WRAP(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(ssize_t, pwrite64, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
WRAP(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
WRAP(ssize_t, pwritev, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o))
WRAP(ssize_t, pwritev64, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o))
WRAP(ssize_t, pwritev2, (int fd, const struct iovec *v, int c, off_t o, int f), (fd, v, c, o, f))
WRAP(ssize_t, pwritev64v2, (int fd, const struct iovec *v, int c, off_t o, int f),
     (fd, v, c, o, f))
WRAP(int, fsync, (int fd), (fd))
WRAP(int, fdatasync, (int fd), (fd))
